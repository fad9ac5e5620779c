//! The default mode finds hot items itself (`rules::heat`, `docs/protocol.md`, "Which path"), on
//! DynamoDB Local: a native attempt that gives way on a contended item has its staged prepare
//! mark the item, and every other item of the transaction; every coordinator, sharing nothing with the one that saw it, learns the mark
//! from the item and routes around it until it ends; only new contention renews it. And a staged
//! transaction whose record was never written is ended by the stack itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use twopc_core::coordinator::{Answered, CommitMode, CoordinatorConfig, Outcome, SubmitError};
use twopc_core::ids::TxId;
use twopc_core::message::PrepareRequest;
use twopc_core::ports::{
    Clock, Created, NativeFuture, NativeStore, NativeWrite, PortError, Swapped, TxLog,
};
use twopc_core::record::{TxRecord, Vote};
use twopc_core::status::TxStatus;
use twopc_dynamo::{DynamoNative, DynamoTxLog};
use twopc_tests::{TestCoordinator, World, prepare_req, transfer};

const WINDOW: u64 = CoordinatorConfig::DEFAULT_HEAT_WINDOW_MS;

async fn bank(w: &World) {
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("accounts", "carol", json!({"balance": 0})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
}

/// A native store that counts the attempts made through it.
#[derive(Clone)]
struct Counted {
    inner: DynamoNative,
    attempts: Arc<AtomicUsize>,
}

impl NativeStore for Counted {
    fn commit_at_once<'a>(
        &'a self,
        record: &'a TxRecord,
        writes: &'a [NativeWrite<'a>],
    ) -> NativeFuture<'a> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        self.inner.commit_at_once(record, writes)
    }
}

/// A native store whose every attempt is cancelled for throttling (the partition's rate), as
/// DynamoDB cancels a `TransactWriteItems` and its SDK does not resend.
struct Throttled {
    attempts: Arc<AtomicUsize>,
}

impl NativeStore for Throttled {
    fn commit_at_once<'a>(
        &'a self,
        record: &'a TxRecord,
        _writes: &'a [NativeWrite<'a>],
    ) -> NativeFuture<'a> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let context = format!("committing {} natively", record.tx_id);
        Box::pin(async move {
            Err(PortError::Retryable {
                context,
                source: "ThrottlingError: Throughput exceeds the current capacity".into(),
            })
        })
    }
}

/// A coordinator of its own in the default mode (a Lambda instance: it shares no memory with
/// any other), and the count of its native attempts.
fn coordinator(w: &World) -> (TestCoordinator, Arc<AtomicUsize>) {
    let attempts = Arc::new(AtomicUsize::new(0));
    let native = Counted {
        inner: DynamoNative::new(w.client.clone(), w.log.clone()),
        attempts: attempts.clone(),
    };
    (auto_coordinator(w, Arc::new(native)), attempts)
}

/// A coordinator of its own in the default mode, committing natively through `native`.
fn auto_coordinator(w: &World, native: Arc<dyn NativeStore>) -> TestCoordinator {
    let mut config = w.coordinator.config().clone();
    config.mode = CommitMode::Auto;
    twopc_core::coordinator::Coordinator::new(w.log.clone(), w.direct(), w.clock.clone(), config)
        .with_native(native)
}

/// Runs `answered`'s work after the answer, if any; whether the transaction went native.
async fn finished(c: &TestCoordinator, answered: Answered) -> bool {
    assert_eq!(answered.answer.outcome, Outcome::Committed);
    match answered.finish {
        Some(finish) => {
            c.finish(finish).await.expect("finish");
            false
        }
        None => answered.answer.record.status == TxStatus::Committed,
    }
}

/// Another transaction's live reservation of a debit on alice: the protocol holds her.
async fn reserve_alice(w: &World) -> PrepareRequest {
    let req = PrepareRequest {
        part: None,
        began: w.clock.now_ms(),
        ..prepare_req(
            &TxId::random(),
            w.clock.now_ms() + 60_000,
            "alice",
            json!({"add": {"balance": -1}, "require": {"balance": {"gte": 1}}}),
        )
    };
    let reply = w
        .participant
        .prepare(&w.accounts, &req)
        .await
        .expect("reserve");
    assert!(reply.vote.is_yes());
    req
}

