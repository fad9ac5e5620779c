//! What a run measured: the outcomes of transfers counted ([`Tally`]), their costs
//! ([`Costs`], [`Capacity`]), a cell's and an open-loop run's results, and the whole
//! [`Report`] with the figures derived from them (throughput, requests and units per commit).

use std::time::Duration;

use crate::capacity::{self, Peaks, Units};
use crate::config::{BenchConfig, Burst};
use crate::counter::Requests;
use crate::inject::cells::InjectedRun;
use crate::load::Sample;
use crate::stats::Latency;
use crate::systems::{Outcome, Reason, System, Votes};
use crate::tables::Audit;
use crate::timing::Steps;
use crate::workload::Workload;

/// Transfers of one run, counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    /// Transfers that ended.
    pub transfers: u64,
    /// Committed.
    pub committed: u64,
    /// Transfers that never committed, by the [`Reason`] their last attempt aborted for
    /// (`conflict`: on every attempt).
    pub aborted: [u64; Reason::ALL.len()],
    /// Errors or unfinished transactions (each is a failed check).
    pub failed: u64,
    /// Attempts (transactions begun).
    pub attempts: u64,
    /// Attempts that aborted, by [`Reason`] (retried ones included).
    pub aborted_attempts: [u64; Reason::ALL.len()],
    /// Votes of every attempt (coordinator and serial driver).
    pub votes: Votes,
    /// Net change of the balance sum by committed transfers.
    pub net: i128,
    /// Items written by committed transfers.
    pub writes: u64,
    /// First few failures, for the report.
    pub failures: Vec<String>,
}

impl Tally {
    /// Counts the outcomes of `samples`.
    pub(crate) fn of(samples: &[Sample]) -> Tally {
        let mut t = Tally::default();
        for s in samples {
            t.transfers += 1;
            t.attempts += u64::from(s.done.attempts);
            for (slot, n) in t.aborted_attempts.iter_mut().zip(s.done.aborted) {
                *slot += u64::from(n);
            }
            t.votes.add(s.done.votes);
            if let Some(r) = s.done.outcome.reason() {
                t.aborted[r.index()] += 1;
            }
            match &s.done.outcome {
                Outcome::Committed => {
                    t.committed += 1;
                    t.net += s.net;
                    t.writes += s.participants as u64;
                }
                Outcome::Conflict | Outcome::Refused(_) => {}
                Outcome::Unfinished(m) | Outcome::Failed(m) => {
                    t.failed += 1;
                    if t.failures.len() < 3 {
                        t.failures.push(m.clone());
                    }
                }
            }
        }
        t
    }

    /// Adds `other`'s counts (the first failures kept).
    pub(crate) fn absorb(&mut self, other: Tally) {
        self.transfers += other.transfers;
        self.committed += other.committed;
        for i in 0..Reason::ALL.len() {
            self.aborted[i] += other.aborted[i];
            self.aborted_attempts[i] += other.aborted_attempts[i];
        }
        self.failed += other.failed;
        self.attempts += other.attempts;
        self.votes.add(other.votes);
        self.net += other.net;
        self.writes += other.writes;
        for f in other.failures {
            if self.failures.len() < 3 {
                self.failures.push(f);
            }
        }
    }

    /// Transfers that never committed for `reason`.
    pub fn aborted_for(&self, reason: Reason) -> u64 {
        self.aborted[reason.index()]
    }

    /// Share of transfers that did not commit.
    pub fn abort_rate(&self) -> f64 {
        ratio(
            (self.transfers - self.committed) as f64,
            self.transfers as f64,
        )
    }
}

/// Process-side costs of a run (between two idle moments, so every request is whole).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Costs {
    /// Requests sent.
    pub requests: Requests,
    /// CPU time of this process.
    pub cpu: Duration,
    /// Peak resident memory during the run (KiB).
    pub peak_rss_kib: Option<u64>,
    /// Wall time per coordinator step (coordinator runs only).
    pub steps: Steps,
    /// The largest reservation set, fence and item responses showed.
    pub peaks: Peaks,
}

impl Costs {
    /// Adds `other`'s costs (peaks: the larger).
    pub(crate) fn absorb(&mut self, other: Costs) {
        self.requests = self.requests.plus(&other.requests);
        self.cpu += other.cpu;
        self.peak_rss_kib = self.peak_rss_kib.max(other.peak_rss_kib);
        self.steps = self.steps.plus(&other.steps);
        self.peaks = self.peaks.max(&other.peaks);
    }
}

/// What a cell's transfers cost in write units: measured in one more slice per system, run
/// after the measured ones at the same concurrency, in which every request asks for its consumed
/// capacity. Asking makes DynamoDB Local size every item it writes, which slowed every system,
/// the coordinator most (NOTES.md), so the slices that give throughput, latency and CPU do not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capacity {
    /// The units (and refused writes) of that slice.
    pub units: Units,
    /// Transfers committed in it.
    pub committed: u64,
}

