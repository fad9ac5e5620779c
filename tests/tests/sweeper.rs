//! The sweeper against DynamoDB Local: it finds overdue transactions through the sparse index,
//! drives each to its end from the record alone, clears orphan locks, and backs off what it
//! cannot finish.

use serde_json::json;
use twopc_core::fault::FaultPoint;
use twopc_core::ids::TxId;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::ports::{Clock, Transport, TransportError, TxLog};
use twopc_core::record::Target;
use twopc_core::status::TxStatus;
use twopc_core::sweeper::SweepConfig;
use twopc_tests::{CrashAt, SubmitToEnd, World, transfer};

async fn bank(w: &World) {
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
}

/// Runs a transfer whose coordinator dies at `point`; returns its id.
async fn crashed_transfer(w: &World, point: FaultPoint) -> TxId {
    let key = format!("crash-{}", TxId::random());
    let crash = std::sync::Arc::new(CrashAt::new(point));
    let c = w.coordinator_via(w.direct()).with_faults(crash.clone());
    let stopped = crash
        .run(c.submit_to_end(&transfer("alice", "bob", 10), Some(&key)))
        .await
        .expect_err("must crash");
    assert_eq!(stopped, point);
    TxId::for_idempotency_key(&key)
}

async fn status(w: &World, tx: &TxId) -> TxStatus {
    w.log.get(tx).await.expect("get").expect("record").status
}

#[tokio::test]
async fn sweeper_leaves_transactions_alone_before_their_deadline() {
    let w = World::new().await;
    bank(&w).await;
    let tx = crashed_transfer(&w, FaultPoint::AfterPrepare(1)).await;
    let report = w.sweeper().run().await.expect("sweep");
    assert_eq!(report.found, 0);
    assert_eq!(report.oldest_overdue_ms, Some(0), "pending, not overdue");
    assert_eq!(status(&w, &tx).await, TxStatus::Preparing);
}

#[tokio::test]
async fn sweeper_aborts_an_undecided_transaction_past_its_deadline_everywhere() {
    let w = World::new().await;
    bank(&w).await;
    let tx = crashed_transfer(&w, FaultPoint::BeforeDecide).await;
    w.clock.advance(6_000);
    let report = w.sweeper().run().await.expect("sweep");
    assert_eq!(
        (report.found, report.aborted, report.failed),
        (1, 1, 0),
        "{report:?}"
    );
    assert_eq!(status(&w, &tx).await, TxStatus::Aborted);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("0")
    );
    assert!(
        w.scan("accounts")
            .await
            .iter()
            .chain(w.scan("wallets").await.iter())
            .all(|i| i.lock.is_none())
    );
}

#[tokio::test]
async fn sweeper_rolls_a_decided_commit_forward() {
    let w = World::new().await;
    bank(&w).await;
    let tx = crashed_transfer(&w, FaultPoint::AfterComplete(0)).await;
    assert_eq!(status(&w, &tx).await, TxStatus::Committing);
    w.clock.advance(6_000);
    let report = w.sweeper().run().await.expect("sweep");
    assert_eq!((report.found, report.rolled_forward), (1, 1), "{report:?}");
    assert_eq!(status(&w, &tx).await, TxStatus::Committed);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("10")
    );
}

#[tokio::test]
async fn sweeper_finishes_a_decided_abort() {
    let w = World::new().await;
    bank(&w).await;
    let key = "crash-abort";
    let crash = std::sync::Arc::new(CrashAt::new(FaultPoint::AfterDecide));
    let c = w.coordinator_via(w.direct()).with_faults(crash.clone());
    crash
        .run(c.submit_to_end(&transfer("alice", "bob", 1_000), Some(key)))
        .await
        .expect_err("crash");
    let tx = TxId::for_idempotency_key(key);
    assert_eq!(status(&w, &tx).await, TxStatus::Aborting);
    w.clock.advance(6_000);
    let report = w.sweeper().run().await.expect("sweep");
    assert_eq!((report.found, report.aborted), (1, 1), "{report:?}");
    assert_eq!(status(&w, &tx).await, TxStatus::Aborted);
    assert!(w.item("wallets", "bob").await.expect("bob").lock.is_none());
}

