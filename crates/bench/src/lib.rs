//! # twopc-bench — what the coordinator costs, measured against what a user would pick instead
//!
//! `make bench` runs this crate's binary against a DynamoDB Local of its own and writes
//! `bench/results/latest.{md,svg,json}`. One run measures, side by side (each system on its own
//! seeded tables, the systems of a workload taking turns slice by slice):
//!
//! - [`systems`]: the coordinator (`direct` transport), native `TransactWriteItems`, the seed's
//!   serial driver, and a lone conditional `UpdateItem` (the engine's unit cost);
//! - [`workload`]: transfers between `accounts` and `wallets`, uniform or hot keys, 2 or 8
//!   participants; [`config`]: the full and the `--quick` parameter sets;
//! - [`load`]: closed loop at fixed concurrency, and the seed's open-loop burst;
//! - [`counter`]: DynamoDB requests counted by an SDK interceptor, per operation, and the
//!   sequential rounds they form; [`capacity`]: the write capacity units each response
//!   reports, by coordinator step; [`procfs`]: CPU time and peak memory from `/proc/self`;
//! - [`tables`]: the tables of each system (streams off: see there), seeding and the audit that
//!   checks after each cell that the balance sum was conserved, exactly the committed writes were
//!   applied and no lock or reservation was left behind, every escrow idle at the value;
//! - [`timing`]: the coordinator's ports wrapped to time each protocol step;
//! - [`stats`]: percentiles from sorted samples; [`report`]: Markdown, hand-written SVG, JSON;
//! - [`inject`]: the injected-latency cells: DynamoDB's latency as measured from AWS Lambda
//!   (seeded lognormal fits per operation) laid over DynamoDB Local by a wrapped HTTP client,
//!   native against the coordinator at one and four in flight: time to the answer and to
//!   applied, lock holds, the one-round floor;
//! - [`live`]: `make bench-live`, another bench: the local stack (`twopc serve`) from outside,
//!   a committed transfer's WebSocket push fresh and after aging, and a restart.
//!
//! Every figure is reported beside the native figure of the same run, as a ratio: a lone
//! absolute time on a shared 2-core machine means little.
#![warn(missing_docs)]

pub mod capacity;
pub mod config;
pub mod counter;
pub mod inject;
pub mod live;
pub mod load;
pub mod procfs;
pub mod report;
pub mod stats;
pub mod systems;
pub mod tables;
pub mod timing;
pub mod workload;

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use twopc_core::ids::TxId;
use twopc_core::ports::{Clock, PortError, SystemClock, TxLog};

use crate::capacity::{Peaks, Units};
use crate::config::{BenchConfig, Burst};
use crate::counter::{RequestCounter, Requests};
use crate::inject::cells::InjectedRun;
use crate::load::Sample;
use crate::procfs::CpuSnapshot;
use crate::stats::Latency;
use crate::systems::{Driver, Outcome, Reason, System, Votes, Wiring};
use crate::tables::{Audit, Tables};
use crate::timing::{StepTimes, Steps};
use crate::workload::{Contention, KeyGen, Workload};