#[tokio::test]
async fn a_contended_item_is_marked_and_every_coordinator_routes_around_it_until_it_cools() {
    let w = World::new().await;
    bank(&w).await;
    // GIVEN the protocol holding alice (another transaction's reservation)
    let other = reserve_alice(&w).await;
    // WHEN a coordinator's native transfer from alice meets it
    let (first, first_attempts) = coordinator(&w);
    let seen_at = w.clock.now_ms();
    let answered = first
        .submit(&transfer("alice", "bob", 10), None)
        .await
        .expect("submit");
    // THEN it reserves beside it, staged, and its prepare marked alice hot; bob, where such
    // transfers go next, it remembers without marking: a first sighting (`rules::heats`)
    assert_eq!(answered.answer.record.status, TxStatus::Staging);
    assert!(!finished(&first, answered).await);
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(alice.hot_until, seen_at + WINDOW);
    let bob = w.item("wallets", "bob").await.expect("bob");
    assert_eq!(bob.hot_until, 0, "nothing written on bob");
    w.seed("accounts", "dave", json!({"balance": 5})).await;
    let answered = first
        .submit(&transfer("dave", "bob", 1), None)
        .await
        .expect("submit");
    assert!(!finished(&first, answered).await, "staged: bob remembered");
    assert_eq!(first_attempts.load(Ordering::SeqCst), 1, "one attempt");
    // AND once the other transaction ended there,
    w.participant
        .abort(&w.accounts, &abort_of(&other))
        .await
        .expect("abort");
    // a coordinator that shares nothing with the first learns the mark from the item: its
    // one native attempt is refused there, and it stages without trying again
    let (second, attempts) = coordinator(&w);
    for to in ["carol", "carol"] {
        let answered = second
            .submit(&transfer_within("alice", to, 1), None)
            .await
            .expect("submit");
        assert!(!finished(&second, answered).await, "staged while hot");
    }
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "one refused attempt");
    // AND it learned carol with alice (the refused attempt named both): a transfer from carol
    // stages without an attempt of its own
    let answered = second
        .submit(&transfer("carol", "bob", 1), None)
        .await
        .expect("submit");
    assert!(!finished(&second, answered).await, "staged: carol learned");
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "still one attempt");
    // AND nothing new was contended: the mark is not renewed
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(alice.hot_until, seen_at + WINDOW);
    // AND once it ends, alice goes back to one native write
    w.clock.advance(WINDOW);
    let answered = second
        .submit(&transfer_within("alice", "carol", 1), None)
        .await
        .expect("submit");
    assert!(finished(&second, answered).await, "native once cool");
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("87")
    );
    assert_eq!(
        w.attr("accounts", "carol", "balance").await.as_deref(),
        Some("2")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("12")
    );
}

/// A transfer between two accounts of the `accounts` table.
fn transfer_within(from: &str, to: &str, amount: i64) -> serde_json::Value {
    json!({"participants": [
        {"participant": "accounts", "key": {"id": from},
         "op": {"add": {"balance": -amount}, "require": {"balance": {"gte": amount}}}},
        {"participant": "accounts", "key": {"id": to}, "op": {"add": {"balance": amount}}}
    ]})
}

fn abort_of(p: &PrepareRequest) -> twopc_core::message::CompleteRequest {
    twopc_core::message::CompleteRequest {
        tx_id: p.tx_id.clone(),
        deadline: p.deadline,
        began: p.began,
        key: p.key.clone(),
        op: p.op.clone(),
        prune: None,
        refused: false,
    }
}

/// The transaction log, with the puts of `STAGING` records refused as a throttled store
/// refuses them (nothing written) while `refuse` says so, and every other put too while
/// `refuse_all` does.
#[derive(Clone)]
struct RefusingPuts {
    inner: DynamoTxLog,
    refuse_all: Arc<std::sync::atomic::AtomicBool>,
}

fn refused(record: &TxRecord) -> PortError {
    PortError::Retryable {
        context: format!("writing transaction {}", record.tx_id),
        source: "ThrottlingException: the test refuses it".into(),
    }
}

impl TxLog for RefusingPuts {
    async fn create(&self, record: &TxRecord) -> Result<Created, PortError> {
        if record.status == TxStatus::Staging || self.refuse_all.load(Ordering::SeqCst) {
            return Err(refused(record));
        }
        self.inner.create(record).await
    }

    async fn get(&self, tx: &TxId) -> Result<Option<TxRecord>, PortError> {
        self.inner.get(tx).await
    }

    async fn transition(
        &self,
        record: &TxRecord,
        to: TxStatus,
        votes: Option<&[Vote]>,
        now: u64,
    ) -> Result<Swapped, PortError> {
        self.inner.transition(record, to, votes, now).await
    }

    async fn create_aborted(&self, tx: &TxId, began: u64, now: u64) -> Result<Created, PortError> {
        self.inner.create_aborted(tx, began, now).await
    }

