//! The bank test: many concurrent transfers between accounts on two participant tables, through
//! the real coordinator on DynamoDB Local, while coordinators crash at named fault points,
//! participant messages are duplicated and delivered late, and leases expire mid-flight. Then
//! the sweeper runs past every deadline, and every invariant of docs/protocol.md is checked against a
//! ledger built from the transaction records.
//!
//! Two runs: transfers among 6 accounts on each of two tables, and a hot one among three
//! accounts of one table, with small balances so that many transfers are unaffordable and
//! every transfer's reservations stand beside others'.
//!
//! Knobs (environment): `TWOPC_BANK_TRANSFERS` (default 300), `TWOPC_BANK_CONCURRENCY` (16),
//! `TWOPC_BANK_ACCOUNTS` per table (6; the hot run keeps 3), `TWOPC_BANK_SEED` (random;
//! printed, replays the same plan).

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
use twopc_core::op::Mode;
use twopc_core::ports::{ManualClock, Transport, TransportError};
use twopc_core::record::{Target, Vote, VoteReason};
use twopc_core::status::TxStatus;
use twopc_core::sweeper::SweepConfig;
use twopc_tests::{CrashAt, TestTransport, World};

const TIMEOUT_MS: u64 = 1_000;

/// The accounts of one run and the transfers planned between them.
#[derive(Clone, Copy, Debug)]
struct Bank {
    /// The tables the accounts are spread over.
    services: &'static [&'static str],
    /// Accounts per table.
    accounts: u64,
    /// Each account's balance before the run.
    initial: i64,
    /// Most transfers move 1 to this much (exclusive)...
    usual_max: i64,
    /// ...and a tenth move an amount in this range, more than any balance can be after a few
    /// moves: they abort.
    large: (i64, i64),
}

impl Bank {
    /// 6 accounts on each of two tables (`TWOPC_BANK_ACCOUNTS`), 1,000 each.
    fn spread() -> Bank {
        Bank {
            services: &["accounts", "wallets"],
            accounts: knob("TWOPC_BANK_ACCOUNTS", 6),
            initial: 1_000,
            usual_max: 400,
            large: (1_500, 5_000),
        }
    }

    /// Three accounts of one table, 100 each: every transfer contends with most others.
    fn hot() -> Bank {
        Bank {
            services: &["accounts"],
            accounts: 3,
            initial: 100,
            usual_max: 60,
            large: (150, 400),
        }
    }
}

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

fn account(rng: &mut StdRng, bank: Bank) -> (&'static str, String) {
    let service = bank.services[rng.random_range(0..bank.services.len())];
    (
        service,
        format!("acct-{}", rng.random_range(0..bank.accounts)),
    )
}

fn plans(seed: u64, transfers: u64, bank: Bank) -> Vec<Plan> {
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
            let from = account(&mut rng, bank);
            let mut to = account(&mut rng, bank);
            while to == from {
                to = account(&mut rng, bank);
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
                    rng.random_range(bank.large.0..bank.large.1)
                } else {
                    rng.random_range(1..bank.usual_max)
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

/// What a run saw, besides the invariants it checked.
#[derive(Debug, Default)]
struct Seen {
    committed: usize,
    aborted: usize,
    crashed: usize,
    /// Yes votes, by how the participant held the item.
    reserved: usize,
    locked: usize,
    /// No votes for insufficient funds (`condition`) and for contention (`conflict`).
    condition: usize,
    conflict: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bank_invariants_hold_under_crashes_duplicates_delays_and_expiry() {
    let seen = run(Bank::spread()).await;
    assert!(
        seen.committed > 0 && seen.aborted > 0 && seen.crashed > 0,
        "the run must exercise commits, aborts and crashes: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_bank_keeps_every_bound_with_all_transfers_among_three_accounts() {
    // The same chaos, every transfer on three accounts with 100 each: debits reserve side by
    // side (add-only, bounded by `gte`), many do not fit, and no balance may go negative.
    let seen = run(Bank::hot()).await;
    assert!(
        seen.committed > 0 && seen.crashed > 0 && seen.condition > 0,
        "the run must exercise commits, crashes and insufficient funds: {seen:?}"
    );
    assert!(
        seen.reserved > 0 && seen.locked == 0,
        "add-only transfers reserve, never lock: {seen:?}"
    );
}

/// Runs the bank's transfers under chaos, then the sweeper, and checks every invariant.
async fn run(bank: Bank) -> Seen {
    let transfers = knob("TWOPC_BANK_TRANSFERS", 300);
    let concurrency = knob("TWOPC_BANK_CONCURRENCY", 16) as usize;
    let seed = knob("TWOPC_BANK_SEED", rand::rng().random());
    eprintln!("bank: seed={seed} transfers={transfers} concurrency={concurrency} {bank:?}");

    let w = World::new().await;
    for service in bank.services {
        for i in 0..bank.accounts {
            w.seed(
                service,
                &format!("acct-{i}"),
                json!({"balance": bank.initial}),
            )
            .await;
        }
    }
    let initial = i128::from(bank.initial);
    let total_before = initial * bank.services.len() as i128 * i128::from(bank.accounts);
    let counters = Arc::new(Counters::default());
    let plans = plans(seed, transfers, bank);

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
    let mut seen = Seen::default();
    for (plan, outcome) in &outcomes {
        let record = by_id
            .get(&TxId::for_idempotency_key(&plan.key))
            .unwrap_or_else(|| panic!("no record for {}", plan.key));
        for vote in &record.votes {
            match vote {
                Vote::Yes {
                    mode: Mode::Reserved,
                } => seen.reserved += 1,
                Vote::Yes {
                    mode: Mode::Exclusive,
                } => seen.locked += 1,
                Vote::No {
                    reason: VoteReason::Condition,
                    ..
                } => seen.condition += 1,
                Vote::No {
                    reason: VoteReason::Conflict,
                    ..
                } => seen.conflict += 1,
                Vote::No { .. } => {}
            }
        }
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
            Err(_) => seen.crashed += 1,
        }
        if record.status == TxStatus::Committed {
            seen.committed += 1;
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
            seen.aborted += 1;
        }
    }

    let mut total_after = 0i128;
    for &service in bank.services {
        for item in w.scan(service).await {
            let id = item.attributes["id"].as_str().expect("id").to_owned();
            assert!(
                item.lock.is_none(),
                "{service}/{id} still locked by {:?}",
                item.lock.map(|l| l.tx_id)
            );
            assert!(
                item.reservations.is_empty(),
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
            // What the reservations escrowed is all given back or applied: idle, at the value.
            let value = twopc_core::decimal::Decimal::parse(&balance.to_string()).expect("n");
            for (attr, escrow) in &item.escrow {
                assert!(
                    escrow.count == 0 && escrow.floors == 0 && !escrow.is_stale(&value),
                    "{service}/{id}: escrow of {attr} not idle at the value: {escrow:?}"
                );
            }
            let k = (service.to_owned(), id.clone());
            assert_eq!(
                balance,
                initial + expected.get(&k).copied().unwrap_or(0),
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
        "bank: {transfers} transfers: {seen:?}; faults fired {}, duplicate completions {}, late prepares {} ({} refused), clock jumps {}, sweeper passes {passes}; violations 0",
        counters.faults_fired.load(Ordering::Relaxed),
        counters.duplicates_delivered.load(Ordering::Relaxed),
        counters.late_prepares.load(Ordering::Relaxed),
        counters.late_prepares_refused.load(Ordering::Relaxed),
        counters.clock_jumps.load(Ordering::Relaxed),
    );
    seen
}
