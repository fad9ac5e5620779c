//! `twopc-bench live` (`make bench-live`): how long a committed transfer takes to reach a
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

pub mod child;
pub mod http;
pub mod load;
pub mod report;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::procfs::load_average;
use crate::stats::Latency;
use child::{Serve, Stopped};
use http::Feed;
use load::{Load, Transfer, per_second};

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
#[derive(Clone, Debug)]
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
    pub push_timeout: Duration,
    /// How long the stream processor may take to drain the aging backlog.
    pub drain_timeout: Duration,
    /// Transfers after the restart (each must be pushed).
    pub after_restart: usize,
    /// Progress lines while aging and draining.
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

/// Where the time of a push goes: the stream processor logs each batch it delivered (those
/// that yielded rows or pushes) with its stages, which the run reads back from `twopc serve`'s
/// log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stages {
    /// Batches the processor logged as delivered.
    pub batches: usize,
    /// Stream records in those batches.
    pub records: usize,
    /// Median time between two logged batches.
    pub gap_p50: Duration,
    /// Longest time between two logged batches.
    pub gap_max: Duration,
    /// Per batch: the oldest transaction record's age on arrival (coordinator's write →
    /// through the stream and the poller → the processor).
    pub age: Latency,
    /// Per batch: the poller's `GetRecords`.
    pub read: Latency,
    /// Per batch: the lake write (at the same time as the lookups and pushes).
    pub lake: Latency,
    /// Per batch: the subscription lookups.
    pub lookup: Latency,
    /// Per batch: the WebSocket sends.
    pub push: Latency,
}

/// A measured phase (fresh or aged).
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// `fresh` or `aged`.
    pub label: String,
    /// Transfers committed.
    pub committed: usize,
    /// Transfers given up.
    pub failed: Vec<String>,
    /// Attempts aborted and retried.
    pub aborted_attempts: usize,
    /// Attempts that errored and were retried.
    pub error_attempts: usize,
    /// Answered before every item applied them (`applied: false`: the staged commit).
    pub unfinished: usize,
    /// Request to answer, committed transfers.
    pub http: Latency,
    /// Committed transfers per second while measuring.
    pub commit_rate: f64,
    /// Answer to first WebSocket message, the pushes that arrived within the timeout.
    pub push: Latency,
    /// Pushes missing after the timeout.
    pub missing: usize,
    /// Pushes that arrived before the HTTP answer did (counted as 0).
    pub before_answer: usize,
    /// Answer to the `transaction.completed` message (the transactions table's stream).
    pub completed: Latency,
    /// Transfers with fewer than all their messages when the timeout ran out.
    pub incomplete: usize,
    /// WebSocket messages carrying the phase's txIds.
    pub messages: usize,
    /// First to last of those messages.
    pub push_span: Duration,
    /// Where the push latency goes, seen from outside.
    pub stages: Stages,
}

impl Measured {
    /// WebSocket messages per second, first to last push of the phase.
    pub fn message_rate(&self) -> f64 {
        per_second(self.messages, self.push_span)
    }
}

/// The aging phase.
#[derive(Clone, Debug, Default)]
pub struct Aging {
    /// Transfers committed.
    pub committed: usize,
    /// Transfers given up.
    pub failed: Vec<String>,
    /// Attempts aborted and retried.
    pub aborted_attempts: usize,
    /// Attempts that errored and were retried.
    pub error_attempts: usize,
    /// First request to last answer.
    pub span: Duration,
    /// Request to answer.
    pub http: Latency,
    /// Answer to first push, those that arrived.
    pub push: Latency,
    /// Committed but not yet pushed when the last answer came.
    pub backlog: usize,
    /// Committed but without all their messages when the last answer came.
    pub backlog_messages: usize,
    /// Last answer to every aging transfer's first push (None: not within the drain timeout).
    pub drain_first: Option<Duration>,
    /// Last answer to every message of every aging transfer (None: not within the timeout).
    pub drain: Option<Duration>,
    /// Answer to `transaction.completed`.
    pub completed: Latency,
    /// Never pushed.
    pub missing: usize,
    /// WebSocket messages carrying aging txIds.
    pub messages: usize,
    /// First to last of them.
    pub push_span: Duration,
    /// Batches and records the processor logged meanwhile.
    pub stages: Stages,
}

