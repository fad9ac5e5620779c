//! What `twopc-bench live` measured: each phase's figures ([`Measured`] fresh and aged,
//! [`Aging`], [`Restart`]), where a push's time goes ([`Stages`]), and the whole
//! [`LiveReport`] with its behaviour checks.

use std::time::Duration;

use super::LiveConfig;
use super::child::Stopped;
use super::load::per_second;
use serde::Serialize;

use twopc_bench::stats::{Latency, as_ms, as_ms_opt};

/// Where the time of a push goes: the stream processor logs each batch it delivered (those
/// that yielded rows or pushes) with its stages, which the run reads back from `twopc serve`'s
/// log.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stages {
    /// Batches the processor logged as delivered.
    pub batches: usize,
    /// Stream records in those batches.
    pub records: usize,
    /// Median time between two logged batches.
    #[serde(serialize_with = "as_ms")]
    pub gap_p50: Duration,
    /// Longest time between two logged batches.
    #[serde(serialize_with = "as_ms")]
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
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
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
    #[serde(serialize_with = "as_ms")]
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
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
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
    #[serde(serialize_with = "as_ms")]
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
    #[serde(serialize_with = "as_ms_opt")]
    pub drain_first: Option<Duration>,
    /// Last answer to every message of every aging transfer (None: not within the timeout).
    #[serde(serialize_with = "as_ms_opt")]
    pub drain: Option<Duration>,
    /// Answer to `transaction.completed`.
    pub completed: Latency,
    /// Never pushed.
    pub missing: usize,
    /// WebSocket messages carrying aging txIds.
    pub messages: usize,
    /// First to last of them.
    #[serde(serialize_with = "as_ms")]
    pub push_span: Duration,
    /// Batches and records the processor logged meanwhile.
    pub stages: Stages,
}

/// The restart.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
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
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveReport {
    /// The run's parameters.
    pub config: LiveConfig,
    /// Load average at start and end.
    pub load_start: Option<String>,
    /// At the end.
    pub load_end: Option<String>,
    /// Cores.
    pub cores: usize,
    /// The run itself.
    #[serde(serialize_with = "as_ms")]
    pub wall: Duration,
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
            sum == Some(self.config.accounts as u128 * u128::from(self.config.initial_balance))
        };
        let stopped = |s: &Option<Stopped>| s.as_ref().is_some_and(Stopped::clean);
        vec![
            (
                format!(
                    "every measured transfer committed ({} + {} of {} each)",
                    self.fresh.committed, self.aged.committed, self.config.transfers
                ),
                self.fresh.committed == self.config.transfers
                    && self.aged.committed == self.config.transfers
                    && self.fresh.failed.is_empty()
                    && self.aged.failed.is_empty(),
            ),
            (
                format!(
                    "every aging transfer committed ({} of {})",
                    self.aging.committed, self.config.age
                ),
                self.aging.committed == self.config.age && self.aging.failed.is_empty(),
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
