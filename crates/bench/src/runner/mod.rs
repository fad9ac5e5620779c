//! The run itself: [`run`] creates the table sets, warms the engine up, runs the closed-loop
//! cells (the systems of a workload taking turns slice by slice, then a units slice each), the
//! open-loop bursts and the injected cells, and gathers the [`Report`]. The table sets and
//! their audits are in [`sets`].

mod sets;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use twopc_core::ids::TxId;

use crate::config::{BenchConfig, Burst};
use crate::counter::{RequestCounter, Requests};
use crate::load::{self, Sample};
use crate::procfs::{self, CpuSnapshot};
use crate::stats::{self, Latency};
use crate::systems::{Driver, Reason, System, Wiring};
use crate::timing::{StepTimes, Steps};
use crate::workload::{Contention, KeyGen, Workload};
use crate::{
    BenchError, BurstResult, Capacity, CellResult, Costs, Report, Tally, capacity, client,
};
use sets::Set;

/// The workload the engine warms up on.
const UNIFORM_2P: Workload = Workload {
    contention: Contention::Uniform,
    participants: 2,
};

/// The unit cost's workload: one item.
const UNIT: Workload = Workload {
    contention: Contention::Uniform,
    participants: 1,
};

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

/// A run under way: its client and counters, its table sets, its progress lines.
pub(crate) struct Bench<'a> {
    pub(crate) config: &'a BenchConfig,
    client: Client,
    pub(crate) counter: RequestCounter,
    run_id: String,
    sets: HashMap<(System, Contention), Set>,
    pub(crate) steps: StepTimes,
    /// Slices and cells run so far (each seeds its key generator apart).
    pub(crate) cells: u64,
    pub(crate) progress: &'a dyn Fn(&str),
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
    /// The whole run, the table sets seeded first; the caller drops them.
    async fn run_all(&mut self, started: Instant, cpu0: CpuSnapshot) -> Result<Report, BenchError> {
        let config = self.config;
        let regular = !config.only_injected;
        self.seed_sets().await?;
        self.warm_up().await?;
        let (units, cells) = if regular {
            self.closed_loop().await?
        } else {
            (vec![], vec![])
        };
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

    /// Mixed load, unmeasured, before anything is measured (DynamoDB Local's JIT).
    async fn warm_up(&mut self) -> Result<(), BenchError> {
        let share = self.config.engine_warmup / 3;
        for (system, w) in [
            (System::Native, UNIFORM_2P),
            (System::Coordinator, UNIFORM_2P),
            (System::Unit, UNIT),
        ] {
            self.slice(system, w, 8, Duration::ZERO, share).await?;
        }
        Ok(())
    }

    /// The closed-loop cells, every workload at every concurrency, the unit cost beside the
    /// first workload: (unit cells, transfer cells).
    async fn closed_loop(&mut self) -> Result<(Vec<CellResult>, Vec<CellResult>), BenchError> {
        let config = self.config;
        let mut units = vec![];
        let mut cells = vec![];
        for (i, &w) in config.workloads.iter().enumerate() {
            for &c in &config.concurrency {
                // The unit cost runs beside the first workload, at every concurrency.
                let mut systems: Vec<(System, Workload)> = vec![];
                if i == 0 && config.systems.contains(&System::Unit) {
                    systems.push((System::Unit, UNIT));
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
        Ok((units, cells))
    }

    /// The run's key generator.
    pub(crate) fn keys(&self) -> KeyGen {
        KeyGen {
            accounts: self.config.accounts,
            hot: self.config.hot_accounts,
            hot_fraction: self.config.hot_fraction,
        }
    }

    /// A driver of `system` over its table set for `contention` (created and seeded if new).
    async fn driver(
        &mut self,
        system: System,
        contention: Contention,
    ) -> Result<Arc<Driver>, BenchError> {
        self.ensure_set(system, contention).await?;
        Ok(Arc::new(Driver::new(
            system,
            (self.client.clone(), self.counter.clone()),
            self.tables(system, contention)?.clone(),
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
        (self.progress)(&cell_line(&result, audit_time));
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
        (self.progress)(&burst_line(&result));
        Ok(result)
    }

    /// Resets the peaks and snapshots the counters before a measured stretch.
    fn start_costs(&self) -> (Requests, CpuSnapshot, Steps) {
        procfs::reset_peak_rss();
        self.counter.take_peaks();
        (
            self.counter.snapshot(),
            CpuSnapshot::now(),
            self.steps.snapshot(),
        )
    }

    /// What the stretch begun by [`Bench::start_costs`] cost.
    fn end_costs(&self, (requests, cpu, steps): (Requests, CpuSnapshot, Steps)) -> Costs {
        Costs {
            cpu: CpuSnapshot::now().since(&cpu),
            requests: self.counter.snapshot().since(&requests),
            peak_rss_kib: procfs::peak_rss_kib(),
            steps: self.steps.snapshot().since(&steps),
            peaks: self.counter.take_peaks(),
        }
    }
}

/// The progress line of a finished cell.
fn cell_line(result: &CellResult, audit_time: Duration) -> String {
    let units = &result.capacity.units;
    format!(
        "{:<11} {:<11} c={:<3} {:>7.1} tx/s  p50 {:>7.2} ms  p99 {:>7.2} ms  abort {:>5.1}% [{}]  {:>5.2} req/tx  {} WCU/tx (+{} refused)  {:>5} us cpu/tx  rounds {:.2}  peaks res {} fence {}  audit {:.1} s{}",
        result.workload.to_string(),
        result.system.name(),
        result.concurrency,
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
    )
}

/// The progress line of a finished open-loop run.
fn burst_line(result: &BurstResult) -> String {
    format!(
        "burst {:<11} {} transfers in {:.1} s  mean {:.0} ms  p95 {:.0} ms  p99 {:.0} ms{}",
        result.system.name(),
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
    )
}
