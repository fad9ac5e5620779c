//! The staged commit on DynamoDB Local: the record written STAGING with the prepares, the answer
//! after one round, the finish after the answer; recovery of an abandoned STAGING record by the
//! sweeper (inquire, prevent) and by a replay (help); nothing applied twice or lost.

use serde_json::json;
use twopc_core::coordinator::{CommitMode, Outcome};
use twopc_core::fault::FaultPoint;
use twopc_core::ids::TxId;
use twopc_core::item::FenceOutcome;
use twopc_core::ports::{Clock, TxLog};
use twopc_core::record::VoteReason;
use twopc_core::status::TxStatus;
use twopc_tests::{CrashAt, SubmitToEnd, World, prepare_req, transfer};

async fn bank(w: &World) {
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
}

async fn status(w: &World, tx: &TxId) -> TxStatus {
    w.log.get(tx).await.expect("get").expect("record").status
}

async fn balances(w: &World) -> (String, String) {
    (
        w.attr("accounts", "alice", "balance").await.expect("alice"),
        w.attr("wallets", "bob", "balance").await.expect("bob"),
    )
}

async fn unlocked(w: &World) -> bool {
    let a = w.item("accounts", "alice").await.expect("alice");
    let b = w.item("wallets", "bob").await.expect("bob");
    a.lock.is_none() && a.reservations.is_empty() && b.lock.is_none() && b.reservations.is_empty()
}

/// A staged commit of 10 from alice to bob, keyed `key`, answered "committed" by a coordinator
/// that dies right after the answer (before finishing it); its transaction.
async fn answered_then_crashed(w: &World, key: &str) -> TxId {
    let crash = std::sync::Arc::new(CrashAt::new(FaultPoint::AfterAnswer));
    let dead = w
        .coordinator_in(CommitMode::Staged)
        .with_faults(crash.clone());
    let stopped = crash
        .run(dead.submit_to_end(&transfer("alice", "bob", 10), Some(key)))
        .await
        .expect_err("must crash");
    assert_eq!(stopped, FaultPoint::AfterAnswer);
    TxId::for_idempotency_key(key)
}

#[tokio::test]
async fn a_staged_commit_is_answered_before_it_is_applied_and_finished_after() {
    let w = World::new().await;
    bank(&w).await;
    let c = w.coordinator_in(CommitMode::Staged);
    let staged = c
        .submit(&transfer("alice", "bob", 10), None)
        .await
        .expect("stage");
    assert_eq!(staged.answer.outcome, Outcome::Committed);
    assert!(!staged.answer.applied());
    let tx = staged.answer.record.tx_id.clone();
    // Answered from the implicit state: the record is still STAGING, the holds stand, nothing
    // is applied yet.
    assert_eq!(status(&w, &tx).await, TxStatus::Staging);
    assert_eq!(balances(&w).await, ("100".into(), "0".into()));
    assert!(!unlocked(&w).await);
    let done = c
        .finish(staged.finish.expect("work after the answer"))
        .await
        .expect("finish");
    assert_eq!(done.status, TxStatus::Committed);
    assert_eq!(balances(&w).await, ("90".into(), "10".into()));
    assert!(unlocked(&w).await);
}

#[tokio::test]
async fn a_staged_abort_is_answered_once_its_decision_is_recorded() {
    let w = World::new().await;
    bank(&w).await;
    let c = w.coordinator_in(CommitMode::Staged);
    let staged = c
        .submit(&transfer("alice", "bob", 1000), None)
        .await
        .expect("stage");
    assert_eq!(staged.answer.outcome, Outcome::Aborted);
    let tx = staged.answer.record.tx_id.clone();
    assert_eq!(status(&w, &tx).await, TxStatus::Aborting);
    let done = c
        .finish(staged.finish.expect("finish"))
        .await
        .expect("finish");
    assert_eq!(done.status, TxStatus::Aborted);
    assert_eq!(balances(&w).await, ("100".into(), "0".into()));
    assert!(unlocked(&w).await);
}

#[tokio::test]
async fn a_keyed_staged_transaction_writes_its_record_first_and_its_replay_answers_the_same() {
    let w = World::new().await;
    bank(&w).await;
    let c = w.coordinator_in(CommitMode::Staged);
    let body = transfer("alice", "bob", 10);
    let first = c
        .submit_to_end(&body, Some("staged-key"))
        .await
        .expect("submit");
    assert_eq!(first.status, TxStatus::Committed);
    let again = c
        .submit_to_end(&body, Some("staged-key"))
        .await
        .expect("replay");
    assert_eq!(
        (again.tx_id, again.status),
        (first.tx_id, TxStatus::Committed)
    );
    assert_eq!(
        balances(&w).await,
        ("90".into(), "10".into()),
        "applied once"
    );
}