/// The restart.
#[derive(Clone, Debug, Default)]
pub struct Restart {
    /// How the first `twopc serve` stopped.
    pub first_stop: Option<Stopped>,
    /// How the second stopped.
    pub second_stop: Option<Stopped>,
    /// Startup time (to the API's first answer), first start and restart.
    pub startups: Vec<Duration>,
    /// Balances read before the stop.
    pub before: Vec<(String, String)>,
    /// Balances read after the restart, before any new transfer.
    pub after: Vec<(String, String)>,
    /// Distinct messages received before the stop.
    pub pushed_before: usize,
    /// Messages received again (same event) on the same connection before the stop.
    pub ws_repeated_before: usize,
    /// Messages after the restart for events already pushed before it.
    pub ws_redelivered: usize,
    /// Lake rows written after the restart for events written before it (same `eventId`).
    pub lake_redelivered: usize,
    /// Lake rows with an eventId seen before, over the whole run.
    pub lake_duplicates: usize,
    /// Transfers committed after the restart.
    pub after_committed: usize,
    /// Of those, pushed within the timeout.
    pub after_pushed: usize,
    /// Answer to first push, after the restart.
    pub after_push: Latency,
}

impl Restart {
    /// The balances survived the restart.
    pub fn balances_kept(&self) -> bool {
        !self.before.is_empty() && self.before == self.after
    }
}

/// The whole run.
#[derive(Clone, Debug, Default)]
pub struct LiveReport {
    /// Parameters.
    pub mode: String,
    /// N.
    pub transfers: usize,
    /// C.
    pub concurrency: usize,
    /// K.
    pub age: usize,
    /// In flight while aging.
    pub age_concurrency: usize,
    /// Accounts.
    pub accounts: usize,
    /// Their starting balance.
    pub initial_balance: u64,
    /// Push timeout.
    pub push_timeout: Duration,
    /// The `twopc` binary measured.
    pub twopc: String,
    /// Load average at start and end.
    pub load_start: Option<String>,
    /// At the end.
    pub load_end: Option<String>,
    /// Cores.
    pub cores: usize,
    /// The run itself.
    pub wall: Duration,
    /// `make bench-live` as a whole (builds included), when known.
    pub make_wall: Option<Duration>,
    /// Fresh measurement.
    pub fresh: Measured,
    /// Aging.
    pub aging: Aging,
    /// Aged measurement.
    pub aged: Measured,
    /// Restart.
    pub restart: Restart,
    /// Size of the data folder after aging (DynamoDB Local's files).
    pub data_bytes: u64,
}

impl LiveReport {
    /// Every behaviour check: all transfers committed, every push arrived, the restart kept
    /// the balances (and their sum), the stack stopped cleanly leaving no `java`.
    pub fn checks(&self) -> Vec<(String, bool)> {
        let sum_ok = {
            let sum: Option<u128> = self
                .restart
                .after
                .iter()
                .map(|(_, b)| b.parse::<u128>().ok())
                .sum();
            sum == Some(self.accounts as u128 * u128::from(self.initial_balance))
        };
        let stopped = |s: &Option<Stopped>| s.as_ref().is_some_and(Stopped::clean);
        vec![
            (
                format!(
                    "every measured transfer committed ({} + {} of {} each)",
                    self.fresh.committed, self.aged.committed, self.transfers
                ),
                self.fresh.committed == self.transfers
                    && self.aged.committed == self.transfers
                    && self.fresh.failed.is_empty()
                    && self.aged.failed.is_empty(),
            ),
            (
                format!(
                    "every aging transfer committed ({} of {})",
                    self.aging.committed, self.age
                ),
                self.aging.committed == self.age && self.aging.failed.is_empty(),
            ),
            (
                "every push arrived within the timeout (fresh, aged, after the restart)".into(),
                self.fresh.missing == 0
                    && self.aged.missing == 0
                    && self.restart.after_pushed == self.restart.after_committed,
            ),
            (
                "every aging transfer was pushed".into(),
                self.aging.missing == 0,
            ),
            (
                "the balances after the restart are the ones before it".into(),
                self.restart.balances_kept(),
            ),
            (
                "the balances sum to what the accounts started with".into(),
                sum_ok,
            ),
            (
                "transfers after the restart commit".into(),
                self.restart.after_committed > 0,
            ),
            (
                "twopc serve stopped on SIGINT both times, leaving no java".into(),
                stopped(&self.restart.first_stop) && stopped(&self.restart.second_stop),
            ),
        ]
    }

