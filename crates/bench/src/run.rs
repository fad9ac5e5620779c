//! The run: every cell group of the main grid (each workload at each concurrency, its systems
//! taking turns slice by slice), then the sensitivity rows, each system on its own seeded
//! tables behind its own production model, each cell audited after it ran.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aws_sdk_dynamodb::Client;
use aws_smithy_http_client::tls::Provider;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use twopc_core::ids::TxId;
use twopc_core::ports::{Clock, SystemClock, TxLog};

use crate::capacity::Peaks;
use crate::config::BenchConfig;
use crate::counter::{RequestCounter, Requests};
use crate::inject::connector::{Injected, Injector};
use crate::inject::service::{Production, Service};
use crate::load::{self, Sample};
use crate::procfs::{self, CpuSnapshot};
use crate::results::{Cell, Report, ratio};
use crate::stats::{self, percentile};
use crate::systems::{Driver, Reason, System};
use crate::tables::Tables;
use crate::workload::{Contention, Workload};
use crate::{BenchError, report};

/// Cells run side by side: one workload at one concurrency, under one production model.
#[derive(Clone, Debug)]
struct Group {
    workload: Workload,
    concurrency: usize,
    systems: Vec<System>,
    production: Production,
    variant: Option<String>,
}

/// Runs the whole bench; `progress` hears one line per cell group.
pub async fn run(config: &BenchConfig, progress: &dyn Fn(&str)) -> Result<Report, BenchError> {
    let started = Instant::now();
    let load0 = procfs::load_average().unwrap_or_default();
    let admin = client(&config.endpoint, &RequestCounter::new(), None).await;
    let mut sets = Sets {
        admin,
        run_id: TxId::random().as_str()[..8].to_owned(),
        sets: HashMap::new(),
    };
    let cells = run_groups(config, &mut sets, progress).await;
    // The tables go whatever happened (a long-lived DynamoDB Local keeps its memory).
    sets.drop_all(progress).await;
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
        cells: cells?,
    })
}

async fn run_groups(
    config: &BenchConfig,
    sets: &mut Sets,
    progress: &dyn Fn(&str),
) -> Result<Vec<Cell>, BenchError> {
    let mut groups = vec![];
    for &workload in &config.workloads {
        for &concurrency in &config.concurrency {
            groups.push(Group {
                workload,
                concurrency,
                systems: config.systems_at(concurrency),
                production: config.production,
                variant: None,
            });
        }
    }
    let s = &config.sensitivity;
    for v in &s.variants {
        groups.push(Group {
            workload: s.workload,
            concurrency: s.concurrency,
            systems: s.systems.clone(),
            production: v.production,
            variant: Some(v.name.clone()),
        });
    }
    let mut cells = vec![];
    for (i, group) in groups.iter().enumerate() {
        let t0 = Instant::now();
        let done = run_group(config, sets, group, i as u64).await?;
        let line: Vec<String> = done
            .iter()
            .map(|c| format!("{} {:.0} tx/s", c.system, c.committed_per_second))
            .collect();
        progress(&format!(
            "[{:>2}/{}] {} at {} in flight{}: {} ({:.1} s)",
            i + 1,
            groups.len(),
            group.workload,
            group.concurrency,
            group
                .variant
                .as_ref()
                .map_or(String::new(), |v| format!(", {v}")),
            line.join(", "),
            t0.elapsed().as_secs_f64()
        ));
        cells.extend(done);
    }
    Ok(cells)
}

/// One system's share of a group: its client (behind its own model), its driver, and what its
/// slices measured so far.
struct SystemRun {
    driver: Arc<Driver>,
    counter: RequestCounter,
    injector: Injector,
    measured: Vec<Sample>,
    all_committed: (i128, u64),
    window: Duration,
    requests: Requests,
    injected: Injected,
    cpu: Duration,
    peaks: Peaks,
}

async fn run_group(
    config: &BenchConfig,
    sets: &mut Sets,
    group: &Group,
    seed: u64,
) -> Result<Vec<Cell>, BenchError> {
    let mut runs = vec![];
    for &system in &group.systems {
        let tables = sets
            .ensure(config, system, group.workload.contention)
            .await?;
        let injector =
            Injector::new(config.latency.clone()).with_service(Service::new(group.production));
        let counter = RequestCounter::new();
        counter.ask_units(true);
        let client = client(&config.endpoint, &counter, Some(&injector)).await;
        let driver = Driver::new(system, (client, counter.clone()), tables, config);
        runs.push(SystemRun {
            driver: Arc::new(driver),
            counter,
            injector,
            measured: vec![],
            all_committed: (0, 0),
            window: Duration::ZERO,
            requests: Requests::default(),
            injected: Injected::default(),
            cpu: Duration::ZERO,
            peaks: Peaks::default(),
        });
    }
    for slice in 0..config.slices {
        for run in &mut runs {
            run.slice(config, group, seed << 8 | u64::from(slice))
                .await?;
        }
    }
    let mut cells = vec![];
    for run in &mut runs {
        let before = run.counter.snapshot();
        run.driver.sweep_left().await?;
        run.requests = run.requests.plus(&run.counter.snapshot().since(&before));
    }
    for run in runs {
        let mut cell = run.cell(group);
        let contention = group.workload.contention;
        let (problems, fence) = sets
            .audit(run.driver.system(), contention, run.all_committed)
            .await?;
        cell.problems.extend(problems);
        cell.largest_fence = cell.largest_fence.max(fence);
        cells.push(cell);
    }
    Ok(cells)
}