    async fn overdue(&self, now: u64, limit: usize) -> Result<Vec<TxRecord>, PortError> {
        self.inner.overdue(now, limit).await
    }

    async fn oldest_pending_deadline(&self) -> Result<Option<u64>, PortError> {
        self.inner.oldest_pending_deadline().await
    }

    async fn note_failed_attempt(
        &self,
        tx: &TxId,
        retry_after: u64,
        now: u64,
    ) -> Result<(), PortError> {
        self.inner.note_failed_attempt(tx, retry_after, now).await
    }

    async fn ask_recovery(&self, tx: &TxId, now: u64) -> Result<bool, PortError> {
        self.inner.ask_recovery(tx, now).await
    }
}

/// A staged coordinator (parallel: no idempotency key) over a log refusing its puts.
fn refusing(
    w: &World,
) -> (
    twopc_core::coordinator::Coordinator<
        RefusingPuts,
        twopc_tests::TestTransport,
        twopc_core::ports::ManualClock,
    >,
    Arc<std::sync::atomic::AtomicBool>,
) {
    let refuse_all = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let log = RefusingPuts {
        inner: w.log.clone(),
        refuse_all: refuse_all.clone(),
    };
    let mut config = w.coordinator.config().clone();
    config.mode = CommitMode::Staged;
    let c = twopc_core::coordinator::Coordinator::new(log, w.direct(), w.clock.clone(), config);
    (c, refuse_all)
}

/// Whether any item of the bank holds anything (a lock or a reservation).
async fn anything_held(w: &World) -> bool {
    let mut held = false;
    for service in ["accounts", "wallets"] {
        for item in w.scan(service).await {
            held |= item.lock.is_some() || !item.reservations.is_empty();
        }
    }
    held
}

#[tokio::test]
async fn a_staged_transaction_whose_record_put_failed_is_ended_by_its_coordinator() {
    let w = World::new().await;
    bank(&w).await;
    let (c, _) = refusing(&w);
    // WHEN the record's put is refused while the prepares went out with it
    let e = c
        .submit(&transfer("alice", "bob", 10), None)
        .await
        .expect_err("the put failed");
    let SubmitError::Unavailable {
        tx_id: Some(tx), ..
    } = e
    else {
        panic!("{e:?}")
    };
    // THEN the coordinator recorded the abort itself and released what its prepares held
    let record = w.log.get(&tx).await.expect("get").expect("a record");
    assert_eq!(record.status, TxStatus::Aborted);
    assert!(!anything_held(&w).await);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
}

#[tokio::test]
async fn holds_of_a_staged_transaction_that_could_record_nothing_are_ended_by_the_sweeper() {
    let w = World::new().await;
    bank(&w).await;
    let (c, refuse_all) = refusing(&w);
    // GIVEN a store refusing every record put: the prepares hold items of no record
    refuse_all.store(true, Ordering::SeqCst);
    let e = c
        .submit(&transfer("alice", "bob", 10), None)
        .await
        .expect_err("the put failed");
    assert!(matches!(e, SubmitError::Unavailable { .. }), "{e:?}");
    assert!(anything_held(&w).await, "held, with no record");
    assert!(w.records().await.is_empty());
    // WHEN the sweeper runs past their deadline (production's schedule)
    w.clock
        .advance(twopc_core::request::Limits::default().default_timeout_ms + 1);
    let report = w.sweeper().run().await.expect("sweep");
    eprintln!("{report:?}");
    // THEN it resolved them by the lock rule: recorded ABORTED, nothing held, nothing applied
    assert!(!anything_held(&w).await);
    let records = w.records().await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].status, TxStatus::Aborted);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("0")
    );
}

#[tokio::test]
async fn a_native_attempt_cancelled_for_throttling_takes_the_protocols_path_and_commits() {
    let w = World::new().await;
    bank(&w).await;
    let attempts = Arc::new(AtomicUsize::new(0));
    let c = auto_coordinator(
        &w,
        Arc::new(Throttled {
            attempts: attempts.clone(),
        }),
    );
    // WHEN its one native attempt is cancelled for throttling (nothing written)
    let answered = c
        .submit(&transfer("alice", "bob", 10), None)
        .await
        .expect("not unavailable: nothing stood in the way");
    // THEN the protocol's path committed it, and nothing was learned of heat
    assert!(!finished(&c, answered).await, "staged");
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("10")
    );
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(alice.hot_until, 0, "throttling is no contention");
    assert!(!anything_held(&w).await);
}