#[tokio::test]
async fn an_answered_commit_whose_coordinator_dies_is_committed_by_the_sweeper() {
    let w = World::new().await;
    bank(&w).await;
    let tx = answered_then_crashed(&w, "staged-crash-after-answer").await;
    assert_eq!(status(&w, &tx).await, TxStatus::Staging);
    // Before the deadline the sweeper leaves it to its coordinator.
    assert_eq!(w.sweeper().run().await.expect("sweep").found, 0);
    w.clock.advance(6_000);
    let report = w.sweeper().run().await.expect("sweep");
    assert_eq!((report.found, report.rolled_forward), (1, 1), "{report:?}");
    assert_eq!(status(&w, &tx).await, TxStatus::Committed);
    assert_eq!(balances(&w).await, ("90".into(), "10".into()));
    assert!(unlocked(&w).await);
}

#[tokio::test]
async fn a_staging_record_missing_a_hold_is_prevented_there_and_aborted_by_the_sweeper() {
    let w = World::new().await;
    bank(&w).await;
    // The coordinator staged the record and died with only alice's prepare landed.
    let c = w.coordinator_in(CommitMode::Staged);
    let request = c.validate(&transfer("alice", "bob", 10)).expect("valid");
    let mut record = request.begin(TxId::random(), None, "gone".into(), w.clock.now_ms());
    record.status = TxStatus::Staging;
    w.log.create(&record).await.expect("stage");
    let to_alice = prepare_req(
        &record.tx_id,
        record.deadline,
        "alice",
        json!({"add": {"balance": -10}, "require": {"balance": {"gte": 10}}}),
    );
    let to_alice = twopc_core::message::PrepareRequest {
        part: None,
        began: record.created_at,
        ..to_alice
    };
    assert!(w.prepare("accounts", &to_alice).await.vote.is_yes());
    w.clock.advance(6_000);
    let report = w.sweeper().run().await.expect("sweep");
    assert_eq!((report.found, report.aborted), (1, 1), "{report:?}");
    assert_eq!(status(&w, &record.tx_id).await, TxStatus::Aborted);
    // Bob's item carries the prevent (an aborted entry), final: the contract suite shows a
    // prevented prepare never lands (here it would be refused by its deadline first).
    let bob = w.item("wallets", "bob").await.expect("bob");
    assert_eq!(
        bob.fence.get(&record.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
    assert_eq!(balances(&w).await, ("100".into(), "0".into()));
    assert!(unlocked(&w).await);
}

#[tokio::test]
async fn a_replay_helps_an_abandoned_staging_record_that_every_participant_holds() {
    let w = World::new().await;
    bank(&w).await;
    let crash = std::sync::Arc::new(CrashAt::new(FaultPoint::AfterAnswer));
    let dead = w
        .coordinator_in(CommitMode::Staged)
        .with_faults(crash.clone());
    let key = "staged-help";
    let body = transfer("alice", "bob", 10);
    crash
        .run(dead.submit_to_end(&body, Some(key)))
        .await
        .expect_err("crash");
    // The client retries before the deadline: the replay finds every participant holding the
    // transaction, makes the commit explicit and finishes it.
    let replay = w
        .coordinator_in(CommitMode::Staged)
        .submit_to_end(&body, Some(key))
        .await
        .expect("replay");
    assert_eq!(replay.status, TxStatus::Committed);
    assert_eq!(balances(&w).await, ("90".into(), "10".into()));
    assert!(unlocked(&w).await);
}

#[tokio::test]
async fn a_transaction_with_a_refused_prepare_is_never_answered_committed() {
    let w = World::new().await;
    bank(&w).await;
    // Hold bob's item with a live lock of another transaction: the staged prepare is refused.
    let other = TxId::random();
    let hold = twopc_core::message::PrepareRequest {
        part: None,
        // Begun now (within the participant's clock margin), live for a minute.
        began: w.clock.now_ms(),
        ..prepare_req(
            &other,
            w.clock.now_ms() + 60_000,
            "bob",
            json!({"set": {"memo": "x"}}),
        )
    };
    assert!(w.prepare("wallets", &hold).await.vote.is_yes());
    let staged = w
        .coordinator_in(CommitMode::Staged)
        .submit(&twopc_tests::exclusive(transfer("alice", "bob", 10)), None)
        .await
        .expect("stage");
    assert_eq!(staged.answer.outcome, Outcome::Aborted);
    assert_eq!(
        staged.answer.record.votes.iter().find_map(|v| match v {
            twopc_core::record::Vote::No { reason, .. } => Some(*reason),
            _ => None,
        }),
        Some(VoteReason::Conflict)
    );
}

#[tokio::test]
async fn a_participant_meeting_an_overdue_staging_hold_asks_and_the_completer_recovers_it() {
    use twopc_fanout::poll::{Poller, local_client, stream_arn};
    // GIVEN a staged commit answered "committed" whose coordinator died before finishing
    let w = World::new().await;
    bank(&w).await;
    let tx = answered_then_crashed(&w, "staged-asked").await;

    // WHEN, past its deadline, an exclusive prepare on alice meets its reservation
    w.clock.advance(6_000);
    let other = TxId::random();
    let deadline = w.clock.now_ms() + 5_000;
    let reply = w
        .prepare(
            "accounts",
            &prepare_req(&other, deadline, "alice", json!({"set": {"owner": "x"}})),
        )
        .await;

    // THEN it votes conflict and asks for the recovery (the participant has no transport)
    assert!(
        matches!(
            reply.vote,
            twopc_core::record::Vote::No {
                reason: VoteReason::Conflict,
                ..
            }
        ),
        "{reply:?}"
    );
    let asked = w.log.get(&tx).await.expect("get").expect("record");
    assert_eq!(asked.status, TxStatus::Staging);
    assert!(asked.recovery_asked.is_some(), "{asked:?}");
    assert!(
        !w.log
            .ask_recovery(&tx, w.clock.now_ms())
            .await
            .expect("ask"),
        "asked once only"
    );

    // AND the completer, reading the transactions table's stream, recovers it at once: every
    // participant holds it, so it commits
    let arn = stream_arn(&w.client, &w.tx_table).await.expect("stream");
    let mut poller = Poller::new(
        local_client(&twopc_tests::endpoint()).await,
        vec![arn],
        None,
    );
    let completer = w.coordinator_in(CommitMode::Staged);
    let completer = &completer;
    poller
        .poll_once(&|e| async move { sweeper::completer::complete(completer, &e).await })
        .await
        .expect("poll");
    assert_eq!(status(&w, &tx).await, TxStatus::Committed);
    assert_eq!(balances(&w).await, ("90".into(), "10".into()));
    assert!(unlocked(&w).await);
}

#[tokio::test]
async fn a_fresh_ask_is_acted_on_by_a_completer_whose_clock_lags_behind_the_deadline() {
    use twopc_core::coordinator::Coordinator;
    use twopc_fanout::poll::{Poller, local_client, stream_arn};
    use twopc_tests::SkewedClock;
    // GIVEN a staged commit answered "committed" whose coordinator died before finishing, and
    // a participant that met its hold past the deadline (on its own clock) and asked
    let w = World::new().await;
    bank(&w).await;
    let tx = answered_then_crashed(&w, "staged-asked-lagging").await;
    w.clock.advance(6_000);
    let deadline = w.clock.now_ms() + 5_000;
    let other = prepare_req(&TxId::random(), deadline, "alice", json!({"set": {"o": 1}}));
    assert!(!w.prepare("accounts", &other).await.vote.is_yes());
    let asked = w.log.get(&tx).await.expect("get").expect("record");
    assert!(asked.recovery_asked.is_some(), "{asked:?}");

    // WHEN the completer's clock lags 10 s behind: to it, the deadline has not passed
    let lagging = SkewedClock::new(w.clock.clone(), -10_000);
    assert!(lagging.now_ms() < asked.deadline);
    let config = w.coordinator_in(CommitMode::Staged).config().clone();
    let completer = Coordinator::new(w.log.clone(), w.direct(), lagging, config);
    let completer = &completer;
    let arn = stream_arn(&w.client, &w.tx_table).await.expect("stream");
    let mut poller = Poller::new(
        local_client(&twopc_tests::endpoint()).await,
        vec![arn],
        None,
    );
    poller
        .poll_once(&|e| async move { sweeper::completer::complete(completer, &e).await })
        .await
        .expect("poll");

    // THEN it recovers the record at once all the same: every participant holds it, so it
    // commits, and the holds are released
    assert_eq!(status(&w, &tx).await, TxStatus::Committed);
    assert_eq!(balances(&w).await, ("90".into(), "10".into()));
    assert!(unlocked(&w).await);
}
