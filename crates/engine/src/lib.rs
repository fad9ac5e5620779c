//! # twopc-engine — an embedded DynamoDB engine
//!
//! [`EmbeddedEngine`] serves DynamoDB's HTTP API on a loopback port of its own, from
//! [dynoxide](https://docs.rs/dynoxide-rs) (DynamoDB's API over SQLite), in memory or persisted
//! to one file ([`Storage`]). Any DynamoDB client reaches it at [`EmbeddedEngine::endpoint`],
//! exactly as it reaches DynamoDB Local: the AWS SDK, `twopc serve`, the test suites, the bench.
//!
//! It runs on a thread of its own with a Tokio runtime of its own: dynoxide answers each request
//! synchronously on the thread that serves it (SQLite behind one lock), so it never blocks the
//! caller's runtime, and it serves callers on any runtime, or on none.
//!
//! `twopc serve` embeds it by default; the `twopc-engine` binary runs it as a process of its
//! own, for test harnesses (`twopc-engine -- COMMAND` runs a command against it, as
//! `infra/dynamodb-local.sh run` does against DynamoDB Local). Where it answers differently
//! from DynamoDB Local, docs/limitations.md says so.
#![warn(missing_docs)]

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

use dynoxide::Database;
use tokio::sync::oneshot;

/// Where the engine keeps its tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// In memory: gone when the engine stops.
    InMemory,
    /// In this SQLite file (with its `-wal` and `-shm` files beside it), created with its
    /// folder when missing. Each write is in the file before it is answered: a killed process
    /// loses nothing it answered.
    File(PathBuf),
}

impl Storage {
    /// The engine's file in a data folder: `DIR/dynamodb.sqlite`.
    pub fn in_folder(dir: &Path) -> Storage {
        Storage::File(dir.join(FILE_NAME))
    }
}

/// The name of the engine's file in a data folder ([`Storage::in_folder`]).
pub const FILE_NAME: &str = "dynamodb.sqlite";

/// Why the engine could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The file (or its folder) could not be opened or created.
    #[error("opening the DynamoDB engine's file {}: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: OpenError,
    },
    /// The in-memory database could not be made.
    #[error("starting the in-memory DynamoDB engine: {0}")]
    Memory(#[source] dynoxide::DynoxideError),
    /// The loopback port could not be bound.
    #[error("binding the DynamoDB engine's port {port} on 127.0.0.1: {source}")]
    Bind {
        /// The port asked for (0: any free one).
        port: u16,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Its runtime or thread could not be started.
    #[error("starting the DynamoDB engine's thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The server stopped with an error.
    #[error("the DynamoDB engine's server failed: {0}")]
    Server(String),
    /// Its thread ended without saying how (it panicked).
    #[error("the DynamoDB engine's thread ended abruptly")]
    Lost,
}

/// What went wrong opening a file.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Its folder could not be created.
    #[error(transparent)]
    Folder(#[from] std::io::Error),
    /// The path is not UTF-8 (SQLite is given a string).
    #[error("the path is not UTF-8")]
    NotUtf8,
    /// SQLite refused it (another program's file, a locked or unreadable one).
    #[error(transparent)]
    Engine(#[from] dynoxide::DynoxideError),
}

/// A running engine: DynamoDB's API at [`Self::endpoint`] until [`Self::shutdown`] (or drop).
///
/// ```no_run
/// # async fn demo() -> Result<(), twopc_engine::EngineError> {
/// use twopc_engine::{EmbeddedEngine, Storage};
/// let engine = EmbeddedEngine::start(Storage::InMemory)?;
/// // Point any DynamoDB client at it, e.g. `twopc_dynamo::client(Some(engine.endpoint()))`.
/// println!("DynamoDB at {}", engine.endpoint());
/// engine.shutdown().await?;
/// # Ok(()) }
/// ```
pub struct EmbeddedEngine {
    endpoint: String,
    stop: Option<oneshot::Sender<()>>,
    stopped: Option<oneshot::Receiver<Result<(), String>>>,
}

impl EmbeddedEngine {
    /// Starts the engine on a free loopback port. It accepts connections when this returns.
    pub fn start(storage: Storage) -> Result<EmbeddedEngine, EngineError> {
        EmbeddedEngine::start_on_port(storage, 0)
    }

    /// Starts the engine on `127.0.0.1:port` (0: a free one).
    pub fn start_on_port(storage: Storage, port: u16) -> Result<EmbeddedEngine, EngineError> {
        let db = open(&storage)?;
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| EngineError::Bind { port, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| EngineError::Bind { port, source })?;
        let (stop, stop_rx) = oneshot::channel();
        let (stopped_tx, stopped) = oneshot::channel();
        // The runtime is built on the engine's thread (a runtime may not be dropped inside
        // another, as the caller's is): whether it could be is waited for here.
        let (built_tx, built) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("twopc-engine".into())
            .spawn(move || match runtime() {
                Ok(runtime) => {
                    let _ = built_tx.send(Ok(()));
                    // The receiver is gone only when nobody waits for the outcome.
                    let _ = stopped_tx.send(serve(runtime, listener, db, stop_rx));
                }
                Err(e) => {
                    let _ = built_tx.send(Err(e));
                }
            })
            .map_err(EngineError::Thread)?;
        built
            .recv()
            .map_err(|_| EngineError::Lost)?
            .map_err(EngineError::Thread)?;
        Ok(EmbeddedEngine {
            endpoint: format!("http://{addr}"),
            stop: Some(stop),
            stopped: Some(stopped),
        })
    }

    /// Its URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Stops accepting connections, lets the requests in flight finish, closes the database
    /// (a file is complete on disk when this returns).
    pub async fn shutdown(mut self) -> Result<(), EngineError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.stopped.take() {
            Some(stopped) => match stopped.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(EngineError::Server(e)),
                Err(_) => Err(EngineError::Lost),
            },
            None => Ok(()),
        }
    }
}

impl Drop for EmbeddedEngine {
    /// Tells the engine to stop, without waiting for it (what is answered is on disk already).
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn open(storage: &Storage) -> Result<Database, EngineError> {
    match storage {
        Storage::InMemory => Database::memory().map_err(EngineError::Memory),
        Storage::File(path) => open_file(path).map_err(|source| EngineError::Open {
            path: path.clone(),
            source,
        }),
    }
}

fn open_file(path: &Path) -> Result<Database, OpenError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let text = path.to_str().ok_or(OpenError::NotUtf8)?;
    Ok(Database::new(text)?)
}

/// The engine's runtime. Two workers: one request parses or answers while another holds
/// SQLite's lock.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("twopc-engine-worker")
        .enable_io()
        .enable_time()
        .build()
}

/// The engine's thread: its runtime serves until `stop`, then is dropped with every connection
/// task, so the last handle on the database (and SQLite's file) is closed before this returns.
fn serve(
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
    db: Database,
    stop: oneshot::Receiver<()>,
) -> Result<(), String> {
    let outcome = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        dynoxide::server::serve_with_shutdown(listener, db, async move {
            // A dropped sender (the engine dropped) stops it too.
            let _ = stop.await;
        })
        .await
    });
    drop(runtime);
    outcome
}
