//! Which DynamoDB `twopc serve` talks to: the embedded engine in this process (the default:
//! nothing to install), DynamoDB Local as a child (the reference, `--engine dynamodb-local`),
//! or one already running (`--dynamodb-endpoint`, which starts neither).
//!
//! The embedded engine keeps its tables in the data folder's `dynamodb.sqlite` (or in memory
//! with `--in-memory`); DynamoDB Local keeps its own in the folder's `dynamodb/`: the two never
//! read each other's data.

use twopc_engine::{EmbeddedEngine, Storage};

use super::dynamodb_local::DynamoDbLocal;
use super::{ServeArgs, ServeError};

/// The engine `twopc serve` starts when no `--dynamodb-endpoint` is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    /// The embedded engine (dynoxide, SQLite) in this process.
    Embedded,
    /// Amazon's DynamoDB Local (Java 17; `make tools` installs it), as a child process.
    #[value(name = "dynamodb-local")]
    DynamodbLocal,
}

/// The DynamoDB this run uses, and what to stop at the end.
pub enum Engine {
    /// In this process.
    Embedded(EmbeddedEngine),
    /// A child process (boxed: it is the large one, and only one is ever made).
    DynamoDbLocal(Box<DynamoDbLocal>),
    /// Someone else's (`--dynamodb-endpoint`).
    Given(String),
}

impl Engine {
    /// Starts the engine `args` ask for (or none, for a given endpoint), saying so on stderr.
    pub async fn start(args: &ServeArgs) -> Result<Engine, ServeError> {
        if let Some(endpoint) = &args.dynamodb_endpoint {
            eprintln!("- using DynamoDB at {endpoint}");
            return Ok(Engine::Given(endpoint.clone()));
        }
        match args.engine {
            EngineKind::Embedded => {
                let storage = if args.in_memory {
                    Storage::InMemory
                } else {
                    Storage::in_folder(&args.data_dir)
                };
                eprintln!(
                    "- starting the embedded DynamoDB engine ({})",
                    where_(&storage)
                );
                note_dynamodb_local_data(args, &storage);
                Ok(Engine::Embedded(EmbeddedEngine::start(storage)?))
            }
            EngineKind::DynamodbLocal => {
                let db_dir = (!args.in_memory).then(|| args.data_dir.join("dynamodb"));
                eprintln!(
                    "- starting DynamoDB Local ({})",
                    db_dir.as_ref().map_or_else(
                        || "in memory".to_owned(),
                        |d| format!("data in {}", d.display())
                    )
                );
                let local = DynamoDbLocal::start(db_dir.as_deref(), &args.data_dir).await?;
                Ok(Engine::DynamoDbLocal(Box::new(local)))
            }
        }
    }

    /// Its endpoint URL.
    pub fn endpoint(&self) -> &str {
        match self {
            Engine::Embedded(engine) => engine.endpoint(),
            Engine::DynamoDbLocal(local) => &local.url,
            Engine::Given(endpoint) => endpoint,
        }
    }

    /// What the banner says it is.
    pub fn describe(&self) -> &'static str {
        match self {
            Engine::Embedded(_) => "embedded engine",
            Engine::DynamoDbLocal(_) => "DynamoDB Local",
            Engine::Given(_) => "given with --dynamodb-endpoint",
        }
    }

    /// Stops what this run started (after the stack has stopped using it).
    pub async fn stop(self) {
        match self {
            Engine::Embedded(engine) => {
                eprintln!("- stopping the embedded DynamoDB engine");
                if let Err(e) = engine.shutdown().await {
                    tracing::warn!(error = %e, "the embedded DynamoDB engine stopped with an error");
                }
            }
            Engine::DynamoDbLocal(local) => {
                eprintln!("- stopping DynamoDB Local");
                local.stop().await;
            }
            Engine::Given(_) => {}
        }
    }
}

/// A data folder that DynamoDB Local kept tables in (an earlier version's default) and the
/// embedded engine has none in yet: said, so that its data is not thought lost.
fn note_dynamodb_local_data(args: &ServeArgs, storage: &Storage) {
    let theirs = args.data_dir.join("dynamodb");
    if let Storage::File(ours) = storage
        && theirs.is_dir()
        && !ours.exists()
    {
        eprintln!(
            "  note: {} holds DynamoDB Local's tables (an earlier run's); the embedded engine keeps \
             its own in {}: pass --engine dynamodb-local to use those",
            theirs.display(),
            ours.display()
        );
    }
}

fn where_(storage: &Storage) -> String {
    match storage {
        Storage::InMemory => "in memory".to_owned(),
        Storage::File(path) => format!("data in {}", path.display()),
    }
}
