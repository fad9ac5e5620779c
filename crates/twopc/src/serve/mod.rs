//! `twopc serve`: the whole system on one machine, against an embedded DynamoDB engine.
//!
//! - [`pidfile`]: one `twopc serve` per data folder (an advisory lock held while it runs);
//! - [`engine`]: which DynamoDB: the embedded engine (`twopc-engine`, persisted in the data folder
//!   or in memory), or [`dynamodb_local`] as a child process, unless `--dynamodb-endpoint` names
//!   one;
//! - [`stack`]: the parts, wired once: the demo's configuration ([`demo`]), tables, seed, the
//!   coordinator's handler, the sweeper, the WebSocket [`gateway`], the stream poller
//!   ([`streams`]);
//! - [`routes`]: the HTTP API through the coordinator Lambda's own handler ([`apigw`]), the live
//!   page and WebSocket, item browsing ([`items`]), every refusal in JSON ([`answers`]);
//! - here: the options, the run (sweeper timer, Ctrl-C), the banner, the errors.

mod answers;
mod apigw;
mod demo;
mod dynamodb_local;
mod engine;
mod gateway;
mod items;
mod pidfile;
mod routes;
mod stack;
mod streams;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tracing::warn;
use twopc_core::ports::PortError;
use twopc_function::env::ConfigError;

use dynamodb_local::LocalError;
pub use engine::EngineKind;
use pidfile::Claim;
use stack::Stack;

/// Options of `twopc serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1", env = "TWOPC_HOST")]
    pub host: String,
    /// Port of the HTTP API.
    #[arg(long, default_value_t = 3000, env = "TWOPC_PORT")]
    pub port: u16,
    /// The DynamoDB engine to start: embedded (in this process, nothing to install) or
    /// dynamodb-local (Amazon's DynamoDB Local: Java 17, installed by `make tools`).
    #[arg(long, value_enum, default_value_t = EngineKind::Embedded, env = "TWOPC_ENGINE")]
    pub engine: EngineKind,
    /// Use this DynamoDB endpoint (any DynamoDB, DynamoDB Local) instead of starting an engine.
    #[arg(long, env = "TWOPC_DYNAMODB_ENDPOINT")]
    pub dynamodb_endpoint: Option<String>,
    /// Folder for the data (the engine's files) and the run's state files.
    #[arg(long, default_value = ".twopc", env = "TWOPC_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Keep the engine's data in memory (lost at exit).
    #[arg(long)]
    pub in_memory: bool,
    /// How often the sweeper runs, in milliseconds.
    #[arg(long, default_value_t = 5_000, env = "TWOPC_SWEEP_INTERVAL_MS")]
    pub sweep_interval_ms: u64,
    /// Prefix of the table names.
    #[arg(long, default_value = "twopc-", env = "TWOPC_TABLE_PREFIX")]
    pub table_prefix: String,
    /// Do not write the demo's seed items.
    #[arg(long)]
    pub no_seed: bool,
    /// Folder of the data lake (Parquet, `committed/dt=YYYY-MM-DD/*.parquet`, as in S3).
    #[arg(long, default_value = "data-lake", env = "TWOPC_LAKE_DIR")]
    pub lake_dir: PathBuf,
    /// How long the data lake buffers rows before rolling them into a file, in milliseconds
    /// (Firehose's buffer in AWS is at least 60 s).
    #[arg(long, default_value_t = 1_000)]
    pub lake_buffer_ms: u64,
    /// Also admit WebSocket connections with `?token=<this shared token>` (a demo opt-in; they
    /// may subscribe to everything). Without it, only tokens from `twopc token` are admitted.
    #[arg(long, env = "TWOPC_WS_TOKEN")]
    pub ws_token: Option<String>,
    /// How often the streams are polled when idle, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub stream_poll_ms: u64,
    /// A custom participant of your own, reached over the `http` transport: NAME=URL
    /// (repeatable; docs/participants.md). Give it the secret of --signing-secret-file.
    #[arg(long = "http-participant", value_name = "NAME=URL", value_parser = HttpParticipant::parse)]
    pub http_participants: Vec<HttpParticipant>,
    /// Sign the requests to http participants with the secret in this file (at least 16
    /// bytes; one trailing newline ignored) instead of one drawn for the run.
    #[arg(long, value_name = "FILE")]
    pub signing_secret_file: Option<PathBuf>,
    /// How the coordinator commits: auto (a transaction of plain tables as one native
    /// TransactWriteItems, any other staged; docs/protocol.md, "Native transactions"), staged
    /// (answered after one round, finished after the answer; "The staged commit") or classic
    /// (answered after five rounds).
    #[arg(long, default_value = "auto", env = "TWOPC_COMMIT_MODE",
        value_parser = clap::builder::PossibleValuesParser::new(
            twopc_core::coordinator::CommitMode::ALL.map(twopc_core::coordinator::CommitMode::as_str)))]
    pub commit_mode: String,
}

