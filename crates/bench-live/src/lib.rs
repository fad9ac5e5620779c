//! # twopc-bench-live — `make bench-live`: how long a committed transfer takes to reach a
//! WebSocket subscriber of the local stack, fresh and after the stack has aged, and whether a
//! restart keeps what was committed.
//!
//! The stack is the real `twopc serve` as a child process ([`child`]): its own persisted
//! DynamoDB Local in a fresh data folder, its own data lake, the stream poller and processor,
//! the WebSocket gateway. Only the outside is measured, as a user's client sees it
//! ([`http`]): the HTTP answer and the WebSocket messages.
//!
//! 1. start `twopc serve --no-seed`, create ten accounts through the API, subscribe to
//!    everything;
//! 2. *fresh*: N transfers at C in flight ([`load`]); per committed transfer the HTTP latency
//!    (request to answer) and the push latency (answer to the first WebSocket message carrying
//!    its txId); pushes missing after the timeout are counted; the messages' rate;
//! 3. *aging*: K more transfers as fast as the stack takes them, with progress, then the time
//!    until every one of them was pushed (the backlog the stream processor drains);
//! 4. *aged*: step 2 again;
//! 5. *restart*: stop with SIGINT (no `java` may be left), start on the same data folder, check
//!    the balances, count what is delivered again of what was pushed before, and check that new
//!    transfers are still pushed;
//! 6. [`report`]: `live.md` and `live.json`.
//!
//! The stage breakdown comes from `twopc serve`'s log: the stream processor logs each batch it
//! delivered with its stages (the oldest transaction record's age on arrival, `GetRecords`, the
//! lake append, the subscription lookups, the sends).

#![warn(missing_docs)]

pub mod child;
pub mod http;
pub mod load;
mod phases;
pub mod report;
mod restart;
mod results;
mod serve_log;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use child::Stopped;
use load::per_second;
use twopc_bench::procfs::load_average;

pub use results::{Aging, LiveReport, Measured, Restart, Stages};

/// Why the run could not go on (a failed *check* is a result, reported, not an error).
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The stack could not be started or reached.
    #[error("{0}")]
    Setup(String),
    /// Something the run relies on does not hold.
    #[error("{0}")]
    Check(String),
    /// A file.
    #[error("{what}: {source}")]
    Io {
        /// Which.
        what: String,
        /// Why.
        source: std::io::Error,
    },
}

impl LiveError {
    /// A file error about `what`.
    pub fn io(what: impl std::fmt::Display, source: std::io::Error) -> Self {
        LiveError::Io {
            what: what.to_string(),
            source,
        }
    }
}

/// The run's parameters.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveConfig {
    /// `full` or `quick`.
    pub mode: String,
    /// The `twopc` binary (its debug build is what `make run` users run).
    pub twopc: PathBuf,
    /// Transfers measured, fresh and aged (N).
    pub transfers: usize,
    /// Transfers in flight while measuring (C).
    pub concurrency: usize,
    /// Transfers that age the stack between the two measurements (K).
    pub age: usize,
    /// Transfers in flight while aging.
    pub age_concurrency: usize,
    /// Accounts the transfers move money among.
    pub accounts: usize,
    /// Balance each account starts with (transfers move 1 to 9).
    pub initial_balance: u64,
    /// A push later than this after its answer counts as missing.
    #[serde(serialize_with = "twopc_bench::stats::as_ms")]
    pub push_timeout: Duration,
    /// How long the stream processor may take to drain the aging backlog.
    #[serde(serialize_with = "twopc_bench::stats::as_ms")]
    pub drain_timeout: Duration,
    /// Transfers after the restart (each must be pushed).
    pub after_restart: usize,
    /// Progress lines while aging and draining.
    #[serde(serialize_with = "twopc_bench::stats::as_ms")]
    pub progress_every: Duration,
    /// Keep the run's folder (data, lake, logs) instead of removing it.
    pub keep: bool,
}

impl LiveConfig {
    /// `make bench-live`.
    pub fn full(twopc: PathBuf) -> Self {
        LiveConfig {
            mode: "full".into(),
            twopc,
            transfers: 200,
            concurrency: 8,
            age: 10_000,
            age_concurrency: 16,
            accounts: 10,
            initial_balance: 1_000_000,
            push_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(900),
            after_restart: 20,
            progress_every: Duration::from_secs(5),
            keep: false,
        }
    }

    /// Well under a minute: the shape of the full run, small.
    pub fn quick(twopc: PathBuf) -> Self {
        LiveConfig {
            mode: "quick".into(),
            transfers: 20,
            age: 100,
            after_restart: 5,
            drain_timeout: Duration::from_secs(120),
            ..LiveConfig::full(twopc)
        }
    }

    fn account_ids(&self) -> Vec<String> {
        (0..self.accounts).map(|i| format!("acct-{i:02}")).collect()
    }
}

/// WebSocket messages a committed transfer yields: `entity.committed` for each of its two
/// accounts, and `transaction.completed`.
pub const MESSAGES_PER_TRANSFER: usize = 3;
/// An account's creation: `entity.committed` and `transaction.completed`.
const MESSAGES_PER_ACCOUNT: usize = 2;

/// Runs the whole measurement in a fresh temporary folder (removed at the end unless
/// `cfg.keep`).
pub async fn run(
    cfg: &LiveConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<LiveReport, LiveError> {
    let started = Instant::now();
    let root = std::env::temp_dir().join(format!(
        "twopc-bench-live-{}-{}",
        std::process::id(),
        http::wall_ms()
    ));
    std::fs::create_dir_all(&root).map_err(|e| LiveError::io(root.display(), e))?;
    progress(&format!("run folder {}", root.display()));
    let mut report = LiveReport {
        config: cfg.clone(),
        load_start: load_average(),
        cores: std::thread::available_parallelism().map_or(0, usize::from),
        ..LiveReport::default()
    };
    let outcome = phases::phases(cfg, &root, &mut report, progress).await;
    if cfg.keep || outcome.is_err() {
        progress(&format!("kept {}", root.display()));
    } else {
        let _ = std::fs::remove_dir_all(&root);
    }
    outcome?;
    report.load_end = load_average();
    report.wall = started.elapsed();
    Ok(report)
}
