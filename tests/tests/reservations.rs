//! Reservations against DynamoDB Local, through the participant logic and the coordinator: one
//! test per rule of `docs/protocol.md`, "Reservations" (the store-level conditions are the
//! contract suite's; the model check explores their interleavings).

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use twopc_core::decimal::Decimal;
use twopc_core::fault::FaultPoint;
use twopc_core::ids::TxId;
use twopc_core::item::ItemState;
use twopc_core::message::PrepareReply;
use twopc_core::op::Mode;
use twopc_core::participant::ParticipantConfig;
use twopc_core::ports::{Clock, TxLog};
use twopc_core::record::{Vote, VoteReason};
use twopc_core::status::TxStatus;
use twopc_tests::{
    CrashAt, SubmitToEnd, World, complete_req, exclusive, prepare_req, reason, transfer,
};

/// A debit of `amount` from `balance`, never below 0: commutes, so it reserves.
fn debit(amount: i64) -> Value {
    json!({"add": {"balance": -amount}, "require": {"balance": {"gte": amount}}})
}

/// The same debit with a `set` beside it: exclusive, so it locks.
fn exclusive_debit(amount: i64) -> Value {
    json!({"add": {"balance": -amount}, "require": {"balance": {"gte": amount}}, "set": {"memo": "x"}})
}

async fn merchant(w: &World, balance: i64) {
    w.seed("accounts", "alice", json!({"balance": balance}))
        .await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
}

/// `tx`'s prepare of `op` on alice, the reply.
async fn prepare_alice(w: &World, tx: &TxId, deadline: u64, op: Value) -> PrepareReply {
    w.prepare("accounts", &prepare_req(tx, deadline, "alice", op))
        .await
}

/// `tx`'s commit (or abort) of `op` on alice.
async fn complete_alice(w: &World, commit: bool, tx: &TxId, deadline: u64, op: Value) {
    let req = complete_req(tx, deadline, "alice", op);
    let reply = if commit {
        w.participant.commit(&w.accounts, &req).await
    } else {
        w.participant.abort(&w.accounts, &req).await
    };
    assert!(reply.expect("complete").acknowledged());
}

fn deadline(w: &World) -> u64 {
    w.clock.now_ms() + 5_000
}

async fn balance(w: &World, service: &str, id: &str) -> String {
    w.attr(service, id, "balance").await.expect("a balance")
}

/// Nothing reserved on `item`, its escrow (if any) idle at `value`.
fn assert_idle(item: &ItemState, value: &str) {
    assert!(item.reservations.is_empty(), "{item:?}");
    let value = Decimal::parse(value).expect("a number");
    for (attr, escrow) in &item.escrow {
        assert!(
            escrow.count == 0 && escrow.floors == 0 && !escrow.is_stale(&value),
            "{attr}: {escrow:?}"
        );
    }
}

/// A transfer whose coordinator dies at `point`, leaving its record as it was there.
async fn crashed_transfer(w: &World, body: &Value, point: FaultPoint) -> TxId {
    let key = format!("crash-{}", TxId::random());
    let crash = Arc::new(CrashAt::new(point));
    let c = w.coordinator_via(w.direct()).with_faults(crash.clone());
    let stopped = crash
        .run(c.submit_to_end(body, Some(&key)))
        .await
        .expect_err("must crash");
    assert_eq!(stopped, point);
    TxId::for_idempotency_key(&key)
}

#[tokio::test]
async fn concurrent_debits_of_one_account_all_commit_when_the_balance_covers_them() {
    let w = World::new().await;
    merchant(&w, 100).await;
    // Eight payments out of one account at once: each reserves beside the others.
    let records = futures::future::join_all((0..8).map(|_| w.transfer("alice", "bob", 10))).await;
    for r in &records {
        assert_eq!(r.status, TxStatus::Committed, "{:?}", r.votes);
        assert!(
            r.votes.iter().all(|v| matches!(
                v,
                Vote::Yes {
                    mode: Mode::Reserved
                }
            )),
            "{:?}",
            r.votes
        );
    }
    assert_eq!(balance(&w, "accounts", "alice").await, "20");
    assert_eq!(balance(&w, "wallets", "bob").await, "80");
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_idle(&alice, "20");
    assert_eq!(alice.attributes[twopc_core::layout::VERSION], json!(8));
}