#[tokio::test]
async fn sweeper_clears_an_orphan_lock_left_by_a_late_prepare() {
    let w = World::new().await;
    bank(&w).await;
    // A creating prepare that lands after its transaction aborted on an item that did not exist
    // (its abort found nothing to fence): it leaves an orphan placeholder the sweeper must clear.
    let tx = TxId::random();
    let now = w.clock.now_ms();
    w.log.create_aborted(&tx, now, now).await.expect("record");
    let op =
        twopc_core::op::Operation::from_json("op", &json!({"put": {"balance": 1}})).expect("op");
    let req = PrepareRequest {
        tx_id: tx.clone(),
        deadline: now + 1_000,
        began: now,
        key: twopc_tests::key("zed"),
        op,
        coordinator: "late".into(),
        payload: None,
        hot_until: None,
    };
    assert!(w.prepare("wallets", &req).await.vote.is_yes());
    w.clock.advance(1_001);
    let report = w.sweeper().run().await.expect("sweep");
    assert_eq!(
        (report.expired_locks, report.locks_resolved),
        (1, 1),
        "{report:?}"
    );
    let zed = w.item("wallets", "zed").await;
    assert!(
        zed.as_ref().is_none_or(|z| z.tombstone && z.lock.is_none()),
        "the orphan placeholder must be gone: {zed:?}"
    );
}

/// A transport to participants that never answer.
struct Unreachable;

impl Transport for Unreachable {
    async fn prepare(
        &self,
        _: &Target,
        _: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        Err(down())
    }
    async fn commit(
        &self,
        _: &Target,
        _: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        Err(down())
    }
    async fn abort(
        &self,
        _: &Target,
        _: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        Err(down())
    }
    async fn inquire(
        &self,
        _: &Target,
        _: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        Err(down())
    }
}

fn down() -> TransportError {
    TransportError {
        target: "test".into(),
        message: "participant down".into(),
        undetermined: false,
        source: None,
    }
}

#[tokio::test]
async fn sweeper_backs_off_a_transaction_it_cannot_finish() {
    let w = World::new().await;
    bank(&w).await;
    let tx = crashed_transfer(&w, FaultPoint::AfterDecide).await;
    w.clock.advance(6_000);
    let config = SweepConfig {
        backoff_base_ms: 10_000,
        ..SweepConfig::default()
    };
    let sweeper = w.sweeper_via(Unreachable, config);
    let report = sweeper.run().await.expect("sweep");
    assert_eq!((report.found, report.failed), (1, 1), "{report:?}");
    assert_eq!(report.failed_tx_ids, vec![tx.clone()]);
    let record = w.log.get(&tx).await.expect("get").expect("record");
    assert_eq!((record.status, record.attempts), (TxStatus::Committing, 1));
    let overdue = w.clock.now_ms() - record.deadline;
    assert_eq!(
        report.oldest_overdue_ms,
        Some(overdue),
        "what is stuck, and since when"
    );
    // Within the backoff it is not picked up again, yet still reported stuck; after it, it is
    // picked up — and twice the delay next.
    let backing_off = sweeper.run().await.expect("sweep");
    assert_eq!(backing_off.found, 0);
    assert_eq!(backing_off.oldest_overdue_ms, Some(overdue));
    w.clock.advance(10_001);
    assert_eq!(sweeper.run().await.expect("sweep").failed, 1);
    let record = w.log.get(&tx).await.expect("get").expect("record");
    assert_eq!(record.attempts, 2);
    assert_eq!(record.retry_after, Some(w.clock.now_ms() + 20_000));
    // Once the participants are back, the normal sweeper finishes it.
    w.clock.advance(20_001);
    let report = w.sweeper().run().await.expect("sweep");
    assert_eq!(report.rolled_forward, 1, "{report:?}");
    assert_eq!(report.oldest_overdue_ms, Some(0), "nothing left pending");
    assert_eq!(status(&w, &tx).await, TxStatus::Committed);
}