impl SystemRun {
    /// One warm-up and measured window of the group's load.
    async fn slice(
        &mut self,
        config: &BenchConfig,
        group: &Group,
        seed: u64,
    ) -> Result<(), BenchError> {
        let (requests, injected, cpu) = (
            self.counter.snapshot(),
            self.injector.snapshot(),
            CpuSnapshot::now(),
        );
        let _ = self.counter.take_peaks();
        let run = load::closed_loop(
            self.driver.clone(),
            (config.keys, group.workload),
            group.concurrency,
            (config.warmup, config.measure),
            seed,
        )
        .await?;
        self.cpu += CpuSnapshot::now().since(&cpu);
        self.requests = self
            .requests
            .plus(&self.counter.snapshot().since(&requests));
        self.injected = self
            .injected
            .plus(&self.injector.snapshot().since(&injected));
        self.peaks = self.peaks.max(&self.counter.take_peaks());
        self.window += config.measure;
        for s in run.samples.iter().filter(|s| s.committed()) {
            self.all_committed.0 += s.net;
            self.all_committed.1 += s.participants as u64;
        }
        self.measured.extend(run.measured().cloned());
        Ok(())
    }

    /// The cell's figures (its audit added by the caller).
    fn cell(&self, group: &Group) -> Cell {
        let committed: Vec<&Sample> = self.measured.iter().filter(|s| s.committed()).collect();
        let n = committed.len() as u64;
        let mut answers: Vec<Duration> = committed.iter().map(|s| s.answer_latency()).collect();
        answers.sort_unstable();
        let mut applied: Vec<Duration> = committed.iter().map(|s| s.end - s.start).collect();
        applied.sort_unstable();
        let mut aborted = [0u64; Reason::ALL.len()];
        for s in &self.measured {
            for (slot, a) in aborted.iter_mut().zip(s.done.aborted) {
                *slot += u64::from(a);
            }
        }
        let failures: Vec<String> = self
            .measured
            .iter()
            .filter_map(|s| s.done.end.failure())
            .take(3)
            .collect();
        let per = |x: f64| (ratio(x, n as f64) * 100.0).round() / 100.0;
        let ms = |d: Duration| (stats::ms(d) * 100.0).round() / 100.0;
        let mut rounds: Vec<u64> = committed.iter().map(|s| s.done.rounds).collect();
        rounds.sort_unstable();
        Cell {
            model: "production".into(),
            workload: group.workload.to_string(),
            system: self.driver.system().name().into(),
            concurrency: group.concurrency,
            variant: group.variant.clone(),
            transfers: self.measured.len() as u64,
            committed: n,
            committed_per_second: (ratio(n as f64, self.window.as_secs_f64()) * 10.0).round()
                / 10.0,
            never_committed: self.measured.len() as u64 - n,
            aborted_attempts: aborted,
            answer_p50_ms: ms(percentile(&answers, 0.5)),
            answer_p99_ms: ms(percentile(&answers, 0.99)),
            applied_p50_ms: ms(percentile(&applied, 0.5)),
            write_units_per_committed: per(self.requests.write_halves as f64 / 2.0),
            requests_per_committed: per(self.requests.total() as f64),
            rounds_to_answer: (group.concurrency == 1)
                .then(|| rounds.get(rounds.len() / 2).copied())
                .flatten(),
            conflicts_per_committed: per(self.injected.conflicts as f64),
            swept_per_committed: per(self.requests.swept as f64),
            overruns: self.injected.overruns,
            delayed: self.injected.requests(),
            cpu_us_per_committed: per(self.cpu.as_secs_f64() * 1e6).round(),
            largest_reservation_set: self.peaks.reservations,
            largest_fence: self.peaks.fence,
            problems: failures,
        }
    }
}

/// A DynamoDB client for DynamoDB Local whose requests `counter` counts, and `injector` (if
/// any) delays and admits as the production model says.
pub async fn client(
    endpoint: &str,
    counter: &RequestCounter,
    injector: Option<&Injector>,
) -> Client {
    let sdk = twopc_dynamo::sdk_config(Some(endpoint)).await;
    let mut conf = aws_sdk_dynamodb::config::Builder::from(&sdk).interceptor(counter.clone());
    if let Some(injector) = injector {
        // The client the SDK would pick (it builds its default only inside the service client).
        let http = sdk.http_client().unwrap_or_else(|| {
            aws_smithy_http_client::Builder::new()
                .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
                .build_https()
        });
        conf = conf.http_client(injector.wrap(http));
    }
    Client::from_conf(conf.build())
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
            "{} locks, {} placeholders, {} reservation sets and {} busy escrows left",
            audit.locks, audit.placeholders, audit.reservations, audit.escrows
        ));
    }
    if system.keeps_records() {
        let log = twopc_dynamo::DynamoTxLog::new(admin.clone(), &set.tables.tx);
        let open = log.overdue(SystemClock.now_ms() + 3_600_000, 10).await?;
        if !open.is_empty() {
            problems.push(format!("{}+ records not terminal", open.len()));
        }
    }
    Ok((problems, audit.max_fence as u64))
}
