//! The run: every cell group (each workload at each concurrency, then the sensitivity rows and
//! the crossing rows), its systems taking turns repeat by repeat, each system on its own seeded
//! tables behind its own production model, all at the group's dilation; after a group, the
//! product's sweeper and the audit of every system's tables.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{AsyncSleep, SharedAsyncSleep, Sleep};
use aws_smithy_http_client::tls::Provider;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use twopc_core::ports::{Clock, TxLog};

use crate::capacity::Peaks;
use crate::clock::ModelClock;
use crate::config::BenchConfig;
use crate::counter::{self, RequestCounter, Requests};
use crate::inject::connector::{Injected, Injector};
use crate::inject::lognormal::Lognormal;
use crate::inject::service::{Production, Service};
use crate::load::{self, Load, Sample};
use crate::procfs::{self, CpuSnapshot};
use crate::results::{Cell, Percentiles, Report, ratio};
use crate::systems::{Driver, Swept, System, TransferEnd};
use crate::tables::Tables;
use crate::workload::{Contention, KeyGen, Workload};
use crate::{BenchError, cost, report, stats};

/// Cells run side by side: one workload at one concurrency, under one production model.
#[derive(Clone, Debug)]
struct Group {
    workload: Workload,
    concurrency: usize,
    systems: Vec<System>,
    production: Production,
    keys: KeyGen,
    variant: Option<String>,
    hot_fraction: Option<f64>,
    dilation: u32,
}