#[tokio::test]
async fn a_debit_the_balance_covers_but_not_with_the_debits_in_flight_votes_conflict() {
    let w = World::new().await;
    merchant(&w, 100).await;
    let (t1, t2) = (TxId::random(), TxId::random());
    let d = deadline(&w);
    let first = prepare_alice(&w, &t1, d, debit(60)).await;
    assert_eq!(
        first.vote,
        Vote::Yes {
            mode: Mode::Reserved
        }
    );
    let second = prepare_alice(&w, &t2, d, debit(60)).await;
    assert_eq!(reason(&second), Some(VoteReason::Conflict), "{second:?}");
    // Readers see the committed value, not the 40 the reservation might leave.
    assert_eq!(balance(&w, "accounts", "alice").await, "100");
    // Once the first gives its reservation back, the second fits.
    complete_alice(&w, false, &t1, d, debit(60)).await;
    let t3 = TxId::random();
    let third = prepare_alice(&w, &t3, d, debit(60)).await;
    assert!(third.vote.is_yes(), "{third:?}");
}

#[tokio::test]
async fn a_debit_the_balance_cannot_cover_votes_condition() {
    let w = World::new().await;
    merchant(&w, 100).await;
    let rec = w.transfer("alice", "bob", 150).await;
    assert_eq!(rec.status, TxStatus::Aborted);
    assert!(
        matches!(&rec.votes[0], Vote::No { reason: VoteReason::Condition, message } if message.contains("balance gte 150 (is 100)")),
        "{:?}",
        rec.votes
    );
    assert_eq!(balance(&w, "accounts", "alice").await, "100");
}

#[tokio::test]
async fn an_exclusive_operation_meeting_reservations_pauses_new_ones_and_then_locks() {
    let w = World::new().await;
    merchant(&w, 100).await;
    let d = deadline(&w);
    let reserving = TxId::random();
    prepare_alice(&w, &reserving, d, debit(10)).await;
    // The exclusive prepare meets a live reservation: conflict, and new reservations wait.
    let locker = TxId::random();
    let refused = prepare_alice(&w, &locker, d, exclusive_debit(5)).await;
    assert_eq!(reason(&refused), Some(VoteReason::Conflict), "{refused:?}");
    let newcomer = prepare_alice(&w, &TxId::random(), d, debit(1)).await;
    assert!(
        matches!(&newcomer.vote, Vote::No { reason: VoteReason::Conflict, message } if message.contains("paused")),
        "{newcomer:?}"
    );
    // The standing reservation drains; the exclusive retry (a new transaction) locks.
    complete_alice(&w, true, &reserving, d, debit(10)).await;
    let retry = prepare_alice(&w, &TxId::random(), d, exclusive_debit(5)).await;
    assert_eq!(
        retry.vote,
        Vote::Yes {
            mode: Mode::Exclusive
        }
    );
}

#[tokio::test]
async fn a_prepare_meeting_a_decided_reservation_settles_it_without_waiting() {
    let w = World::new().await;
    merchant(&w, 100).await;
    // A transfer decided to commit, and its coordinator died: its reservations stand, live.
    let decided =
        crashed_transfer(&w, &transfer("alice", "bob", 30), FaultPoint::AfterDecide).await;
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert!(alice.reservations.contains_key(&decided));
    // An exclusive change of alice, long before that deadline: it rolls the owner forward on
    // alice, then locks.
    let rec = w
        .coordinator
        .submit_to_end(&exclusive(transfer("alice", "bob", 5)), None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Committed, "{:?}", rec.votes);
    assert_eq!(balance(&w, "accounts", "alice").await, "65");
    let owner = w.log.get(&decided).await.expect("get").expect("record");
    assert_eq!(
        owner.status,
        TxStatus::Committing,
        "bob is the sweeper's to finish"
    );
}