    /// Whether every check passed.
    pub fn all_checks_pass(&self) -> bool {
        self.checks().iter().all(|(_, ok)| *ok)
    }
}

/// Answer-to-first-push latencies of `done` within `timeout`: (summary, missing, before answer).
fn push_latency(feed: &Feed, done: &[Transfer], timeout: Duration) -> (Latency, usize, usize) {
    let mut samples = vec![];
    let (mut missing, mut early) = (0, 0);
    for t in done {
        match feed.arrival(&t.tx) {
            Some(a) if a.first <= t.answered => {
                early += 1;
                samples.push(Duration::ZERO);
            }
            Some(a) if a.first - t.answered <= timeout => samples.push(a.first - t.answered),
            _ => missing += 1,
        }
    }
    (Latency::of(&mut samples), missing, early)
}

/// Answer-to-`transaction.completed` latencies of `done`, those that arrived.
fn completed_latency(feed: &Feed, done: &[Transfer]) -> Latency {
    let mut samples: Vec<Duration> = done
        .iter()
        .filter_map(|t| {
            let c = feed.arrival(&t.tx)?.completed?;
            Some(c.saturating_duration_since(t.answered))
        })
        .collect();
    Latency::of(&mut samples)
}

/// Messages carrying `txs` and their span, first to last.
fn message_span(feed: &Feed, txs: &[String]) -> (usize, Duration) {
    let Ok(r) = feed.received.lock() else {
        return (0, Duration::ZERO);
    };
    let arrivals: Vec<_> = txs.iter().filter_map(|t| r.by_tx.get(t)).collect();
    let count = arrivals.iter().map(|a| a.count).sum();
    let first = arrivals.iter().map(|a| a.first).min();
    let last = arrivals.iter().map(|a| a.last).max();
    match (first, last) {
        (Some(f), Some(l)) => (count, l - f),
        _ => (0, Duration::ZERO),
    }
}

/// Every lake row under `dir` (Parquet under `committed/dt=*/`), with the file it is in; each
/// row an object keyed by column name (`eventid`).
fn lake_rows(dir: &Path) -> Vec<(String, Value)> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let mut rows = vec![];
    for day in std::fs::read_dir(dir.join("committed"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for file in std::fs::read_dir(day.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = file.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".parquet") {
                continue; // a roll's temporary file
            }
            let Ok(reader) = std::fs::File::open(file.path())
                .map_err(|e| e.to_string())
                .and_then(|f| SerializedFileReader::new(f).map_err(|e| e.to_string()))
            else {
                continue;
            };
            let Ok(iter) = reader.get_row_iter(None) else {
                continue;
            };
            rows.extend(iter.flatten().map(|r| (name.clone(), r.to_json_value())));
        }
    }
    rows
}