/// A custom participant named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpParticipant {
    /// The service's name in transactions.
    pub name: String,
    /// Its base URL.
    pub url: String,
}

impl HttpParticipant {
    fn parse(text: &str) -> Result<HttpParticipant, String> {
        let (name, url) = text
            .split_once('=')
            .ok_or("expected NAME=URL, e.g. loyalty=http://127.0.0.1:3002")?;
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "{name:?}: a service name is letters, digits, - and _"
            ));
        }
        if demo::DEMO_SERVICES.contains(&name) {
            return Err(format!(
                "{name:?} is a service of the demo already: choose another name"
            ));
        }
        if !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(format!("{url:?}: expected an http:// or https:// URL"));
        }
        Ok(HttpParticipant {
            name: name.to_owned(),
            url: url.trim_end_matches('/').to_owned(),
        })
    }
}

/// The secret of `--signing-secret-file`.
fn read_secret(path: &std::path::Path) -> Result<String, ServeError> {
    let text = std::fs::read_to_string(path).map_err(|source| ServeError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(text.strip_suffix('\n').unwrap_or(&text).to_owned())
}

/// Why `twopc serve` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Another `twopc serve` holds the data folder.
    #[error(
        "twopc serve is already running with data folder {} ({}{}): it holds {}; stop it (Ctrl-C in its terminal, or {}), or pass another --data-dir",
        data_dir.display(),
        pid.map_or_else(|| "pid not recorded yet".to_owned(), |p| format!("pid {p}")),
        if url.is_empty() { String::new() } else { format!(", {url}") },
        data_dir.join("serve.lock").display(),
        pid.map_or_else(|| "kill the process holding the lock".to_owned(), |p| format!("`kill {p}`"))
    )]
    AlreadyRunning {
        /// The folder.
        data_dir: PathBuf,
        /// The other process, as it recorded itself.
        pid: Option<u32>,
        /// Where it serves.
        url: String,
    },
    /// The port is taken.
    #[error(
        "port {port} is already in use (another twopc serve?): stop that process or pass --port"
    )]
    PortInUse {
        /// The port.
        port: u16,
    },
    /// `--host`/`--port` do not make an address, or it cannot be listened on.
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// A file of the data folder.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The WebSocket signing key of the data folder.
    #[error("the WebSocket signing key: {0}")]
    SigningKey(#[from] twopc_authorizer::local::LocalKeyError),
    /// DynamoDB Local did not start.
    #[error(transparent)]
    DynamoDbLocal(#[from] LocalError),
    /// The embedded engine did not start.
    #[error(transparent)]
    Engine(#[from] twopc_engine::EngineError),
    /// The demo's configuration is not one the coordinator accepts (a bug).
    #[error("the local stack's configuration: {0}")]
    Config(#[from] ConfigError),
    /// A table could not be created.
    #[error("creating table {table}: {source} (is {endpoint} reachable?)")]
    Table {
        /// The table.
        table: String,
        /// The DynamoDB endpoint.
        endpoint: String,
        /// Why.
        source: PortError,
    },
    /// The demo items could not be written.
    #[error("seeding the demo items: {0}")]
    Seed(PortError),
    /// A table's stream could not be found.
    #[error("reading the tables' streams: {0}")]
    Streams(#[from] twopc_fanout::poll::PollError),
    /// The stream poller has no checkpoint file to save its positions in (serve always names
    /// one: a bug).
    #[error("reading the tables' streams: no checkpoint file")]
    NoCheckpointFile,
    /// The HTTP server stopped.
    #[error("HTTP server failed: {0}")]
    Server(std::io::Error),
}

/// Runs the local stack until Ctrl-C (or SIGTERM).
pub async fn serve(args: ServeArgs) -> Result<(), ServeError> {
    let claim = Claim::take(&args.data_dir)?;
    let addr = format!("{}:{}", args.host, args.port);
    let addr: SocketAddr = addr.parse().map_err(|e| ServeError::Listen {
        addr: addr.clone(),
        reason: format!("{e} (--host/--port)"),
    })?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => ServeError::PortInUse { port: args.port },
            _ => ServeError::Listen {
                addr: addr.to_string(),
                reason: e.to_string(),
            },
        })?;
    let url = match listener.local_addr() {
        Ok(a) => format!("http://{a}"),
        Err(e) => {
            return Err(ServeError::Listen {
                addr: addr.to_string(),
                reason: e.to_string(),
            });
        }
    };
    claim.serving_at(&url)?;
    let engine = engine::Engine::start(&args).await?;
    let outcome = run(&args, listener, &url, &engine).await;
    engine.stop().await;
    outcome
}

async fn run(
    args: &ServeArgs,
    listener: tokio::net::TcpListener,
    url: &str,
    engine: &engine::Engine,
) -> Result<(), ServeError> {
    let endpoint = engine.endpoint();
    let stack = Arc::new(Stack::build(args, endpoint, url).await?);
    let sweeping = tokio::spawn(sweep_forever(
        stack.clone(),
        Duration::from_millis(args.sweep_interval_ms.max(10)),
    ));
    banner(url, engine, args);
    let served = axum::serve(listener, routes::router(stack.clone()))
        .with_graceful_shutdown(shutdown_signal())
        .await;
    sweeping.abort();
    eprintln!("- shutting down");
    // Staged commits answered but not finished yet: finished now rather than left to the
    // sweeper of the next run.
    stack.app.after_answer.drain().await;
    stack.streams.stop().await;
    served.map_err(ServeError::Server)
}

fn banner(url: &str, engine: &engine::Engine, args: &ServeArgs) {
    println!(
        r#"
dynamo-2pc local stack
  HTTP API      {url}   (POST /transactions, GET /transactions/{{txId}})
  DynamoDB      {endpoint}   ({engine}; tables {prefix}transactions, {prefix}accounts, {prefix}wallets, {prefix}inventory, {prefix}payments)
  payments      {url}/services/payments   (a custom participant; GET .../authorisations)
{custom}  live page     {url}/   (WebSocket {ws}/ws)
  console       {url}/console   (the operator console)
  sweeper       every {sweep} ms
  data          {data}
  data lake     {lake}/committed/dt=YYYY-MM-DD/*.parquet   (make lake queries it)

Try a transfer:
  curl -s -X POST {url}/transactions -H 'Idempotency-Key: demo-1' -d '{{"participants": [
    {{"participant": "accounts", "key": {{"id": "alice"}}, "op": {{"add": {{"balance": -10}}, "require": {{"balance": {{"gte": 10}}}}}}}},
    {{"participant": "accounts", "key": {{"id": "bob"}}, "op": {{"add": {{"balance": 10}}}}}}]}}'
or: twopc transfer --from alice --to bob --amount 10
Ctrl-C stops everything this process started.
"#,
        endpoint = engine.endpoint(),
        engine = engine.describe(),
        prefix = args.table_prefix,
        custom = args
            .http_participants
            .iter()
            .map(|p| format!("  {:<13} {}   (yours, over http)\n", p.name, p.url))
            .collect::<String>(),
        ws = url.replacen("http", "ws", 1),
        lake = args.lake_dir.display(),
        sweep = args.sweep_interval_ms,
        data = if args.in_memory && args.dynamodb_endpoint.is_none() {
            "in memory".to_owned()
        } else {
            args.data_dir.display().to_string()
        },
    );
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Most custom-participant states one sweep pass resolves.
pub const SWEEP_LIMIT: usize = 100;

async fn sweep_forever(stack: Arc<Stack>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // The sweeper logs what it did; only a failed pass is ours to report.
        if let Err(e) = stack.sweeper.run().await {
            warn!(error = %e, "sweeper pass failed");
        }
        // The custom participant resolves what its coordinator left unfinished (its own
        // sweep, as a deployed service would schedule it).
        if let Err(e) = stack.payments.sweep(SWEEP_LIMIT).await {
            warn!(error = %e, "payments sweep failed; the next pass retries");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HttpParticipant;

    #[test]
    fn an_http_participant_is_name_equals_url_and_takes_no_demo_name() {
        assert_eq!(
            HttpParticipant::parse("loyalty=http://127.0.0.1:3002/"),
            Ok(HttpParticipant {
                name: "loyalty".into(),
                url: "http://127.0.0.1:3002".into()
            })
        );
        for (bad, says) in [
            ("loyalty", "NAME=URL"),
            ("=http://x", "a service name"),
            ("payments=http://x", "a service of the demo"),
            ("loyalty=ftp://x", "http://"),
            ("loy alty=http://x", "a service name"),
        ] {
            let e = HttpParticipant::parse(bad).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