#[tokio::test]
async fn an_expired_reservation_is_resolved_through_its_owners_record() {
    let w = World::new().await;
    merchant(&w, 100).await;
    // Undecided, its coordinator gone: the reservation must not be dropped blindly. Gone once
    // every vote is in (after one prepare's answer, the other's could be cut off before it
    // landed, and alice would hold nothing).
    let stalled =
        crashed_transfer(&w, &transfer("alice", "bob", 30), FaultPoint::BeforeDecide).await;
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert!(
        alice.reservations.contains_key(&stalled),
        "alice is reserved"
    );
    w.clock.advance(60_000);
    let rec = w.transfer("alice", "bob", 90).await;
    assert_eq!(rec.status, TxStatus::Committed, "{:?}", rec.votes);
    let owner = w.log.get(&stalled).await.expect("get").expect("record");
    assert!(
        matches!(owner.status, TxStatus::Aborting | TxStatus::Aborted),
        "{}",
        owner.status
    );
    assert_eq!(balance(&w, "accounts", "alice").await, "10");
}

#[tokio::test]
async fn the_sweeper_finds_an_orphan_reservation_through_the_lock_index() {
    let w = World::new().await;
    merchant(&w, 100).await;
    // A reservation whose transaction never began (no record): only the index finds it.
    let orphan = TxId::random();
    let d = deadline(&w);
    prepare_alice(&w, &orphan, d, debit(10)).await;
    w.clock.advance(60_000);
    let report = w.sweeper().run().await.expect("sweep");
    assert_eq!(
        (report.expired_locks, report.locks_resolved),
        (1, 1),
        "{report:?}"
    );
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_idle(&alice, "100");
    assert_eq!(balance(&w, "accounts", "alice").await, "100");
    let owner = w.log.get(&orphan).await.expect("get").expect("record");
    assert_eq!(
        owner.status,
        TxStatus::Aborted,
        "recorded so it can never begin"
    );
}

#[tokio::test]
async fn a_reservation_beyond_the_most_an_item_takes_votes_conflict() {
    let w = World::with_participant_config(ParticipantConfig {
        max_reservations: 2,
        ..ParticipantConfig::default()
    })
    .await;
    merchant(&w, 100).await;
    let d = deadline(&w);
    for _ in 0..2 {
        let yes = prepare_alice(&w, &TxId::random(), d, debit(1)).await;
        assert!(yes.vote.is_yes(), "{yes:?}");
    }
    let third = prepare_alice(&w, &TxId::random(), d, debit(1)).await;
    assert!(
        matches!(&third.vote, Vote::No { reason: VoteReason::Conflict, message } if message.contains("TWOPC_MAX_RESERVATIONS")),
        "{third:?}"
    );
}

#[tokio::test]
async fn readers_see_committed_values_never_reservations_or_their_bounds() {
    let w = World::new().await;
    merchant(&w, 100).await;
    let t = TxId::random();
    prepare_alice(&w, &t, deadline(&w), debit(25)).await;
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert!(!alice.reservations.is_empty());
    let view = twopc_dynamo::items::business_view(&alice).expect("a real item");
    assert_eq!(
        view.keys().map(String::as_str).collect::<Vec<_>>(),
        ["balance", "id"],
        "no protocol attribute shows"
    );
    assert_eq!(view["balance"], json!(100));
}

#[tokio::test]
async fn a_balance_written_outside_the_protocol_is_reserved_from_its_new_value() {
    let w = World::new().await;
    merchant(&w, 100).await;
    assert_eq!(
        w.transfer("alice", "bob", 30).await.status,
        TxStatus::Committed
    );
    // The service itself sets alice's balance (no transaction): the idle escrow (70) is stale.
    w.client
        .update_item()
        .table_name(&w.accounts)
        .key("id", AttributeValue::S("alice".into()))
        .update_expression("SET balance = :b")
        .expression_attribute_values(":b", AttributeValue::N("20".into()))
        .send()
        .await
        .expect("update outside the protocol");
    // A debit of 50 fits the stale escrow, not the balance: refused for insufficient funds.
    let rec = w.transfer("alice", "bob", 50).await;
    assert_eq!(rec.status, TxStatus::Aborted, "{:?}", rec.votes);
    assert!(
        matches!(
            &rec.votes[0],
            Vote::No {
                reason: VoteReason::Condition,
                ..
            }
        ),
        "{:?}",
        rec.votes
    );
    assert_eq!(
        w.transfer("alice", "bob", 20).await.status,
        TxStatus::Committed
    );
    assert_idle(&w.item("accounts", "alice").await.expect("alice"), "0");
}