/// The time of day (seconds) a log line starts with (`2026-11-23T20:37:55.010089Z ...`).
fn log_time(line: &str) -> Option<f64> {
    let t = line.get(11..)?.split(['Z', ' ']).next()?;
    let mut parts = t.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// A `name=value` field of a log line (`stream{read_ms=3}: ... lake_ms=1 ...`), in ms.
fn field_ms(line: &str, name: &str) -> Option<Duration> {
    line.split([' ', '{', '}', ':'])
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .and_then(|n| n.parse::<u64>().ok())
        .map(Duration::from_millis)
}

/// The batches the processor logged between two lengths of its log.
fn stages(log: (&Path, u64, u64)) -> Stages {
    let Ok(bytes) = std::fs::read(log.0) else {
        return Stages::default();
    };
    let slice = &bytes[(log.1 as usize).min(bytes.len())..(log.2 as usize).min(bytes.len())];
    let text = String::from_utf8_lossy(slice);
    let (mut batches, mut records, mut gaps) = (0, 0, vec![]);
    let mut fields: [Vec<Duration>; 5] = Default::default();
    const FIELDS: [&str; 5] = ["age_ms", "read_ms", "lake_ms", "lookup_ms", "push_ms"];
    let mut previous: Option<f64> = None;
    for line in text
        .lines()
        .filter(|l| l.contains("stream batch processed"))
    {
        batches += 1;
        records += line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("records="))
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        for (samples, name) in fields.iter_mut().zip(FIELDS) {
            samples.extend(field_ms(line, name));
        }
        let at = log_time(line);
        if let (Some(a), Some(b)) = (previous, at)
            && b >= a
        {
            gaps.push(Duration::from_secs_f64(b - a));
        }
        previous = at.or(previous);
    }
    gaps.sort_unstable();
    let [age, read, lake, lookup, push] = fields.map(|mut f| Latency::of(&mut f));
    Stages {
        batches,
        records,
        gap_p50: crate::stats::percentile(&gaps, 0.5),
        gap_max: gaps.last().copied().unwrap_or_default(),
        age,
        read,
        lake,
        lookup,
        push,
    }
}

fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log).map_or(0, |m| m.len())
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match entry.metadata() {
            Ok(m) if m.is_dir() => total += dir_size(&entry.path()),
            Ok(m) => total += m.len(),
            Err(_) => {}
        }
    }
    total
}