/// One system on one workload at one concurrency.
#[derive(Clone, Debug, PartialEq)]
pub struct CellResult {
    /// System.
    pub system: System,
    /// Workload.
    pub workload: Workload,
    /// Transfers in flight.
    pub concurrency: usize,
    /// Outcomes over the whole cell.
    pub tally: Tally,
    /// Length of the measured window.
    pub window: Duration,
    /// Transfers committed within the window.
    pub window_committed: u64,
    /// Latency of the transfers committed within the window (retries included).
    pub latency: Latency,
    /// Costs over the measured slices.
    pub costs: Costs,
    /// Write units, from the cell's units slice.
    pub capacity: Capacity,
    /// The audit of the tables after the cell.
    pub audit: Audit,
    /// Failed checks (empty: the run conserved balances, applied exactly the committed writes,
    /// and left no lock, placeholder or unfinished record).
    pub problems: Vec<String>,
}

/// `a / b`, NaN when `b` is not positive.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::NAN }
}

impl CellResult {
    /// Committed transfers per second in the window.
    pub fn throughput(&self) -> f64 {
        ratio(self.window_committed as f64, self.window.as_secs_f64())
    }

    /// DynamoDB requests per committed transfer (aborts and retries included).
    pub fn requests_per_commit(&self) -> f64 {
        ratio(
            self.costs.requests.total() as f64,
            self.tally.committed as f64,
        )
    }

    /// Write capacity units per committed transfer, as a decimal (aborts, retries and the
    /// refused writes' estimate included).
    pub fn units_per_commit(&self) -> String {
        capacity::per(self.capacity.units.write_halves(), self.capacity.committed)
    }

    /// Write capacity half-units per committed transfer, for ratios and charts (not for
    /// amounts: those are [`CellResult::units_per_commit`]).
    pub fn halves_per_commit(&self) -> f64 {
        ratio(
            self.capacity.units.write_halves() as f64,
            self.capacity.committed as f64,
        )
    }

    /// Sequential rounds per transaction; meaningful at concurrency 1 only.
    pub fn rounds_per_attempt(&self) -> f64 {
        ratio(
            self.costs.requests.rounds as f64,
            self.tally.attempts as f64,
        )
    }

    /// CPU time of this process per committed transfer.
    pub fn cpu_per_commit(&self) -> Duration {
        match u32::try_from(self.tally.committed) {
            Ok(n) if n > 0 => self.costs.cpu / n,
            _ => Duration::ZERO,
        }
    }
}

/// The open-loop scenario run by one system.
#[derive(Clone, Debug, PartialEq)]
pub struct BurstResult {
    /// System.
    pub system: System,
    /// The scenario.
    pub burst: Burst,
    /// Outcomes.
    pub tally: Tally,
    /// First arrival to last end.
    pub runtime: Duration,
    /// From each transfer's scheduled arrival to its end (all transfers).
    pub latency: Latency,
    /// Costs.
    pub costs: Costs,
    /// The audit after the run.
    pub audit: Audit,
    /// Failed checks.
    pub problems: Vec<String>,
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// The parameters.
    pub config: BenchConfig,
    /// Unit cost cells (one per concurrency).
    pub unit: Vec<CellResult>,
    /// Transfer cells.
    pub cells: Vec<CellResult>,
    /// Open-loop runs.
    pub bursts: Vec<BurstResult>,
    /// The injected-latency cells, if run.
    pub injected: Option<InjectedRun>,
    /// Wall time of `run`.
    pub wall: Duration,
    /// CPU time of the whole run: per-thread counters and process ticks (a cross-check).
    pub cpu_total: (Duration, Duration),
    /// Peak resident memory of the whole process (KiB).
    pub peak_rss_kib: Option<u64>,
    /// Wall time of `make bench` up to the report (build and DynamoDB Local start included),
    /// when the Makefile passes its start time.
    pub make_wall: Option<Duration>,
    /// The machine's load average (1, 5, 15 min) when the run started and when it ended.
    pub load: (Option<String>, Option<String>),
    /// The previous report's raw figures (`latest.json` of the output folder, read before it
    /// is replaced), to compare the uniform figures with.
    pub previous: Option<serde_json::Value>,
}

impl Report {
    /// Whether every cell and burst passed its checks.
    pub fn all_checks_pass(&self) -> bool {
        self.unit
            .iter()
            .chain(&self.cells)
            .all(|c| c.problems.is_empty())
            && self.bursts.iter().all(|b| b.problems.is_empty())
            && self
                .injected
                .iter()
                .flat_map(|i| &i.cells)
                .all(|c| c.problems.is_empty())
    }

    /// The cell of `system` on `workload` at `concurrency`.
    pub fn cell(
        &self,
        system: System,
        workload: Workload,
        concurrency: usize,
    ) -> Option<&CellResult> {
        self.unit
            .iter()
            .chain(&self.cells)
            .find(|c| c.system == system && c.workload == workload && c.concurrency == concurrency)
    }
}
