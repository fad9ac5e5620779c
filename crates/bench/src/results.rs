//! What a run measured, as `latest.json` holds it: the [`Report`] and its [`Cell`]s. The
//! Markdown report is rendered from this alone ([`crate::report`]), so the two never disagree.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One system at one workload and concurrency under the production model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cell {
    /// The model DynamoDB was taken to be: `production` (latency, conflicts, partition rate).
    pub model: String,
    /// `uniform 2P`, `hot 8P`, ...
    pub workload: String,
    /// `native`, `auto`, `staged`, `classic`.
    pub system: String,
    /// Transfers in flight.
    pub concurrency: usize,
    /// The sensitivity row's changed assumption; `None` in the main grid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Transfers started in the measured windows.
    pub transfers: u64,
    /// Of them, committed (retries included).
    pub committed: u64,
    /// Committed transfers a second.
    pub committed_per_second: f64,
    /// Transfers that never committed (every attempt aborted, or failed).
    pub never_committed: u64,
    /// Attempts aborted, by reason: conflict, condition, fenced, other.
    pub aborted_attempts: [u64; 4],
    /// Time to the client's answer of committed transfers: median and 99th percentile.
    pub answer_p50_ms: f64,
    /// See [`Cell::answer_p50_ms`].
    pub answer_p99_ms: f64,
    /// Time to applied (the transfer's end), median.
    pub applied_p50_ms: f64,
    /// Write capacity units per committed transfer (reported, and the refused writes'
    /// estimate).
    pub write_units_per_committed: f64,
    /// DynamoDB requests per committed transfer (every attempt the SDK sent).
    pub requests_per_committed: f64,
    /// Sequential rounds of requests to the answer (median; one in flight only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_to_answer: Option<u64>,
    /// Requests the model answered with a transaction conflict (never reaching DynamoDB
    /// Local), per committed transfer.
    pub conflicts_per_committed: f64,
    /// Transactions whose finish left them decided but unfinished (a completion refused), which
    /// the bench then drove from the record as the sweeper does, per committed transfer.
    pub swept_per_committed: f64,
    /// Delayed requests DynamoDB Local answered later than their sampled latency allowed.
    pub overruns: u64,
    /// Delayed requests.
    pub delayed: u64,
    /// This process's CPU per committed transfer (coordinator, SDK and driver), µs.
    pub cpu_us_per_committed: f64,
    /// Most reservations on one item, as responses showed them.
    pub largest_reservation_set: u64,
    /// Most fence entries on one item (responses or the audit).
    pub largest_fence: u64,
    /// What the audit after the cell found wrong (empty: balance sum conserved, committed
    /// writes applied once, nothing left held or unfinished).
    pub problems: Vec<String>,
}

impl Cell {
    /// The share of delayed requests DynamoDB Local answered late.
    pub fn overrun_share(&self) -> f64 {
        ratio(self.overruns as f64, self.delayed as f64)
    }
}

/// `a / b`, 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// A whole run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// When it ran (UTC).
    pub generated: String,
    /// `full` or `quick`.
    pub mode: String,
    /// The machine, as `/proc` tells it.
    pub machine: String,
    /// The engine that served the run, under the model.
    #[serde(default = "dynamodb_local")]
    pub engine: String,
    /// Load average at the start and at the end.
    pub load: (String, String),
    /// The bench's wall time, seconds.
    pub wall_seconds: u64,
    /// Every parameter of the model and the load (printed in the report).
    pub assumptions: Value,
    /// The one-round floor of an N-participant transaction (median of the slowest of the record
    /// put and N participant writes, from the latency model), ms, by participants.
    pub floor_p50_ms: Vec<(usize, f64)>,
    /// The cells, main grid then sensitivity rows.
    pub cells: Vec<Cell>,
}

impl Report {
    /// Whether every cell's audit passed and no transfer failed.
    pub fn all_checks_pass(&self) -> bool {
        self.cells.iter().all(|c| c.problems.is_empty())
    }

    /// The main grid's cell of `system` at `workload`, `concurrency`.
    pub fn cell(&self, workload: &str, system: &str, concurrency: usize) -> Option<&Cell> {
        self.cells.iter().find(|c| {
            c.variant.is_none()
                && c.workload == workload
                && c.system == system
                && c.concurrency == concurrency
        })
    }
}

/// The engine of a report written before reports named theirs.
fn dynamodb_local() -> String {
    crate::config::DYNAMODB_LOCAL.into()
}