/// A measured phase: `n` transfers at `c` in flight, then their messages awaited (each
/// transfer's first within the push timeout; all of them, for the message rate, by then too).
async fn measure(
    cfg: &LiveConfig,
    serve: &Serve,
    feed: &Feed,
    accounts: &[String],
    label: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Measured {
    progress(&format!(
        "{label}: {} transfers, {} in flight",
        cfg.transfers, cfg.concurrency
    ));
    let log_from = log_len(&serve.log);
    let tick = |d: &[Transfer]| {
        progress(&format!(
            "  {label}: {}/{} committed, {} pushed",
            d.len(),
            cfg.transfers,
            d.iter().filter(|t| feed.arrival(&t.tx).is_some()).count()
        ));
    };
    let load = load::transfers(
        &serve.api,
        accounts,
        label,
        cfg.transfers,
        cfg.concurrency,
        cfg.progress_every,
        &tick,
    )
    .await;
    let txs = load.txs();
    let last_answer = load.done.iter().map(|t| t.answered).max();
    let deadline = last_answer.unwrap_or_else(Instant::now) + cfg.push_timeout;
    if !feed.wait_for(&txs, MESSAGES_PER_TRANSFER, deadline).await {
        progress(&format!(
            "  {label}: {} of {} transfers without their first push, {} without all {} messages, {} s after the last answer",
            txs.len() - feed.arrived(&txs, 1),
            txs.len(),
            txs.len() - feed.arrived(&txs, MESSAGES_PER_TRANSFER),
            MESSAGES_PER_TRANSFER,
            cfg.push_timeout.as_secs()
        ));
    }
    let log_to = log_len(&serve.log);
    measured(cfg, feed, label, &load, (&serve.log, log_from, log_to))
}

fn measured(
    cfg: &LiveConfig,
    feed: &Feed,
    label: &str,
    load: &Load,
    log: (&Path, u64, u64),
) -> Measured {
    let txs = load.txs();
    let mut http: Vec<Duration> = load.done.iter().map(Transfer::http).collect();
    let (push, missing, before_answer) = push_latency(feed, &load.done, cfg.push_timeout);
    let (messages, push_span) = message_span(feed, &txs);
    Measured {
        label: label.to_owned(),
        committed: load.done.len(),
        failed: load.failed.clone(),
        aborted_attempts: load.aborted_attempts,
        error_attempts: load.error_attempts,
        unfinished: load.done.iter().filter(|t| t.unfinished).count(),
        http: Latency::of(&mut http),
        commit_rate: load.rate(),
        push,
        missing,
        before_answer,
        completed: completed_latency(feed, &load.done),
        incomplete: txs.len() - feed.arrived(&txs, MESSAGES_PER_TRANSFER),
        messages,
        push_span,
        stages: stages(log),
    }
}

/// Ages the stack: `cfg.age` transfers as fast as it takes them, then waits for the stream
/// processor to deliver every message of every one of them.
async fn age(
    cfg: &LiveConfig,
    serve: &Serve,
    feed: &Feed,
    accounts: &[String],
    progress: &(dyn Fn(&str) + Sync),
) -> Aging {
    progress(&format!(
        "aging: {} transfers, {} in flight",
        cfg.age, cfg.age_concurrency
    ));
    let log_from = log_len(&serve.log);
    let started = Instant::now();
    let tick = |d: &[Transfer]| {
        let (mut first, mut all) = (0, 0);
        for t in d {
            if let Some(a) = feed.arrival(&t.tx) {
                first += 1;
                all += usize::from(a.count >= MESSAGES_PER_TRANSFER);
            }
        }
        progress(&format!(
            "  aging: {}/{} committed ({:.1} tx/s); pushed: {first} first message, {all} all {MESSAGES_PER_TRANSFER}",
            d.len(),
            cfg.age,
            per_second(d.len(), started.elapsed()),
        ));
    };
    let load = load::transfers(
        &serve.api,
        accounts,
        "aging",
        cfg.age,
        cfg.age_concurrency,
        cfg.progress_every,
        &tick,
    )
    .await;
    let txs = load.txs();
    let ended = Instant::now();
    let backlog = txs.len() - feed.arrived(&txs, 1);
    let backlog_messages = txs.len() - feed.arrived(&txs, MESSAGES_PER_TRANSFER);
    progress(&format!(
        "  aging: {} committed in {:.0} s ({:.1} tx/s); {backlog} without a push yet, {backlog_messages} without all their messages: draining",
        txs.len(),
        load.span.as_secs_f64(),
        load.rate(),
    ));
    let deadline = ended + cfg.drain_timeout;
    let drained = loop {
        let next = (Instant::now() + cfg.progress_every).min(deadline);
        if feed.wait_for(&txs, MESSAGES_PER_TRANSFER, next).await {
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        progress(&format!(
            "  draining: {} of {} with a push, {} with all their messages ({:.0} s)",
            feed.arrived(&txs, 1),
            txs.len(),
            feed.arrived(&txs, MESSAGES_PER_TRANSFER),
            ended.elapsed().as_secs_f64()
        ));
    };
    // When the last first push and the last message came, from the arrivals themselves.
    let (drain_first, drain) = {
        let arrivals: Vec<_> = txs.iter().filter_map(|t| feed.arrival(t)).collect();
        let after_end = |t: Instant| t.saturating_duration_since(ended);
        let first = (arrivals.len() == txs.len())
            .then(|| arrivals.iter().map(|a| after_end(a.first)).max())
            .flatten();
        let all = drained
            .then(|| arrivals.iter().map(|a| after_end(a.last)).max())
            .flatten();
        (first, all)
    };
    let log_to = log_len(&serve.log);
    let m = measured(
        &LiveConfig {
            push_timeout: Duration::MAX / 4,
            ..cfg.clone()
        },
        feed,
        "aging",
        &load,
        (&serve.log, log_from, log_to),
    );
    Aging {
        committed: m.committed,
        failed: m.failed,
        aborted_attempts: m.aborted_attempts,
        error_attempts: m.error_attempts,
        span: load.span,
        http: m.http,
        push: m.push,
        backlog,
        backlog_messages,
        drain_first,
        drain,
        completed: m.completed,
        missing: m.missing,
        messages: m.messages,
        push_span: m.push_span,
        stages: m.stages,
    }
}

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
        mode: cfg.mode.clone(),
        transfers: cfg.transfers,
        concurrency: cfg.concurrency,
        age: cfg.age,
        age_concurrency: cfg.age_concurrency,
        accounts: cfg.accounts,
        initial_balance: cfg.initial_balance,
        push_timeout: cfg.push_timeout,
        twopc: cfg.twopc.display().to_string(),
        load_start: load_average(),
        cores: std::thread::available_parallelism().map_or(0, usize::from),
        ..LiveReport::default()
    };
    let outcome = phases(cfg, &root, &mut report, progress).await;
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

async fn phases(
    cfg: &LiveConfig,
    root: &Path,
    report: &mut LiveReport,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), LiveError> {
    let data = root.join("data");
    let lake = root.join("lake");
    let accounts = cfg.account_ids();

    progress(&format!(
        "starting {} serve (persisted DynamoDB Local)",
        cfg.twopc.display()
    ));
    let serve = Serve::start(&cfg.twopc, &data, &lake, &root.join("serve-1.log")).await?;
    report.restart.startups.push(serve.startup);
    progress(&format!(
        "  {} answers ({:.1} s)",
        serve.url,
        serve.startup.as_secs_f64()
    ));
    let feed = Feed::open(&serve.url, &serve.ws_token).await?;
    let created = load::create_accounts(&serve.api, &accounts, cfg.initial_balance).await;
    if let Some(e) = created.failed.first() {
        return Err(LiveError::Check(e.clone()));
    }
    // The accounts' pushes show the pipeline works end to end before anything is measured.
    let txs = created.txs();
    if !feed
        .wait_for(
            &txs,
            MESSAGES_PER_ACCOUNT,
            Instant::now() + cfg.push_timeout.max(Duration::from_secs(60)),
        )
        .await
    {
        return Err(LiveError::Check(format!(
            "the accounts' creations were not pushed within {} s",
            cfg.push_timeout.max(Duration::from_secs(60)).as_secs()
        )));
    }
    progress(&format!("  {} accounts created and pushed", txs.len()));

    report.fresh = measure(cfg, &serve, &feed, &accounts, "fresh", progress).await;
    progress(&summary(&report.fresh));
    report.aging = age(cfg, &serve, &feed, &accounts, progress).await;
    report.data_bytes = dir_size(&data);
    report.aged = measure(cfg, &serve, &feed, &accounts, "aged", progress).await;
    progress(&summary(&report.aged));

    // The restart: what was committed stays; what was delivered is delivered again rarely.
    let r = &mut report.restart;
    r.before = serve.api.balances().await?;
    let events_before: HashSet<String> = match feed.received.lock() {
        Ok(rec) => {
            r.ws_repeated_before = rec.events.values().map(|n| n - 1).sum();
            rec.events.keys().cloned().collect()
        }
        Err(_) => HashSet::new(),
    };
    r.pushed_before = events_before.len();
    let rows_before: HashSet<String> = lake_rows(&lake)
        .into_iter()
        .map(|(_, row)| row["eventid"].to_string())
        .collect();
    let files_before: HashSet<String> = lake_rows(&lake).into_iter().map(|(f, _)| f).collect();
    feed.close().await;
    progress("restart: SIGINT");
    let stopped = serve.stop().await;
    progress(&format!(
        "  stopped in {:.1} s ({}){}",
        stopped.took.as_secs_f64(),
        stopped
            .status
            .map_or_else(|| "killed".to_owned(), |s| s.to_string()),
        stopped.java_left.map_or_else(String::new, |p| format!(
            "; DynamoDB Local (pid {p}) WAS LEFT RUNNING"
        ))
    ));
    r.first_stop = Some(stopped);
    let serve = Serve::start(&cfg.twopc, &data, &lake, &root.join("serve-2.log")).await?;
    r.startups.push(serve.startup);
    let feed = Feed::open(&serve.url, &serve.ws_token).await?;
    r.after = serve.api.balances().await?;
    progress(&format!(
        "  restarted in {:.1} s; balances {}",
        serve.startup.as_secs_f64(),
        if r.balances_kept() { "kept" } else { "DIFFER" }
    ));
    let tick = |_: &[Transfer]| {};
    let after = load::transfers(
        &serve.api,
        &accounts,
        "restart",
        cfg.after_restart,
        cfg.concurrency.min(cfg.after_restart).max(1),
        cfg.progress_every,
        &tick,
    )
    .await;
    let after_txs = after.txs();
    let deadline = after
        .done
        .iter()
        .map(|t| t.answered)
        .max()
        .unwrap_or_else(Instant::now)
        + cfg.push_timeout;
    // Redeliveries come before the new records in each stream: once every message of the new
    // transfers is in, so are they.
    feed.wait_for(&after_txs, MESSAGES_PER_TRANSFER, deadline)
        .await;
    let (push, missing, _) = push_latency(&feed, &after.done, cfg.push_timeout);
    r.after_committed = after.done.len();
    r.after_pushed = after.done.len() - missing;
    r.after_push = push;
    if let Ok(rec) = feed.received.lock() {
        r.ws_redelivered = rec
            .events
            .iter()
            .filter(|(e, _)| events_before.contains(*e))
            .map(|(_, n)| n)
            .sum();
    }
    let rows = lake_rows(&lake);
    r.lake_redelivered = rows
        .iter()
        .filter(|(f, row)| {
            !files_before.contains(f) && rows_before.contains(&row["eventid"].to_string())
        })
        .count();
    let mut seen = HashSet::new();
    r.lake_duplicates = rows
        .iter()
        .filter(|(_, row)| !seen.insert(row["eventid"].to_string()))
        .count();
    feed.close().await;
    let stopped = serve.stop().await;
    progress(&format!(
        "  after the restart: {} committed, {} pushed; {} messages and {} lake rows delivered again; stopped in {:.1} s",
        r.after_committed,
        r.after_pushed,
        r.ws_redelivered,
        r.lake_redelivered,
        stopped.took.as_secs_f64()
    ));
    r.second_stop = Some(stopped);
    Ok(())
}

fn summary(m: &Measured) -> String {
    let ms = crate::stats::ms;
    format!(
        "  {}: http p50 {:.0} ms p99 {:.0} ms; push p50 {:.0} ms p95 {:.0} ms p99 {:.0} ms max {:.0} ms; {} missing; {} messages at {:.1}/s",
        m.label,
        ms(m.http.p50),
        ms(m.http.p99),
        ms(m.push.p50),
        ms(m.push.p95),
        ms(m.push.p99),
        ms(m.push.max),
        m.missing,
        m.messages,
        m.message_rate()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_line_of_twopc_serve_yields_its_stages() {
        // GIVEN two batch lines as `twopc serve` logs them (the poller's span, then the fields)
        let dir = std::env::temp_dir().join(format!("twopc-live-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let log = dir.join("serve.log");
        let text = "2026-11-23T21:43:29.230566Z  INFO stream{read_ms=257}: stream batch processed records=76 rows=25 pushed=25 gone=0 failed=0 age_ms=1663 lake_ms=0 lookup_ms=614 push_ms=126\n\
                    2026-11-23T21:43:29.300000Z  INFO tx{txId=\"x\"}: answered status=200 latency_ms=99\n\
                    2026-11-23T21:43:30.270919Z  INFO stream{read_ms=471}: stream batch processed records=65 rows=33 pushed=33 gone=0 failed=0 lake_ms=4 lookup_ms=64 push_ms=234\n";
        std::fs::write(&log, text).expect("write");

        // WHEN the whole log is read
        let st = stages((&log, 0, text.len() as u64));
        let _ = std::fs::remove_dir_all(&dir);

        // THEN both batches count, with their records, gap and stage times
        assert_eq!((st.batches, st.records), (2, 141));
        assert!(st.gap_max.abs_diff(Duration::from_micros(1_040_353)) < Duration::from_micros(2));
        assert_eq!((st.read.n, st.read.max), (2, Duration::from_millis(471)));
        assert_eq!((st.age.n, st.age.max), (1, Duration::from_millis(1663)));
        assert_eq!(st.lookup.max, Duration::from_millis(614));
        assert_eq!(st.push.max, Duration::from_millis(234));
        assert_eq!(st.lake.max, Duration::from_millis(4));
    }
}