/// Why the bench could not run (a failed *check* is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A protocol port (log, items, tables) failed.
    #[error(transparent)]
    Port(#[from] PortError),
    /// A DynamoDB call of the bench itself failed.
    #[error("{context}")]
    Sdk {
        /// What was attempted.
        context: String,
        /// The SDK's error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// Something the bench relies on does not hold.
    #[error("{0}")]
    Check(String),
    /// Writing the report.
    #[error("writing {path}")]
    Io {
        /// The file.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

impl BenchError {
    /// Wraps an SDK error.
    pub fn sdk(context: impl Into<String>, e: impl StdError + Send + Sync + 'static) -> Self {
        BenchError::Sdk {
            context: context.into(),
            source: Box::new(e),
        }
    }
}

/// A DynamoDB client for DynamoDB Local whose requests `counter` counts.
pub async fn client(endpoint: &str, counter: &RequestCounter) -> Client {
    let sdk = twopc_dynamo::sdk_config(Some(endpoint)).await;
    let conf = aws_sdk_dynamodb::config::Builder::from(&sdk)
        .interceptor(counter.clone())
        .build();
    Client::from_conf(conf)
}

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
    fn of(samples: &[Sample]) -> Tally {
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

    fn absorb(&mut self, other: Tally) {
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
    fn absorb(&mut self, other: Costs) {
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

/// One seeded set of tables and what an audit of it must find. Each (system, contention) has
/// its own set, reused by that system's cells of every concurrency and participant count (as a
/// deployment would carry its state from one load to the next); the unit cost shares the native
/// uniform set.
struct Set {
    tables: Tables,
    /// Balance sum the audit must find.
    expected_sum: i128,
    /// Committed item writes (`txVersion` sum) the audit must find.
    expected_writes: u64,
    /// Whether the exclusive workload wrote here: its writes leave an idle escrow stale (the
    /// protocol's reading; the next reservation resets it), so the audit accepts stale ones.
    exclusive: bool,
}

/// Part of a cell, measured between two idle moments.
#[derive(Default)]
struct Slice {
    latencies: Vec<Duration>,
    tally: Tally,
    window: Duration,
    costs: Costs,
}

impl Slice {
    fn absorb(&mut self, other: Slice) {
        self.latencies.extend(other.latencies);
        self.tally.absorb(other.tally);
        self.window += other.window;
        self.costs.absorb(other.costs);
    }
}

struct Bench<'a> {
    config: &'a BenchConfig,
    client: Client,
    counter: RequestCounter,
    run_id: String,
    sets: HashMap<(System, Contention), Set>,
    steps: StepTimes,
    cells: u64,
    progress: &'a dyn Fn(&str),
}

/// The set a system's cells of a workload run on: the unit cost on native's uniform set, the
/// exclusive workload on the hot set (the same keys, seeded once).
fn set_of(system: System, contention: Contention) -> (System, Contention) {
    match (system, contention) {
        (System::Unit, _) => (System::Native, Contention::Uniform),
        // The staged commit writes what the five-round path writes: one table set for both.
        (System::Staged | System::StagedApplied | System::Auto, c) => {
            set_of(System::Coordinator, c)
        }
        (other, Contention::Exclusive) => (other, Contention::Hot),
        (other, contention) => (other, contention),
    }
}

/// Runs the whole bench; `progress` hears one line per step.
pub async fn run(config: &BenchConfig, progress: &dyn Fn(&str)) -> Result<Report, BenchError> {
    let started = Instant::now();
    let cpu0 = CpuSnapshot::now();
    let load0 = procfs::load_average();
    let counter = RequestCounter::new();
    let mut bench = Bench {
        config,
        client: client(&config.endpoint, &counter).await,
        counter,
        run_id: TxId::random().as_str()[..8].to_owned(),
        sets: HashMap::new(),
        steps: StepTimes::default(),
        cells: 0,
        progress,
    };
    let mut result = bench.run_all(started, cpu0).await;
    if let Ok(r) = result.as_mut() {
        r.load = (load0, procfs::load_average());
    }
    // The tables go whatever happened (a long-lived DynamoDB Local keeps its memory).
    bench.drop_sets().await;
    result
}

impl Bench<'_> {
    async fn run_all(&mut self, started: Instant, cpu0: CpuSnapshot) -> Result<Report, BenchError> {
        let config = self.config;
        let uniform2 = Workload {
            contention: Contention::Uniform,
            participants: 2,
        };
        let unit = Workload {
            contention: Contention::Uniform,
            participants: 1,
        };
        let seeding = Instant::now();
        let mut needed = vec![
            (System::Native, Contention::Uniform),
            (System::Coordinator, Contention::Uniform),
        ];
        let regular = !config.only_injected;
        for w in config.workloads.iter().filter(|_| regular) {
            for s in config.transfer_systems() {
                needed.push((s, w.contention));
            }
        }
        if config.burst.is_some() && regular {
            for s in config.transfer_systems() {
                needed.push((s, Contention::Uniform));
            }
        }
        for w in config.injection.iter().flat_map(|i| &i.workloads) {
            for &s in System::INJECTED {
                if config.systems.contains(&s) {
                    needed.push((s, w.contention));
                }
            }
        }
        for (s, c) in needed {
            self.ensure_set(s, c).await?;
        }
        (self.progress)(&format!(
            "{} table sets of {} accounts + {} wallets seeded in {:.1} s; engine warm-up ({:.1} s, unmeasured)",
            self.sets.len(),
            config.accounts,
            config.accounts,
            seeding.elapsed().as_secs_f64(),
            config.engine_warmup.as_secs_f64()
        ));
        let share = config.engine_warmup / 3;
        for (system, w) in [
            (System::Native, uniform2),
            (System::Coordinator, uniform2),
            (System::Unit, unit),
        ] {
            self.slice(system, w, 8, Duration::ZERO, share).await?;
        }
        let mut units = vec![];
        let mut cells = vec![];
        let workloads = if regular { &config.workloads[..] } else { &[] };
        for (i, &w) in workloads.iter().enumerate() {
            for &c in &config.concurrency {
                // The unit cost runs beside the first workload, at every concurrency.
                let mut systems: Vec<(System, Workload)> = vec![];
                if i == 0 && config.systems.contains(&System::Unit) {
                    systems.push((System::Unit, unit));
                }
                systems.extend(config.transfer_systems().into_iter().map(|s| (s, w)));
                for r in self.group(&systems, c).await? {
                    if r.system == System::Unit {
                        units.push(r);
                    } else {
                        cells.push(r);
                    }
                }
            }
        }
        let mut bursts = vec![];
        if let Some(burst) = config.burst.as_ref().filter(|_| regular) {
            for system in config.transfer_systems() {
                bursts.push(self.burst(system, burst).await?);
            }
        }
        let injected = match &config.injection {
            Some(injection) => Some(self.injected(injection).await?),
            None => None,
        };
        let cpu1 = CpuSnapshot::now();
        let peak_rss_kib = units
            .iter()
            .chain(&cells)
            .map(|c| c.costs.peak_rss_kib)
            .chain(bursts.iter().map(|b| b.costs.peak_rss_kib))
            .max()
            .flatten();
        Ok(Report {
            config: config.clone(),
            unit: units,
            cells,
            bursts,
            injected,
            wall: started.elapsed(),
            cpu_total: (
                cpu1.since(&cpu0),
                cpu1.coarse().saturating_sub(cpu0.coarse()),
            ),
            peak_rss_kib,
            make_wall: None,
            load: (None, None),
            previous: None,
        })
    }

    fn keys(&self) -> KeyGen {
        KeyGen {
            accounts: self.config.accounts,
            hot: self.config.hot_accounts,
            hot_fraction: self.config.hot_fraction,
        }
    }

    async fn ensure_set(
        &mut self,
        system: System,
        contention: Contention,
    ) -> Result<(), BenchError> {
        let key = set_of(system, contention);
        if self.sets.contains_key(&key) {
            return Ok(());
        }
        let prefix = format!(
            "bench-{}-{}-{}",
            self.run_id,
            key.0.name().to_lowercase(),
            key.1
        );
        let tables = Tables::create(&self.client, &prefix).await?;
        let set = Set {
            tables,
            expected_sum: 2
                * i128::from(self.config.accounts)
                * i128::from(self.config.initial_balance),
            expected_writes: 0,
            exclusive: false,
        };
        // Registered before seeding, so a failed seed still drops the tables.
        self.sets.insert(key, set);
        if let Some(set) = self.sets.get(&key) {
            set.tables
                .seed(
                    &self.client,
                    self.config.accounts,
                    self.config.initial_balance,
                )
                .await?;
        }
        Ok(())
    }

    async fn drop_sets(&mut self) {
        for (_, set) in self.sets.drain() {
            if let Err(e) = set.tables.drop_all(&self.client).await {
                (self.progress)(&format!(
                    "could not drop the tables of {}: {e}",
                    set.tables.accounts
                ));
            }
        }
    }

    async fn driver(
        &mut self,
        system: System,
        contention: Contention,
    ) -> Result<Arc<Driver>, BenchError> {
        self.ensure_set(system, contention).await?;
        let set = self
            .sets
            .get(&set_of(system, contention))
            .ok_or_else(|| BenchError::Check("table set missing".into()))?;
        Ok(Arc::new(Driver::new(
            system,
            (self.client.clone(), self.counter.clone()),
            set.tables.clone(),
            self.config,
            (
                self.steps.clone(),
                Wiring {
                    hot: contention != Contention::Uniform,
                    ..Wiring::default()
                },
            ),
        )))
    }

    /// One slice of a cell: `concurrency` transfers in flight for `warmup + measure`.
    async fn slice(
        &mut self,
        system: System,
        workload: Workload,
        concurrency: usize,
        warmup: Duration,
        measure: Duration,
    ) -> Result<Slice, BenchError> {
        let driver = self.driver(system, workload.contention).await?;
        self.cells += 1;
        let seed = self.config.seed ^ self.cells;
        let before = self.start_costs();
        let run = load::closed_loop(
            driver,
            self.keys(),
            workload,
            concurrency,
            (warmup, measure),
            (self.config.min_in_window, self.config.max_extension),
            seed,
        )
        .await?;
        let costs = self.end_costs(before);
        let tally = Tally::of(&run.samples);
        self.expect(system, workload.contention, &tally)?;
        Ok(Slice {
            latencies: run.window_latencies(),
            tally,
            window: run.window.1.saturating_duration_since(run.window.0),
            costs,
        })
    }

    /// Merges a cell's slices and audits its tables.
    async fn finish(
        &mut self,
        system: System,
        workload: Workload,
        concurrency: usize,
        slices: Vec<Slice>,
        units: Option<Slice>,
    ) -> Result<CellResult, BenchError> {
        let mut merged = Slice::default();
        for s in slices {
            merged.absorb(s);
        }
        // The audit answers for every transfer the tables saw, the units slice's included.
        let mut seen = merged.tally.clone();
        let mut capacity = Capacity::default();
        if let Some(u) = units {
            seen.absorb(u.tally.clone());
            merged.costs.peaks = merged.costs.peaks.max(&u.costs.peaks);
            capacity = Capacity {
                units: u.costs.requests.units,
                committed: u.tally.committed,
            };
        }
        let driver = self.driver(system, workload.contention).await?;
        let audit_started = Instant::now();
        let (audit, problems) = self.audit(&driver, workload.contention, &seen).await?;
        let audit_time = audit_started.elapsed();
        let result = CellResult {
            system,
            workload,
            concurrency,
            window_committed: merged.latencies.len() as u64,
            latency: Latency::of(&mut merged.latencies),
            window: merged.window,
            tally: merged.tally,
            costs: merged.costs,
            capacity,
            audit,
            problems,
        };
        let units = &result.capacity.units;
        (self.progress)(&format!(
            "{:<11} {:<11} c={:<3} {:>7.1} tx/s  p50 {:>7.2} ms  p99 {:>7.2} ms  abort {:>5.1}% [{}]  {:>5.2} req/tx  {} WCU/tx (+{} refused)  {:>5} us cpu/tx  rounds {:.2}  peaks res {} fence {}  audit {:.1} s{}",
            workload.to_string(),
            system.name(),
            concurrency,
            result.throughput(),
            stats::ms(result.latency.p50),
            stats::ms(result.latency.p99),
            100.0 * result.tally.abort_rate(),
            Reason::ALL
                .iter()
                .map(|r| format!("{} {}", r.name(), result.tally.aborted_attempts[r.index()]))
                .collect::<Vec<_>>()
                .join(", "),
            result.requests_per_commit(),
            capacity::per(units.reported_halves(), result.capacity.committed),
            capacity::per(units.refused_halves(), result.capacity.committed),
            result.cpu_per_commit().as_micros(),
            result.rounds_per_attempt(),
            result.costs.peaks.reservations,
            result.costs.peaks.fence.max(result.audit.max_fence as u64),
            audit_time.as_secs_f64(),
            if result.problems.is_empty() {
                String::new()
            } else {
                format!("  CHECK FAILED: {}", result.problems.join("; "))
            }
        ));
        Ok(result)
    }

    /// Runs `systems` on one workload at one concurrency, alternating them slice by slice
    /// ([`BenchConfig::slices`] times), so a change in the machine's load over time (other
    /// processes share its cores) reaches every system alike.
    async fn group(
        &mut self,
        systems: &[(System, Workload)],
        concurrency: usize,
    ) -> Result<Vec<CellResult>, BenchError> {
        let rounds = self.config.slices.max(1);
        let slice = self.config.measure / rounds;
        let mut slices: Vec<Vec<Slice>> = systems.iter().map(|_| vec![]).collect();
        for _ in 0..rounds {
            for (i, (system, workload)) in systems.iter().enumerate() {
                let s = self
                    .slice(*system, *workload, concurrency, self.config.warmup, slice)
                    .await?;
                slices[i].push(s);
            }
        }
        // One more slice per system in which every request asks for its consumed capacity
        // (asking slows DynamoDB Local: see `Capacity`).
        let mut units: Vec<Option<Slice>> = systems.iter().map(|_| None).collect();
        if self.config.write_units {
            for (i, (system, workload)) in systems.iter().enumerate() {
                self.counter.ask_units(true);
                let s = self
                    .slice(*system, *workload, concurrency, self.config.warmup, slice)
                    .await;
                self.counter.ask_units(false);
                units[i] = Some(s?);
            }
        }
        let mut out = vec![];
        for (((system, workload), s), u) in systems.iter().zip(slices).zip(units) {
            out.push(self.finish(*system, *workload, concurrency, s, u).await?);
        }
        Ok(out)
    }

    async fn burst(&mut self, system: System, burst: &Burst) -> Result<BurstResult, BenchError> {
        let driver = self.driver(system, Contention::Uniform).await?;
        let workload = Workload {
            contention: Contention::Uniform,
            participants: burst.participants,
        };
        let before = self.start_costs();
        let (t0, samples) = load::open_loop(
            driver.clone(),
            self.keys(),
            workload,
            burst.rate,
            burst.transfers(),
            burst.workers,
            self.config.seed ^ 0xb0b5,
        )
        .await?;
        let costs = self.end_costs(before);
        let runtime = samples
            .iter()
            .map(|s| s.end)
            .max()
            .map_or(Duration::ZERO, |end| end.saturating_duration_since(t0));
        let mut latencies: Vec<Duration> = samples.iter().map(Sample::latency).collect();
        let tally = Tally::of(&samples);
        self.expect(system, Contention::Uniform, &tally)?;
        let (audit, problems) = self.audit(&driver, Contention::Uniform, &tally).await?;
        let result = BurstResult {
            system,
            burst: burst.clone(),
            tally,
            runtime,
            latency: Latency::of(&mut latencies),
            costs,
            audit,
            problems,
        };
        (self.progress)(&format!(
            "burst {:<11} {} transfers in {:.1} s  mean {:.0} ms  p95 {:.0} ms  p99 {:.0} ms{}",
            system.name(),
            result.tally.transfers,
            result.runtime.as_secs_f64(),
            stats::ms(result.latency.mean),
            stats::ms(result.latency.p95),
            stats::ms(result.latency.p99),
            if result.problems.is_empty() {
                String::new()
            } else {
                format!("  CHECK FAILED: {}", result.problems.join("; "))
            }
        ));
        Ok(result)
    }

    fn start_costs(&self) -> (Requests, CpuSnapshot, Steps) {
        procfs::reset_peak_rss();
        self.counter.take_peaks();
        (
            self.counter.snapshot(),
            CpuSnapshot::now(),
            self.steps.snapshot(),
        )
    }

    fn end_costs(&self, (requests, cpu, steps): (Requests, CpuSnapshot, Steps)) -> Costs {
        Costs {
            cpu: CpuSnapshot::now().since(&cpu),
            requests: self.counter.snapshot().since(&requests),
            peak_rss_kib: procfs::peak_rss_kib(),
            steps: self.steps.snapshot().since(&steps),
            peaks: self.counter.take_peaks(),
        }
    }

    /// Records what committed transfers did to a set: its next audit must find it.
    fn expect(
        &mut self,
        system: System,
        contention: Contention,
        tally: &Tally,
    ) -> Result<(), BenchError> {
        let set = self
            .sets
            .get_mut(&set_of(system, contention))
            .ok_or_else(|| BenchError::Check("table set missing".into()))?;
        set.expected_sum += tally.net;
        set.expected_writes += tally.writes;
        set.exclusive |= contention == Contention::Exclusive;
        Ok(())
    }

    /// Reads the tables back and lists what does not add up, given what the set has seen
    /// committed so far.
    async fn audit(
        &mut self,
        driver: &Driver,
        contention: Contention,
        tally: &Tally,
    ) -> Result<(Audit, Vec<String>), BenchError> {
        let accounts = self.config.accounts;
        let set = self
            .sets
            .get(&set_of(driver.system(), contention))
            .ok_or_else(|| BenchError::Check("table set missing".into()))?;
        let audit = set.tables.audit(&self.client).await?;
        let mut problems = vec![];
        if audit.balance_sum != set.expected_sum {
            problems.push(format!(
                "balance sum {} (expected {})",
                audit.balance_sum, set.expected_sum
            ));
        }
        if audit.version_sum != set.expected_writes {
            problems.push(format!(
                "{} committed item writes found (expected {})",
                audit.version_sum, set.expected_writes
            ));
        }
        if audit.items != 2 * u64::from(accounts) {
            problems.push(format!("{} items (expected {})", audit.items, 2 * accounts));
        }
        if audit.locks > 0 || audit.placeholders > 0 {
            problems.push(format!(
                "{} locks and {} placeholders left",
                audit.locks, audit.placeholders
            ));
        }
        if audit.reservations > 0 || audit.escrows > 0 {
            problems.push(format!(
                "{} items with reservations and {} with an escrow not idle left",
                audit.reservations, audit.escrows
            ));
        }
        if audit.stale_escrows > 0 && !set.exclusive {
            problems.push(format!(
                "{} items with an idle escrow away from the value, and no exclusive write here",
                audit.stale_escrows
            ));
        }
        if tally.failed > 0 {
            problems.push(format!(
                "{} transfers failed: {}",
                tally.failed,
                tally.failures.join(" | ")
            ));
        }
        if driver.system().keeps_records() {
            let open = driver
                .log()
                .overdue(SystemClock.now_ms() + 3_600_000, 10)
                .await?;
            if !open.is_empty() {
                problems.push(format!("{}+ records not terminal", open.len()));
            }
        }
        Ok((audit, problems))
    }
}
