//! The injected-latency cells: each system runs a fixed count of transfers on a client whose
//! every DynamoDB request first waits a sample of the model ([`super::connector`]), after a few
//! unmeasured ones. Per cell: the time to the client's answer and to applied, how long each
//! item stayed held, the rounds of requests before the answer (counted, at one in flight), and
//! the same audit as every other cell.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_smithy_http_client::tls::Provider;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;

use crate::counter::{RequestCounter, Requests};
use crate::inject::Injection;
use crate::inject::connector::{Injected, Injector};
use crate::load::{self, Sample};
use crate::runner::Bench;
use crate::stats::{self, Latency};
use crate::systems::{Driver, Outcome, System, Wiring};
use crate::tables::Audit;
use crate::timing::Holds;
use crate::workload::Workload;
use crate::{BenchError, Tally};

/// Chunks a cell's transfers are run in, a progress line after each.
const CHUNKS: usize = 4;

/// One system on one workload at one concurrency, latency injected.
#[derive(Clone, Debug, PartialEq)]
pub struct InjectedCell {
    /// System.
    pub system: System,
    /// Workload.
    pub workload: Workload,
    /// Transfers in flight.
    pub concurrency: usize,
    /// Outcomes of the measured transfers.
    pub tally: Tally,
    /// Start to the client's answer, committed transfers (retries included).
    pub answer: Latency,
    /// Start to applied (the transfer's end), committed transfers.
    pub applied: Latency,
    /// Per item, a prepare's `yes` back at the coordinator to its release acknowledged
    /// (systems with participants only; empty for native, whose holds DynamoDB keeps inside).
    pub hold: Latency,
    /// Rounds of requests from a transfer's start to its answer, per committed transfer,
    /// counted (one in flight only: with more, rounds of different transfers merge).
    pub rounds_to_answer: Option<f64>,
    /// Requests sent while the measured transfers ran.
    pub requests: Requests,
    /// Delays injected meanwhile.
    pub injected: Injected,
    /// Wall time of the measured transfers.
    pub wall: Duration,
    /// The audit of the tables after the cell.
    pub audit: Audit,
    /// Failed checks.
    pub problems: Vec<String>,
}

impl InjectedCell {
    /// DynamoDB requests per committed transfer.
    pub fn requests_per_commit(&self) -> f64 {
        if self.tally.committed == 0 {
            return f64::NAN;
        }
        self.requests.total() as f64 / self.tally.committed as f64
    }
}

/// The injected cells of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct InjectedRun {
    /// What was run.
    pub injection: Injection,
    /// The cells, by workload, concurrency, then system.
    pub cells: Vec<InjectedCell>,
}

impl InjectedRun {
    /// The cell of `system` on `workload` at `concurrency`.
    pub fn cell(
        &self,
        system: System,
        workload: Workload,
        concurrency: usize,
    ) -> Option<&InjectedCell> {
        self.cells
            .iter()
            .find(|c| c.system == system && c.workload == workload && c.concurrency == concurrency)
    }
}

/// A client of `endpoint` whose requests `counter` counts and `injector` delays.
pub async fn injecting_client(
    endpoint: &str,
    counter: &RequestCounter,
    injector: &Injector,
) -> Client {
    let sdk = twopc_dynamo::sdk_config(Some(endpoint)).await;
    // The client the SDK would pick (it builds its default only inside the service client).
    let http = sdk.http_client().unwrap_or_else(|| {
        aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
            .build_https()
    });
    let conf = aws_sdk_dynamodb::config::Builder::from(&sdk)
        .http_client(injector.wrap(http))
        .interceptor(counter.clone())
        .build();
    Client::from_conf(conf)
}

