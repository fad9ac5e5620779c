//! The bank test: many concurrent transfers between accounts on two participant tables, through
//! the real coordinator on DynamoDB Local, while coordinators crash at named fault points,
//! participant messages are duplicated and delivered late, and leases expire mid-flight. Then
//! the sweeper runs past every deadline, and every invariant of docs/protocol.md is checked against a
//! ledger built from the transaction records.
//!
//! Knobs (environment): `TWOPC_BANK_TRANSFERS` (default 300), `TWOPC_BANK_CONCURRENCY` (16),
//! `TWOPC_BANK_ACCOUNTS` per table (6: hot), `TWOPC_BANK_SEED` (random; printed, replays the
//! same plan).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use twopc_core::fault::FaultPoint;
use twopc_core::ids::TxId;
use twopc_core::message::{CompleteReply, CompleteRequest, PrepareReply, PrepareRequest};
use twopc_core::ports::{ManualClock, Transport, TransportError};
use twopc_core::record::Target;
use twopc_core::status::TxStatus;
use twopc_core::sweeper::SweepConfig;
use twopc_tests::{CrashAt, TestTransport, World};

const INITIAL: i128 = 1_000;
const TIMEOUT_MS: u64 = 1_000;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What happens to one transfer.
#[derive(Clone, Debug)]
struct Plan {
    key: String,
    from: (&'static str, String),
    to: (&'static str, String),
    amount: i64,
    crash: Option<FaultPoint>,
    /// Deliver every commit/abort twice.
    duplicate_completion: bool,
    /// Keep a copy of each prepare and deliver it again after the transfer returns.
    late_prepare: bool,
    /// Before participant i's prepare, move the clock by this much (lease expiry mid-flight).
    jump_before_prepare: [u64; 2],
}

fn account(rng: &mut StdRng, accounts: u64) -> (&'static str, String) {
    let service = if rng.random_bool(0.5) {
        "accounts"
    } else {
        "wallets"
    };
    (service, format!("acct-{}", rng.random_range(0..accounts)))
}

fn plans(seed: u64, transfers: u64, accounts: u64) -> Vec<Plan> {
    let mut rng = StdRng::seed_from_u64(seed);
    let points = [
        FaultPoint::AfterBegin,
        FaultPoint::AfterPrepare(0),
        FaultPoint::AfterPrepare(1),
        FaultPoint::BeforeDecide,
        FaultPoint::AfterDecide,
        FaultPoint::AfterComplete(0),
        FaultPoint::AfterComplete(1),
        FaultPoint::BeforeFinalize,
    ];
    (0..transfers)
        .map(|i| {
            let from = account(&mut rng, accounts);
            let mut to = account(&mut rng, accounts);
            while to == from {
                to = account(&mut rng, accounts);
            }
            let mut jump = || match rng.random_range(0..100) {
                0 => 130_000, // past fence retention: exercises pruning
                1..=8 => rng.random_range(200..1_500),
                _ => 0,
            };
            let jump_before_prepare = [jump(), jump()];
            Plan {
                key: format!("bank-{seed}-{i}"),
                from,
                to,
                // Some transfers are larger than any balance can be after a few moves: they abort.
                amount: if rng.random_bool(0.1) {
                    rng.random_range(1_500..5_000)
                } else {
                    rng.random_range(1..400)
                },
                crash: rng
                    .random_bool(0.3)
                    .then(|| points[rng.random_range(0..points.len())]),
                duplicate_completion: rng.random_bool(0.2),
                late_prepare: rng.random_bool(0.2),
                jump_before_prepare,
            }
        })
        .collect()
}

fn body(p: &Plan) -> Value {
    json!({"timeoutMs": TIMEOUT_MS, "participants": [
        {"participant": p.from.0, "key": {"id": p.from.1}, "op": {"add": {"balance": -p.amount}, "require": {"balance": {"gte": p.amount}}}},
        {"participant": p.to.0, "key": {"id": p.to.1}, "op": {"add": {"balance": p.amount}}}
    ]})
}

#[derive(Default)]
struct Counters {
    faults_fired: AtomicUsize,
    duplicates_delivered: AtomicUsize,
    late_prepares: AtomicUsize,
    late_prepares_refused: AtomicUsize,
    clock_jumps: AtomicUsize,
}

/// The direct transport, with the plan's misbehaviour on top.
struct Chaos {
    inner: TestTransport,
    clock: ManualClock,
    plan: Plan,
    counters: Arc<Counters>,
    stash: Arc<Mutex<Vec<(Target, PrepareRequest)>>>,
    prepares: AtomicUsize,
}

impl Transport for Chaos {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        let i = self.prepares.fetch_add(1, Ordering::SeqCst).min(1);
        let jump = self.plan.jump_before_prepare[i];
        if jump > 0 {
            self.clock.advance(jump);
            self.counters.clock_jumps.fetch_add(1, Ordering::Relaxed);
        }
        if self.plan.late_prepare {
            self.stash
                .lock()
                .expect("stash")
                .push((target.clone(), req.clone()));
        }
        self.inner.prepare(target, req).await
    }

    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        let first = self.inner.commit(target, req).await?;
        if self.plan.duplicate_completion {
            let again = self.inner.commit(target, req).await?;
            self.counters
                .duplicates_delivered
                .fetch_add(1, Ordering::Relaxed);
            assert!(again.acknowledged(), "duplicate commit: {again:?}");
        }
        Ok(first)
    }

    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        let first = self.inner.abort(target, req).await?;
        if self.plan.duplicate_completion {
            let again = self.inner.abort(target, req).await?;
            self.counters
                .duplicates_delivered
                .fetch_add(1, Ordering::Relaxed);
            assert!(again.acknowledged(), "duplicate abort: {again:?}");
        }
        Ok(first)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bank_invariants_hold_under_crashes_duplicates_delays_and_expiry() {
    let transfers = knob("TWOPC_BANK_TRANSFERS", 300);
    let concurrency = knob("TWOPC_BANK_CONCURRENCY", 16) as usize;
    let accounts = knob("TWOPC_BANK_ACCOUNTS", 6);
    let seed = knob("TWOPC_BANK_SEED", rand::rng().random());
    eprintln!(
        "bank: seed={seed} transfers={transfers} concurrency={concurrency} accounts/table={accounts}"
    );

    let w = World::new().await;
    for service in ["accounts", "wallets"] {
        for i in 0..accounts {
            w.seed(
                service,
                &format!("acct-{i}"),
                json!({"balance": INITIAL as i64}),
            )
            .await;
        }
    }
    let total_before = INITIAL * 2 * accounts as i128;
    let counters = Arc::new(Counters::default());
    let plans = plans(seed, transfers, accounts);

    // GIVEN concurrent transfers under chaos
    let outcomes: Vec<(Plan, Result<TxStatus, String>)> = futures::stream::iter(plans.clone())
        .map(|plan| {
            let (w, counters) = (&w, counters.clone());
            async move {
                let stash = Arc::new(Mutex::new(vec![]));
                let chaos = Chaos {
                    inner: w.direct(),
                    clock: w.clock.clone(),
                    plan: plan.clone(),
                    counters: counters.clone(),
                    stash: stash.clone(),
                    prepares: AtomicUsize::new(0),
                };
                let crash = Arc::new(CrashAt::new(plan.crash));
                let coordinator = w.coordinator_via(chaos).with_faults(crash.clone());
                let result = crash
                    .run(coordinator.submit(&body(&plan), Some(&plan.key)))
                    .await;
                counters
                    .faults_fired
                    .fetch_add(crash.fired(), Ordering::Relaxed);
                // Late copies of the prepares arrive after the coordinator returned (or died).
                let late: Vec<_> = std::mem::take(&mut *stash.lock().expect("stash"));
                for (target, req) in late {
                    counters.late_prepares.fetch_add(1, Ordering::Relaxed);
                    let reply = w
                        .direct()
                        .prepare(&target, &req)
                        .await
                        .expect("late prepare");
                    if !reply.vote.is_yes() {
                        counters
                            .late_prepares_refused
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
                let outcome = match result {
                    Ok(Ok(record)) => Ok(record.status),
                    Err(p) => Err(format!("crashed at {p}")),
                    Ok(Err(other)) => {
                        panic!("transfer {} failed unexpectedly: {other:?}", plan.key)
                    }
                };
                (plan, outcome)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;

    // WHEN the sweeper runs past every deadline (its first passes crash now and then)
    let mut passes = 0;
    loop {
        passes += 1;
        if passes > 30 {
            let stuck: Vec<_> = w
                .records()
                .await
                .into_iter()
                .filter(|r| !r.status.is_terminal())
                .collect();
            for r in &stuck {
                eprintln!(
                    "bank: stuck {} {} deadline={} attempts={}",
                    r.tx_id, r.status, r.deadline, r.attempts
                );
                for p in &r.participants {
                    let id = p.key["id"].as_str().unwrap_or_default();
                    let item = w
                        .item(
                            if p.participant == "accounts" {
                                "accounts"
                            } else {
                                "wallets"
                            },
                            id,
                        )
                        .await;
                    eprintln!(
                        "bank:   {}/{id}: lock={:?} fence_has_it={:?}",
                        p.participant,
                        item.as_ref()
                            .and_then(|i| i.lock.as_ref().map(|l| l.tx_id.clone())),
                        item.as_ref().map(|i| i.fence.get(&r.tx_id).copied())
                    );
                }
            }
            panic!(
                "the sweeper did not converge in 30 passes: {} transactions stuck",
                stuck.len()
            );
        }
        w.clock.advance(600_000);
        // The first passes' sweeper may die anywhere mid-pass (a Lambda killed while resolving).
        let flaky = passes <= 3;
        let crash = Arc::new(if flaky {
            CrashAt::randomly(seed ^ passes, 0.005)
        } else {
            CrashAt::new(None)
        });
        let sweeper = twopc_core::sweeper::Sweeper::new(
            w.coordinator_via(w.direct()).with_faults(crash.clone()),
            w.participant.clone(),
            w.clock.clone(),
            w.lock_tables(),
            SweepConfig::default(),
        );
        let pass = crash.run(sweeper.run()).await;
        counters
            .faults_fired
            .fetch_add(crash.fired(), Ordering::Relaxed);
        let Ok(report) = pass else {
            eprintln!("bank: sweep pass {passes} crashed");
            continue;
        };
        let report = report.expect("sweep");
        eprintln!("bank: sweep pass {passes}: {report:?}");
        if !flaky && report.found == 0 && report.expired_locks == 0 {
            break;
        }
    }

    // THEN every invariant holds
    let records = w.records().await;
    let by_id: BTreeMap<TxId, &twopc_core::record::TxRecord> =
        records.iter().map(|r| (r.tx_id.clone(), r)).collect();
    let non_terminal: Vec<_> = records
        .iter()
        .filter(|r| !r.status.is_terminal())
        .map(|r| (&r.tx_id, r.status))
        .collect();
    assert!(
        non_terminal.is_empty(),
        "records not terminal: {non_terminal:?}"
    );

    let mut expected: BTreeMap<(String, String), i128> = BTreeMap::new();
    let mut commits_per_item: BTreeMap<(String, String), i128> = BTreeMap::new();
    let (mut committed, mut aborted, mut crashed) = (0, 0, 0);
    for (plan, outcome) in &outcomes {
        let record = by_id
            .get(&TxId::for_idempotency_key(&plan.key))
            .unwrap_or_else(|| panic!("no record for {}", plan.key));
        match outcome {
            Ok(status) if status.is_terminal() => assert_eq!(
                *status, record.status,
                "{}: answered {status}, recorded {}",
                plan.key, record.status
            ),
            Ok(status) => assert_eq!(
                status.decision(),
                record.status.decision(),
                "{}: answered {status}, recorded {}",
                plan.key,
                record.status
            ),
            Err(_) => crashed += 1,
        }
        if record.status == TxStatus::Committed {
            committed += 1;
            *expected
                .entry((plan.from.0.to_owned(), plan.from.1.clone()))
                .or_default() -= plan.amount as i128;
            *expected
                .entry((plan.to.0.to_owned(), plan.to.1.clone()))
                .or_default() += plan.amount as i128;
            for side in [&plan.from, &plan.to] {
                *commits_per_item
                    .entry((side.0.to_owned(), side.1.clone()))
                    .or_default() += 1;
            }
        } else {
            aborted += 1;
        }
    }

    let mut total_after = 0i128;
    for service in ["accounts", "wallets"] {
        for item in w.scan(service).await {
            let id = item.attributes["id"].as_str().expect("id").to_owned();
            assert!(
                item.lock.is_none(),
                "{service}/{id} still locked by {:?}",
                item.lock.map(|l| l.tx_id)
            );
            assert!(
                item.reservations.is_empty() && item.escrow.is_empty(),
                "{service}/{id} still reserved by {:?}",
                item.reservations.keys().collect::<Vec<_>>()
            );
            assert!(
                !item.placeholder,
                "{service}/{id} is a leftover placeholder"
            );
            let balance: i128 = item.attributes["balance"]
                .to_string()
                .parse()
                .expect("integral balance");
            assert!(balance >= 0, "{service}/{id} went negative: {balance}");
            let k = (service.to_owned(), id.clone());
            assert_eq!(
                balance,
                INITIAL + expected.get(&k).copied().unwrap_or(0),
                "{service}/{id}: balance does not match the committed ledger"
            );
            let version: i128 = item
                .attributes
                .get(twopc_core::layout::VERSION)
                .map_or(0, |v| v.to_string().parse().expect("version"));
            assert_eq!(
                version,
                commits_per_item.get(&k).copied().unwrap_or(0),
                "{service}/{id}: commits applied != committed transactions"
            );
            total_after += balance;
        }
    }
    assert_eq!(total_after, total_before, "money was created or destroyed");

    eprintln!(
        "bank: {transfers} transfers: {committed} committed, {aborted} aborted, {crashed} coordinators crashed; \
         faults fired {}, duplicate completions {}, late prepares {} ({} refused), clock jumps {}, sweeper passes {passes}; violations 0",
        counters.faults_fired.load(Ordering::Relaxed),
        counters.duplicates_delivered.load(Ordering::Relaxed),
        counters.late_prepares.load(Ordering::Relaxed),
        counters.late_prepares_refused.load(Ordering::Relaxed),
        counters.clock_jumps.load(Ordering::Relaxed),
    );
    assert!(
        committed > 0 && aborted > 0 && crashed > 0,
        "the run must exercise commits, aborts and crashes"
    );
}
