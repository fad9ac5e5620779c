//! What a run measured, as `latest.json` holds it: the [`Report`] and its [`Cell`]s. The
//! Markdown report is rendered from this alone ([`crate::report`]), so the two never disagree.
//! Times are model time (ms), rates per model second; money is whole micro-dollars.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A share of late requests above which a cell is bounded by this machine, not the model.
pub const MACHINE_BOUND: f64 = 0.05;

/// Percentiles of a latency (ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

/// Cost per million committed transfers at list prices, whole micro-dollars, by part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// DynamoDB writes (index entries included) and reads, a cancelled transaction and a write
    /// refused for a hold charged nothing.
    pub dynamodb: u64,
    /// The same, charging them (2 units per item, 1 unit).
    pub dynamodb_high: u64,
    /// The coordinator function: requests and GB-seconds, the work after the answer included.
    pub lambda: u64,
    /// API Gateway REST API requests (the template's front door).
    pub rest_api: u64,
    /// The same requests through an HTTP API instead.
    pub http_api: u64,
    /// The streams' fan-out: the stream processor's invocations and the data lake's Firehose.
    pub fanout: u64,
}

impl Cost {
    /// As deployed through the template's front door (REST API), DynamoDB at the low bound.
    pub fn deployed(&self) -> u64 {
        self.dynamodb + self.lambda + self.rest_api + self.fanout
    }

    /// As deployed behind an HTTP API instead.
    pub fn deployed_http_api(&self) -> u64 {
        self.dynamodb + self.lambda + self.http_api + self.fanout
    }

    /// As deployed behind a front door that bills nothing of its own (a Lambda function URL).
    pub fn deployed_function_url(&self) -> u64 {
        self.dynamodb + self.lambda + self.fanout
    }
}

/// One system at one workload and concurrency under the production model, its repeats pooled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cell {
    /// `uniform 2P`, `hot 8P`, `moving 2P`, ...
    pub workload: String,
    /// `native`, `auto`, `staged`, `classic`.
    pub system: String,
    /// Transfers in flight.
    pub concurrency: usize,
    /// The sensitivity row's changed assumption; `None` in the main grid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The crossing row's share of transfers on hot items; `None` elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_fraction: Option<f64>,
    /// The dilation factor the cell ran at (every time of the model that many times longer).
    pub dilation: u32,
    /// Committed transfers a second, per repeat.
    pub repeats: Vec<f64>,
    /// Transfers started in the measured windows.
    pub transfers: u64,
    /// Transfers answered committed in the windows.
    pub committed: u64,
    /// Committed transfers a second (all repeats).
    pub goodput: f64,
    /// Transfers started in the windows that never committed (every attempt aborted until
    /// the deadline, or failed).
    pub never_committed: u64,
    /// Of those, an error whose outcome the client did not know.
    pub failed: u64,
    /// Attempts aborted, by reason: conflict, throttled, condition, fenced, other.
    pub aborted_attempts: [u64; 5],
    /// Time to the client's answer of every transfer started in the windows, a never-committed
    /// one counted at its deadline.
    pub answer: Percentiles,
    /// The same as deployed: the product's answer behind its front door; native as measured
    /// (called from the caller's own function).
    pub deployed: Percentiles,
    /// Time to applied (the transfer's end) of committed transfers, median.
    pub applied_p50_ms: f64,
    /// Write units per committed transfer (index entries included), cancellations at 0.
    pub write_units: f64,
    /// The same with a cancelled transaction at 2 units per item and a refused write at 1.
    pub write_units_high: f64,
    /// Of the write units, index entries.
    pub index_writes: f64,
    /// Read units per committed transfer.
    pub read_units: f64,
    /// DynamoDB requests per committed transfer (every attempt the SDK sent).
    pub requests: f64,
    /// Attempts per committed transfer (as deployed: calls through the front door).
    pub attempts: f64,
    /// Sequential rounds of requests to the answer (median; one in flight only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_to_answer: Option<u64>,
    /// Writes the model answered with a transaction conflict, per committed transfer.
    pub conflicts: f64,
    /// Writes the model throttled, per committed transfer.
    pub throttles: f64,
    /// Transactions whose finish left them open, per committed transfer.
    pub left_open: f64,
    /// Records and locks the product's sweeper ended after the cell.
    pub swept: (u64, u64),
    /// Delayed requests the engine answered later than their sampled latency allowed.
    pub late: u64,
    /// Delayed requests.
    pub delayed: u64,
    /// The bench process's CPU per committed transfer (coordinator, SDK, driver; and the
    /// engine when it is embedded), µs.
    pub cpu_us: f64,
    /// Cost per million committed transfers.
    pub cost: Cost,
    /// Most reservations on one item, as responses showed them.
    pub largest_reservation_set: u64,
    /// Most fence entries on one item (responses or the audit).
    pub largest_fence: u64,
    /// What the audit after the cell found wrong (empty: balance sum conserved, committed
    /// writes applied once, nothing left held or unfinished).
    pub problems: Vec<String>,
}

impl Cell {
    /// The share of delayed requests the engine answered late.
    pub fn late_share(&self) -> f64 {
        ratio(self.late as f64, self.delayed as f64)
    }

    /// Whether this machine, not the model, bounds the cell.
    pub fn machine_bound(&self) -> bool {
        self.late_share() > MACHINE_BOUND
    }

    /// The spread of the repeats' goodput: (largest − smallest) / mean.
    pub fn spread(&self) -> f64 {
        let max = self.repeats.iter().copied().fold(f64::MIN, f64::max);
        let min = self.repeats.iter().copied().fold(f64::MAX, f64::min);
        let mean = self.repeats.iter().sum::<f64>() / self.repeats.len().max(1) as f64;
        if self.repeats.len() < 2 {
            0.0
        } else {
            ratio(max - min, mean)
        }
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
    /// The cells: main grid, sensitivity rows, crossing rows.
    pub cells: Vec<Cell>,
}

impl Report {
    /// Whether every cell's audit passed.
    pub fn all_checks_pass(&self) -> bool {
        self.cells.iter().all(|c| c.problems.is_empty())
    }

    /// The main grid's cell of `system` at `workload`, `concurrency`.
    pub fn cell(&self, workload: &str, system: &str, concurrency: usize) -> Option<&Cell> {
        self.cells.iter().find(|c| {
            c.variant.is_none()
                && c.hot_fraction.is_none()
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