/// Runs the whole bench against the configured engine (named in the report); `progress` hears
/// one line per cell group.
pub async fn run(config: &BenchConfig, progress: &dyn Fn(&str)) -> Result<Report, BenchError> {
    let started = Instant::now();
    let load0 = procfs::load_average().unwrap_or_default();
    let clock = ModelClock::default();
    let admin = client(&config.endpoint, &RequestCounter::new(), None).await;
    let mut sets = Sets {
        admin,
        run_id: twopc_core::ids::TxId::random().as_str()[..8].to_owned(),
        sets: HashMap::new(),
    };
    let groups = groups(config);
    let mut cells = vec![];
    let mut outcome = Ok(());
    for (i, group) in groups.iter().enumerate() {
        let t0 = Instant::now();
        match run_group(config, &mut sets, group, (i as u64, &clock)).await {
            Ok(done) => {
                progress(&progress_line(group, &done, (i, groups.len()), t0));
                cells.extend(done);
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    // The tables go whatever happened (a long-lived engine keeps its memory).
    sets.drop_all(progress).await;
    outcome?;
    Ok(Report {
        generated: report::utc(SystemTime::now()),
        mode: config.mode.into(),
        machine: report::machine(),
        engine: config.engine.clone(),
        load: (load0, procfs::load_average().unwrap_or_default()),
        wall_seconds: started.elapsed().as_secs(),
        assumptions: report::assumptions(config),
        floor_p50_ms: [2, 8]
            .map(|n| (n, (config.latency.floor(n, 0.5) * 100.0).round() / 100.0))
            .to_vec(),
        cells,
    })
}

fn progress_line(group: &Group, done: &[Cell], (i, n): (usize, usize), t0: Instant) -> String {
    let line: Vec<String> = done
        .iter()
        .map(|c| {
            format!(
                "{} {:.0} tx/s{}",
                c.system,
                c.goodput,
                if c.machine_bound() { " (late)" } else { "" }
            )
        })
        .collect();
    let what = match (&group.variant, group.hot_fraction) {
        (Some(v), _) => format!(", {v}"),
        (None, Some(f)) => format!(", {:.0}% on hot items", f * 100.0),
        (None, None) => String::new(),
    };
    format!(
        "[{:>2}/{n}] {} at {} in flight{what} (×{}): {} ({:.1} s)",
        i + 1,
        group.workload,
        group.concurrency,
        group.dilation,
        line.join(", "),
        t0.elapsed().as_secs_f64()
    )
}

/// The main grid, then the sensitivity rows, then the crossing rows.
fn groups(config: &BenchConfig) -> Vec<Group> {
    let group = |workload, concurrency, systems| Group {
        workload,
        concurrency,
        systems,
        production: config.production,
        keys: config.keys,
        variant: None,
        hot_fraction: None,
        dilation: config.dilation_at(concurrency),
    };
    let mut groups = vec![];
    for &workload in &config.workloads {
        for &concurrency in config.concurrency_of(workload) {
            groups.push(group(workload, concurrency, config.systems_at(concurrency)));
        }
    }
    let s = &config.sensitivity;
    for v in &s.rows {
        groups.push(Group {
            production: v.production,
            variant: Some(v.name.clone()),
            ..group(s.workload, s.concurrency, s.systems.clone())
        });
    }
    let x = &config.crossing;
    for &fraction in &x.rows {
        groups.push(Group {
            keys: KeyGen {
                hot_fraction: fraction,
                ..config.keys
            },
            hot_fraction: Some(fraction),
            ..group(x.workload, x.concurrency, x.systems.clone())
        });
    }
    groups
}

/// One system's share of a group: its client (behind its own model), its driver, and what its
/// repeats measured so far.
struct SystemRun {
    driver: Arc<Driver>,
    counter: RequestCounter,
    injector: Injector,
    repeats: Vec<f64>,
    committed: u64,
    window: Duration,
    samples: Vec<Sample>,
    all_committed: (i128, u64),
    requests: Requests,
    injected: Injected,
    cpu: Duration,
    peaks: Peaks,
    swept: Swept,
}

async fn run_group(
    config: &BenchConfig,
    sets: &mut Sets,
    group: &Group,
    (seed, clock): (u64, &ModelClock),
) -> Result<Vec<Cell>, BenchError> {
    clock.set_dilation(group.dilation);
    let mut runs = vec![];
    for &system in &group.systems {
        let tables = sets
            .ensure(config, system, group.workload.contention)
            .await?;
        let clients = (sets.admin.clone(), tables);
        runs.push(SystemRun::new(config, group, system, clients, clock).await);
    }
    for repeat in 0..config.repeats {
        for run in &mut runs {
            run.repeat(config, group, seed << 8 | u64::from(repeat), clock)
                .await?;
        }
    }
    let mut cells = vec![];
    for mut run in runs {
        run.swept = run.driver.sweep().await?;
        let unknown = run.resolve_unknown().await?;
        let mut cell = run.cell(config, group);
        let (problems, fence) = sets
            .audit(run.driver.system(), group.workload.contention, unknown)
            .await?;
        cell.problems.extend(problems);
        cell.largest_fence = cell.largest_fence.max(fence);
        cells.push(cell);
    }
    Ok(cells)
}

impl SystemRun {
    async fn new(
        config: &BenchConfig,
        group: &Group,
        system: System,
        (admin, tables): (Client, Tables),
        clock: &ModelClock,
    ) -> SystemRun {
        let injector = Injector::new(config.latency.clone(), group.dilation)
            .with_service(Service::new(group.production, group.dilation));
        let counter = RequestCounter::new();
        counter.ask_units(true);
        let client = client(
            &config.endpoint,
            &counter,
            Some((&injector, group.dilation)),
        )
        .await;
        let driver = Driver::new(
            system,
            (client, admin, counter.clone()),
            tables,
            clock.clone(),
            (config, group.concurrency),
        );
        SystemRun {
            driver: Arc::new(driver),
            counter,
            injector,
            repeats: vec![],
            committed: 0,
            window: Duration::ZERO,
            samples: vec![],
            all_committed: (0, 0),
            requests: Requests::default(),
            injected: Injected::default(),
            cpu: Duration::ZERO,
            peaks: Peaks::default(),
            swept: Swept::default(),
        }
    }

    /// One warm-up and measured window of the group's load; the counters count the window.
    async fn repeat(
        &mut self,
        config: &BenchConfig,
        group: &Group,
        seed: u64,
        clock: &ModelClock,
    ) -> Result<(), BenchError> {
        let load = Load {
            driver: self.driver.clone(),
            keys: group.keys,
            workload: group.workload,
            concurrency: group.concurrency,
            clock: clock.clone(),
        };
        let (counter, injector) = (self.counter.clone(), self.injector.clone());
        let _ = self.counter.take_peaks();
        let k = group.dilation;
        let run = load::closed_loop(
            &load,
            (config.warmup * k, config.measure * k),
            seed,
            move || (counter.snapshot(), injector.snapshot(), CpuSnapshot::now()),
        )
        .await?;
        let ((r0, i0, c0), (r1, i1, c1)) = &run.counters;
        self.requests = self.requests.plus(&r1.since(r0));
        self.injected = self.injected.plus(&i1.since(i0));
        self.cpu += c1.since(c0);
        self.peaks = self.peaks.max(&self.counter.take_peaks());
        let committed = run.committed_in_window();
        self.committed += committed;
        self.window += config.measure;
        self.repeats.push(round(
            ratio(committed as f64, config.measure.as_secs_f64()),
            1,
        ));
        for s in run.samples.iter().filter(|s| s.committed()) {
            self.all_committed.0 += s.net;
            self.all_committed.1 += s.participants as u64;
        }
        self.samples.extend(run.measured().cloned());
        Ok(())
    }

    /// After the sweeper: the transfers whose client got an error but whose transaction
    /// committed (their writes are in the tables), added to what the audit must find.
    async fn resolve_unknown(&mut self) -> Result<(i128, u64), BenchError> {
        let mut found = (0, 0);
        for s in &self.samples {
            if let TransferEnd::Failed { tx: Some(tx), .. } = &s.done.end
                && self.driver.committed(tx).await?
            {
                found.0 += s.net;
                found.1 += s.participants as u64;
            }
        }
        Ok((
            self.all_committed.0 + found.0,
            self.all_committed.1 + found.1,
        ))
    }
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// A DynamoDB client for the engine whose requests `counter` counts, and `injector` (if any)
/// delays and admits as the production model says, every wait on its sleep dilated alike: the
/// SDK's retry backoffs and the product's own waits on a write a transaction holds.
pub async fn client(
    endpoint: &str,
    counter: &RequestCounter,
    injector: Option<(&Injector, u32)>,
) -> Client {
    let sdk = twopc_dynamo::sdk_config(Some(endpoint)).await;
    let mut conf = aws_sdk_dynamodb::config::Builder::from(&sdk).interceptor(counter.clone());
    if let Some((injector, k)) = injector {
        // The client the SDK would pick (it builds its default only inside the service client).
        let http = sdk.http_client().unwrap_or_else(|| {
            aws_smithy_http_client::Builder::new()
                .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
                .build_https()
        });
        conf = conf
            .http_client(injector.wrap(http))
            .sleep_impl(SharedAsyncSleep::new(Dilated(k)));
    }
    Client::from_conf(conf.build())
}

/// Tokio's sleep, `k` times as long: the model's waits on this machine's wall.
#[derive(Debug)]
struct Dilated(u32);

impl AsyncSleep for Dilated {
    fn sleep(&self, d: Duration) -> Sleep {
        Sleep::new(tokio::time::sleep(d * self.0))
    }
}

/// One seeded set of tables per (system, contention), reused by that system's cells of every
/// concurrency and participant count (as a deployment carries its state from one load to the
/// next), and what its audit must find.
struct Sets {
    admin: Client,
    run_id: String,
    sets: HashMap<(System, Contention), Set>,
}

struct Set {
    tables: Tables,
    /// Balance sum the audit must find.
    expected_sum: i128,
    /// Committed item writes (`txVersion` sum) the audit must find.
    expected_writes: u64,
    accounts: u32,
}

impl Sets {
    /// The tables of `system` for `contention`, created and seeded the first time.
    async fn ensure(
        &mut self,
        config: &BenchConfig,
        system: System,
        contention: Contention,
    ) -> Result<Tables, BenchError> {
        if let Some(set) = self.sets.get(&(system, contention)) {
            return Ok(set.tables.clone());
        }
        let prefix = format!("bench-{}-{system}-{contention}", self.run_id);
        let tables = Tables::create(&self.admin, &prefix).await?;
        let accounts = config.keys.accounts;
        // Registered before seeding, so a failed seed still drops the tables.
        self.sets.insert(
            (system, contention),
            Set {
                tables: tables.clone(),
                expected_sum: 2 * i128::from(accounts) * i128::from(config.initial_balance),
                expected_writes: 0,
                accounts,
            },
        );
        tables
            .seed(&self.admin, accounts, config.initial_balance)
            .await?;
        Ok(tables)
    }

    /// Notes what a cell committed on a set, then reads the set back: what does not add up,
    /// and the largest fence found.
    async fn audit(
        &mut self,
        system: System,
        contention: Contention,
        (net, writes): (i128, u64),
    ) -> Result<(Vec<String>, u64), BenchError> {
        let set = self
            .sets
            .get_mut(&(system, contention))
            .ok_or_else(|| BenchError::Check("table set missing".into()))?;
        set.expected_sum += net;
        set.expected_writes += writes;
        audit(&self.admin, set, system).await
    }

    async fn drop_all(&mut self, progress: &dyn Fn(&str)) {
        for (_, set) in self.sets.drain() {
            if let Err(e) = set.tables.drop_all(&self.admin).await {
                progress(&format!(
                    "could not drop the tables of {}: {e}",
                    set.tables.accounts
                ));
            }
        }
    }
}

/// Reads a set back and lists what does not add up, given what it has seen committed.
async fn audit(
    admin: &Client,
    set: &Set,
    system: System,
) -> Result<(Vec<String>, u64), BenchError> {
    let audit = set.tables.audit(admin).await?;
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
    if audit.items != 2 * u64::from(set.accounts) {
        problems.push(format!(
            "{} items (expected {})",
            audit.items,
            2 * set.accounts
        ));
    }
    let held = audit.locks + audit.placeholders + audit.reservations + audit.escrows;
    if held > 0 {
        problems.push(format!(
            "{} locks, {} placeholders, {} reservation sets and {} busy escrows left after the sweeper",
            audit.locks, audit.placeholders, audit.reservations, audit.escrows
        ));
    }
    if system.keeps_records() {
        let log = twopc_dynamo::DynamoTxLog::new(admin.clone(), &set.tables.tx);
        let later = twopc_core::ports::SystemClock.now_ms() + 10 * 365 * 86_400_000;
        let open = log.overdue(later, 10).await?;
        if !open.is_empty() {
            problems.push(format!(
                "{}+ records not terminal after the sweeper",
                open.len()
            ));
        }
    }
    Ok((problems, audit.max_fence as u64))
}

/// The cell's figures, from a system's pooled repeats.
mod figures {
    use super::*;

    impl SystemRun {
        /// The cell's figures (its audit added by the caller).
        pub(super) fn cell(&self, config: &BenchConfig, group: &Group) -> Cell {
            let k = group.dilation;
            let n = self.committed;
            let per = |x: u64| round(ratio(x as f64, n as f64), 2);
            let committed: Vec<&Sample> = self.samples.iter().filter(|s| s.committed()).collect();
            // Figures of the transfers themselves: over those started in the windows.
            let cohort = |x: u32| ratio(x as f64, committed.len() as f64);
            let per_transfer =
                |f: fn(&Sample) -> u32| round(cohort(self.samples.iter().map(f).sum()), 2);
            let mut applied: Vec<Duration> =
                committed.iter().map(|s| (s.end - s.start) / k).collect();
            applied.sort_unstable();
            let mut rounds: Vec<u64> = committed.iter().map(|s| s.done.rounds).collect();
            rounds.sort_unstable();
            let (answer, deployed) = self.latencies(config, group);
            let mut aborted = [0u64; 5];
            for s in &self.samples {
                for (slot, a) in aborted.iter_mut().zip(s.done.aborted) {
                    *slot += u64::from(a);
                }
            }
            let r = &self.requests;
            let u = &r.units;
            Cell {
                workload: group.workload.to_string(),
                system: self.driver.system().name().into(),
                concurrency: group.concurrency,
                variant: group.variant.clone(),
                hot_fraction: group.hot_fraction,
                dilation: k,
                repeats: self.repeats.clone(),
                transfers: self.samples.len() as u64,
                committed: n,
                goodput: round(ratio(n as f64, self.window.as_secs_f64()), 1),
                never_committed: self.samples.len() as u64 - committed.len() as u64,
                failed: self
                    .samples
                    .iter()
                    .filter(|s| s.done.end.failure().is_some())
                    .count() as u64,
                aborted_attempts: aborted,
                answer,
                deployed,
                applied_p50_ms: round(stats::ms(stats::percentile(&applied, 0.5)), 2),
                write_units: per(u.write_halves / 2 + u.index_writes),
                write_units_high: per((u.write_halves + u.cancelled_halves) / 2 + u.index_writes),
                index_writes: per(u.index_writes),
                read_units: per(u.read_halves / 2),
                requests: per(r.total()),
                attempts: per_transfer(|s| s.done.attempts),
                rounds_to_answer: (group.concurrency == 1)
                    .then(|| rounds.get(rounds.len() / 2).copied())
                    .flatten(),
                conflicts: per(self.injected.conflicts),
                throttles: per(self.injected.throttles),
                left_open: per_transfer(|s| s.done.left_open),
                swept: (self.swept.records, self.swept.locks),
                late: self.injected.overruns,
                delayed: self.injected.requests(),
                cpu_us: round(ratio(self.cpu.as_secs_f64() * 1e6, n as f64), 0),
                cost: cost::cost(&self.usage(group)),
                largest_reservation_set: self.peaks.reservations,
                largest_fence: self.peaks.fence,
                problems: vec![],
            }
        }

        /// Answer percentiles over every transfer (a never-committed one at its deadline), and
        /// as deployed (the protocol's behind the front door, seeded per cell).
        fn latencies(&self, config: &BenchConfig, group: &Group) -> (Percentiles, Percentiles) {
            let door = Lognormal::from_p50_p99(config.front_door.p50_ms, config.front_door.p99_ms);
            let mut rng = SmallRng::seed_from_u64(config.latency.seed ^ group.concurrency as u64);
            let protocol = self.driver.system().keeps_records();
            let (mut answer, mut deployed) = (vec![], vec![]);
            for s in &self.samples {
                let ms = if s.committed() {
                    stats::ms(s.answer_latency() / group.dilation)
                } else {
                    config.retry.deadline.as_secs_f64() * 1e3
                };
                answer.push(ms);
                let hop = if protocol && s.committed() {
                    door.sample(&mut rng)
                } else {
                    0.0
                };
                deployed.push(ms + hop);
            }
            (stats::percentiles(answer), stats::percentiles(deployed))
        }

        /// What the windows consumed, for the cost.
        fn usage(&self, group: &Group) -> cost::Usage {
            let protocol = self.driver.system().keeps_records();
            let r = &self.requests;
            let ops =
                |names: &[&str]| -> u64 { names.iter().map(|op| r.by_op[counter::slot(op)]).sum() };
            let singles = ops(&["PutItem", "UpdateItem", "DeleteItem"]);
            let items = group.workload.participants as u64 + 1;
            let refused = self.injected.conflicts + self.injected.throttles;
            // The transfers' own figures scaled from those started in the windows to the
            // transfers committed in them.
            let cohort = self.samples.iter().filter(|s| s.committed()).count().max(1) as u128;
            let scale = |x: u128| (x * u128::from(self.committed) / cohort) as u64;
            let calls = scale(
                self.samples
                    .iter()
                    .map(|s| u128::from(s.done.attempts))
                    .sum(),
            );
            let coordinator = scale(
                self.samples
                    .iter()
                    .map(|s| (s.done.coordinator / group.dilation).as_micros())
                    .sum(),
            ) / 1000;
            cost::Usage {
                committed: self.committed,
                write_halves: r.units.write_halves,
                cancelled_halves: r.units.cancelled_halves,
                read_halves: r.units.read_halves,
                index_writes: r.units.index_writes,
                calls: if protocol { calls } else { 0 },
                coordinator_ms: coordinator,
                stream_records: if protocol {
                    (singles + ops(&["TransactWriteItems"]) * items).saturating_sub(refused)
                } else {
                    0
                },
                lake_rows: if protocol {
                    self.committed * group.workload.participants as u64
                } else {
                    0
                },
            }
        }
    }
}