impl Bench<'_> {
    /// Runs the injected cells.
    pub(crate) async fn injected(
        &mut self,
        injection: &Injection,
    ) -> Result<InjectedRun, BenchError> {
        let injector = Injector::new(injection.model.clone());
        let client = injecting_client(&self.config.endpoint, &self.counter, &injector).await;
        let m = injector.model();
        (self.progress)(&format!(
            "injected latency ({}): single-item p50 {} / p99 {} ms, TransactWriteItems p50 {} / p99 {} ms at {} items and p50 {} ms at {}, Lambda hop {} ms, seed {}; {} transfers a cell",
            super::model::SOURCE,
            m.single.0,
            m.single.1,
            m.transact.0,
            m.transact.1,
            m.transact_items,
            m.transact_large,
            m.transact_large_items,
            m.hop_ms(),
            m.seed,
            injection.transfers
        ));
        let systems: Vec<System> = System::INJECTED
            .iter()
            .copied()
            .filter(|s| self.config.systems.contains(s))
            .collect();
        let mut cells = vec![];
        for &workload in &injection.workloads {
            for &concurrency in &injection.concurrency {
                for &system in &systems {
                    let cell = self
                        .injected_cell(
                            (system, workload, concurrency),
                            injection,
                            &client,
                            &injector,
                        )
                        .await?;
                    cells.push(cell);
                }
            }
        }
        Ok(InjectedRun {
            injection: injection.clone(),
            cells,
        })
    }

    async fn injected_cell(
        &mut self,
        (system, workload, concurrency): (System, Workload, usize),
        injection: &Injection,
        client: &Client,
        injector: &Injector,
    ) -> Result<InjectedCell, BenchError> {
        self.ensure_set(system, workload.contention).await?;
        let tables = self.tables(system, workload.contention)?.clone();
        let holds = Holds::default();
        let driver = Arc::new(Driver::new(
            system,
            (client.clone(), self.counter.clone()),
            tables,
            self.config,
            (
                self.steps.clone(),
                Wiring {
                    hop: injection.model.lambda_hop,
                    holds: Some(holds.clone()),
                    hot: false,
                },
            ),
        ));
        let label = format!(
            "injected {:<13} {:<14} c={concurrency}",
            workload.to_string(),
            system.injected_name()
        );

        // Unmeasured: connections of the new client, the first items' sizes.
        let mut seen = Tally::default();
        let warm = self
            .count(&driver, workload, concurrency, injection.warmup)
            .await?;
        seen.absorb(Tally::of(&warm));

        let (requests0, injected0, holds0) = (
            self.counter.snapshot(),
            injector.snapshot(),
            holds.released_count(),
        );
        let started = Instant::now();
        let mut samples: Vec<Sample> = vec![];
        let chunk = injection.transfers.div_ceil(CHUNKS).max(1);
        while samples.len() < injection.transfers {
            let n = chunk.min(injection.transfers - samples.len());
            samples.extend(self.count(&driver, workload, concurrency, n).await?);
            (self.progress)(&format!(
                "{label}: {}/{} transfers, {:.1} s",
                samples.len(),
                injection.transfers,
                started.elapsed().as_secs_f64()
            ));
        }
        let wall = started.elapsed();
        let requests = self.counter.snapshot().since(&requests0);
        let injected = injector.snapshot().since(&injected0);
        let mut hold_times = holds.since(holds0);

        let tally = Tally::of(&samples);
        seen.absorb(tally.clone());
        self.expect(system, workload.contention, &seen)?;
        let audit_started = Instant::now();
        let (audit, problems) = self.audit(&driver, workload.contention, &seen).await?;
        let audit_time = audit_started.elapsed();
        let committed: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.done.outcome == Outcome::Committed)
            .collect();
        let mut answers: Vec<Duration> = committed.iter().map(|s| s.answer_latency()).collect();
        let mut applied: Vec<Duration> = committed.iter().map(|s| s.latency()).collect();
        let rounds_to_answer = (concurrency == 1 && !committed.is_empty()).then(|| {
            committed
                .iter()
                .map(|s| s.done.rounds_to_answer as f64)
                .sum::<f64>()
                / committed.len() as f64
        });
        let cell = InjectedCell {
            system,
            workload,
            concurrency,
            answer: Latency::of(&mut answers),
            applied: Latency::of(&mut applied),
            hold: Latency::of(&mut hold_times),
            rounds_to_answer,
            requests,
            injected,
            wall,
            tally,
            audit,
            problems,
        };
        (self.progress)(&format!(
            "{label}: answer p50 {:.1} / p99 {:.1} ms, applied p50 {:.1} / p99 {:.1} ms, hold p50 {:.1} ms, rounds to answer {}, {:.2} req/tx, floor p50 {:.1} ms, Local late {} of {}, audit {:.1} s{}",
            stats::ms(cell.answer.p50),
            stats::ms(cell.answer.p99),
            stats::ms(cell.applied.p50),
            stats::ms(cell.applied.p99),
            stats::ms(cell.hold.p50),
            cell.rounds_to_answer
                .map_or("-".to_owned(), |r| format!("{r:.2}")),
            cell.requests_per_commit(),
            injection.model.floor(workload.participants, 0.5),
            cell.injected.overruns,
            cell.injected.requests(),
            audit_time.as_secs_f64(),
            if cell.problems.is_empty() {
                String::new()
            } else {
                format!("  CHECK FAILED: {}", cell.problems.join("; "))
            }
        ));
        Ok(cell)
    }

    /// `transfers` transfers at `concurrency`, a fresh seed each time.
    async fn count(
        &mut self,
        driver: &Arc<Driver>,
        workload: Workload,
        concurrency: usize,
        transfers: usize,
    ) -> Result<Vec<Sample>, BenchError> {
        self.cells += 1;
        load::closed_count(
            driver.clone(),
            self.keys(),
            workload,
            concurrency,
            transfers,
            self.config.seed ^ self.cells,
        )
        .await
    }
}
