//! The protocol against DynamoDB Local: commit, abort, conflicts, duplicates, the fence, the
//! lock rule's owner resolution, the decide race, exact numbers, idempotency, bad input.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use twopc_core::api::codes;
use twopc_core::coordinator::{CommitMode, SubmitError, Submitted};
use twopc_core::ids::TxId;
use twopc_core::item::{FenceEntry, FenceOutcome, ItemState, Lock};
use twopc_core::layout;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::participant::{ParticipantConfig, Resolved};
use twopc_core::ports::{
    Clock, ParticipantStore, PrepareWrite, Swapped, Transport, TransportError, TxLog,
};
use twopc_core::record::{Target, TxRecord, Vote, VoteReason};
use twopc_core::status::TxStatus;
use twopc_tests::{SubmitToEnd, World, complete_req, key, op, prepare_req, reason, transfer};

async fn bank(w: &World) {
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
}

/// The item is a tombstone: unlocked, no business attributes, absent to readers.
async fn assert_tombstone(w: &World, service: &str, id: &str) -> ItemState {
    let item = w
        .item(service, id)
        .await
        .unwrap_or_else(|| panic!("{service}/{id}: no tombstone"));
    assert!(
        item.tombstone,
        "{service}/{id} is not a tombstone: {item:?}"
    );
    assert_eq!(item.lock, None);
    assert_eq!(twopc_dynamo::items::business_view(&item), None);
    item
}

/// A new transaction prepared on alice with `o`, its deadline `ms` from now: the commit or abort
/// request it will send (its id and deadline with it).
async fn prepared_on_alice(w: &World, ms: u64, o: Value) -> CompleteRequest {
    let tx = TxId::random();
    let deadline = w.clock.now_ms() + ms;
    w.prepare("accounts", &prepare_req(&tx, deadline, "alice", o.clone()))
        .await;
    complete_req(&tx, deadline, "alice", o)
}

async fn assert_unlocked(w: &World) {
    for (s, id) in [("accounts", "alice"), ("wallets", "bob")] {
        if let Some(item) = w.item(s, id).await {
            assert_eq!(item.lock, None, "{s}/{id} is still locked");
        }
    }
}

// ---------------------------------------------------------------- commit and abort

#[tokio::test]
async fn transfer_across_two_tables_commits() {
    let w = World::new().await;
    bank(&w).await;
    let rec = w.transfer("alice", "bob", 30).await;
    assert_eq!(rec.status, TxStatus::Committed, "{:?}", rec.votes);
    assert!(rec.votes.iter().all(Vote::is_yes));
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("70")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("30")
    );
    assert_unlocked(&w).await;
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(
        alice.fence.get(&rec.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Committed)
    );
    assert_eq!(alice.attributes.get(layout::VERSION), Some(&json!(1)));
    let stored = w.log.get(&rec.tx_id).await.expect("get").expect("record");
    assert_eq!(stored.status, TxStatus::Committed);
}

#[tokio::test]
async fn insufficient_balance_aborts_and_leaves_no_lock() {
    let w = World::new().await;
    bank(&w).await;
    let rec = w.transfer("alice", "bob", 500).await;
    assert_eq!(rec.status, TxStatus::Aborted);
    assert!(
        matches!(&rec.votes[0], Vote::No { reason: VoteReason::Condition, message } if message.contains("balance gte 500 (is 100)")),
        "{:?}",
        rec.votes
    );
    assert!(rec.votes[1].is_yes(), "{:?}", rec.votes);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("0")
    );
    assert_unlocked(&w).await;
    let answer = twopc_core::api::submitted(&twopc_core::coordinator::Submitted::of(rec));
    assert_eq!(
        (answer.status, answer.body["code"].as_str()),
        (409, Some("condition"))
    );
}

#[tokio::test]
async fn a_live_lock_whose_owner_decided_is_settled_by_its_record_not_a_conflict() {
    // GIVEN a live lock (deadline 10 s away) whose owner's record is already COMMITTING: its
    // coordinator decided and has not completed this item yet
    let w = World::new().await;
    bank(&w).await;
    let holder = TxId::random();
    let now = w.clock.now_ms();
    let mut record = TxRecord::never_began(&holder, now);
    record.status = TxStatus::Committing;
    record.deadline = now + 10_000;
    record.created_at = twopc_tests::began(record.deadline);
    let note = json!({"set": {"note": "x"}});
    let held = w
        .prepare(
            "accounts",
            &prepare_req(&holder, record.deadline, "alice", note),
        )
        .await;
    assert!(held.vote.is_yes(), "{:?}", held.vote);
    w.log.create(&record).await.expect("holder's record");
    // WHEN another transaction prepares the item
    let rec = w.transfer("alice", "bob", 10).await;
    // THEN it settles the owner by its record (the lock rule: roll it forward here), as the
    // owner's own completion would, and goes on: no `conflict`, no wait for the lease.
    assert_eq!(rec.status, TxStatus::Committed, "{:?}", rec.votes);
    assert_eq!(
        w.attr("accounts", "alice", "note").await.as_deref(),
        Some("x")
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90")
    );
}

#[tokio::test]
async fn conflicting_live_lock_votes_conflict() {
    let w = World::new().await;
    bank(&w).await;
    // A live holder, as its coordinator leaves it between prepare and decide: its record is
    // PREPARING and its deadline has not passed.
    let holder = TxId::random();
    let now = w.clock.now_ms();
    let mut record = TxRecord::never_began(&holder, now);
    record.status = TxStatus::Preparing;
    record.deadline = now + 10_000;
    // Its lock's `began` (the request helpers'): the record is the lock's owner's.
    record.created_at = twopc_tests::began(record.deadline);
    w.log.create(&record).await.expect("holder's record");
    let held = w
        .prepare(
            "accounts",
            &prepare_req(
                &holder,
                record.deadline,
                "alice",
                json!({"set": {"note": "x"}}),
            ),
        )
        .await;
    assert!(held.vote.is_yes(), "{:?}", held.vote);

    let rec = w.transfer("alice", "bob", 10).await;
    assert_eq!(rec.status, TxStatus::Aborted);
    assert!(
        matches!(
            &rec.votes[0],
            Vote::No {
                reason: VoteReason::Conflict,
                ..
            }
        ),
        "{:?}",
        rec.votes
    );
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(
        alice.lock.map(|l| l.tx_id),
        Some(holder),
        "the live lock must stay with its owner"
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    assert_eq!(w.item("wallets", "bob").await.expect("bob").lock, None);
}

#[tokio::test]
async fn put_creates_an_item_and_an_aborted_put_leaves_only_a_tombstone() {
    let w = World::new().await;
    bank(&w).await;
    let create = |id: &str, need: i64| {
        json!({"participants": [
        {"participant": "wallets", "key": {"id": id}, "op": {"put": {"balance": 5, "owner": "carol"}}},
        {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": -5}, "require": {"balance": {"gte": need}}}}]})
    };
    let rec = w
        .coordinator
        .submit_to_end(&create("carol", 5), None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Committed);
    let carol = w.item("wallets", "carol").await.expect("carol exists");
    assert!(!carol.placeholder);
    assert_eq!(carol.attributes.get("owner"), Some(&json!("carol")));
    assert_eq!(
        w.attr("wallets", "carol", "balance").await.as_deref(),
        Some("5")
    );

    let rec = w
        .coordinator
        .submit_to_end(&create("dave", 1000), None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Aborted);
    assert_tombstone(&w, "wallets", "dave").await;

    let again = w
        .coordinator
        .submit_to_end(&create("carol", 5), None)
        .await
        .expect("submit");
    assert!(
        matches!(
            &again.votes[0],
            Vote::No {
                reason: VoteReason::Condition,
                ..
            }
        ),
        "{:?}",
        again.votes
    );
}

#[tokio::test]
async fn delete_leaves_a_tombstone_that_reads_as_absent_and_a_put_can_take() {
    let w = World::new().await;
    bank(&w).await;
    let body = json!({"participants": [{"participant": "wallets", "key": {"id": "bob"}, "op": {"delete": true, "require": {"balance": {"eq": 0}}}}]});
    let rec = w
        .coordinator
        .submit_to_end(&body, None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Committed);
    let bob = assert_tombstone(&w, "wallets", "bob").await;
    assert_eq!(
        bob.fence.get(&rec.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Committed)
    );
    assert_eq!(bob.attributes.get(layout::VERSION), Some(&json!(1)));
    // Anything but a put finds no item.
    let add = json!({"participants": [{"participant": "wallets", "key": {"id": "bob"}, "op": {"add": {"balance": 1}}}]});
    let rec = w
        .coordinator
        .submit_to_end(&add, None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Aborted);
    assert!(
        matches!(
            &rec.votes[0],
            Vote::No {
                reason: VoteReason::NotFound,
                ..
            }
        ),
        "{:?}",
        rec.votes
    );
    // A put creates it again, over the tombstone.
    w.clock.advance(1);
    let put = json!({"participants": [{"participant": "wallets", "key": {"id": "bob"}, "op": {"put": {"balance": 7}}}]});
    let rec = w
        .coordinator
        .submit_to_end(&put, None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Committed);
    let bob = w.item("wallets", "bob").await.expect("bob");
    assert!(!bob.tombstone && !bob.placeholder, "{bob:?}");
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("7")
    );
}

/// A new transaction's `put` of wallet `id`, prepared: its prepare and its commit/abort request.
async fn prepared_put(w: &World, id: &str) -> (PrepareRequest, CompleteRequest) {
    let put = json!({"put": {"balance": 5}});
    let tx = TxId::random();
    let deadline = w.clock.now_ms() + 5_000;
    let prep = prepare_req(&tx, deadline, id, put.clone());
    let vote = w.prepare("wallets", &prep).await;
    assert!(vote.vote.is_yes(), "{:?}", vote.vote);
    (prep, complete_req(&tx, deadline, id, put))
}

#[tokio::test]
async fn a_late_duplicate_prepare_of_a_put_cannot_recreate_an_item_deleted_since() {
    // T' creates carol; its coordinator dies before finalizing (COMMITTING); T deletes carol;
    // a duplicate of T''s prepare lands late; the sweeper re-drives T''s commit. Before
    // tombstones the duplicate re-created carol and the commit applied the put twice.
    let w = World::new().await;
    bank(&w).await;
    let (prep, commit) = prepared_put(&w, "carol").await;
    assert_eq!(w.commit("wallets", &commit).await, CompleteReply::Done);
    w.clock.advance(1);
    let delete = json!({"participants": [{"participant": "wallets", "key": {"id": "carol"}, "op": {"delete": true}}]});
    let rec = w
        .coordinator
        .submit_to_end(&delete, None)
        .await
        .expect("delete");
    assert_eq!(rec.status, TxStatus::Committed);
    let late = w.prepare("wallets", &prep).await;
    assert_eq!(reason(&late), Some(VoteReason::Fenced));
    assert_eq!(
        w.commit("wallets", &commit).await,
        CompleteReply::AlreadyDone
    );
    assert_tombstone(&w, "wallets", "carol").await;
}

#[tokio::test]
async fn an_aborted_create_leaves_a_tombstone_that_refuses_its_late_prepare() {
    let w = World::new().await;
    bank(&w).await;
    let (prep, abort) = prepared_put(&w, "erin").await;
    let tx = prep.tx_id.clone();
    assert_eq!(w.abort("wallets", &abort).await, CompleteReply::Done);
    let erin = assert_tombstone(&w, "wallets", "erin").await;
    assert_eq!(
        erin.fence.get(&tx).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
    let late = w.prepare("wallets", &prep).await;
    assert_eq!(reason(&late), Some(VoteReason::Fenced));
    assert_tombstone(&w, "wallets", "erin").await;
}

// ---------------------------------------------------------------- duplicate delivery

#[tokio::test]
async fn repeated_prepare_is_a_yes_and_changes_nothing() {
    let w = World::new().await;
    bank(&w).await;
    let tx = TxId::random();
    let req = prepare_req(
        &tx,
        w.clock.now_ms() + 5_000,
        "alice",
        json!({"add": {"balance": -10}}),
    );
    assert!(w.prepare("accounts", &req).await.vote.is_yes());
    let first = w.item("accounts", "alice").await;
    assert!(w.prepare("accounts", &req).await.vote.is_yes());
    assert_eq!(w.item("accounts", "alice").await, first);
}

#[tokio::test]
async fn repeated_commit_applies_once() {
    let w = World::new().await;
    bank(&w).await;
    let c = prepared_on_alice(&w, 5_000, json!({"add": {"balance": -10}})).await;
    assert_eq!(w.commit("accounts", &c).await, CompleteReply::Done);
    let after = w.item("accounts", "alice").await;
    assert_eq!(w.commit("accounts", &c).await, CompleteReply::AlreadyDone);
    assert_eq!(w.item("accounts", "alice").await, after);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90")
    );
}

#[tokio::test]
async fn repeated_abort_changes_nothing() {
    let w = World::new().await;
    bank(&w).await;
    let c = prepared_on_alice(&w, 5_000, json!({"add": {"balance": -10}})).await;
    assert_eq!(w.abort("accounts", &c).await, CompleteReply::Done);
    let after = w.item("accounts", "alice").await;
    assert_eq!(w.abort("accounts", &c).await, CompleteReply::AlreadyDone);
    assert_eq!(w.item("accounts", "alice").await, after);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    assert_unlocked(&w).await;
}

#[tokio::test]
async fn commit_after_abort_is_reported_as_a_violation_not_applied() {
    let w = World::new().await;
    bank(&w).await;
    let c = prepared_on_alice(&w, 5_000, json!({"add": {"balance": -10}})).await;
    w.abort("accounts", &c).await;
    let reply = w.commit("accounts", &c).await;
    assert!(
        matches!(reply, CompleteReply::Violation { .. }),
        "{reply:?}"
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
}

// ---------------------------------------------------------------- the fence

#[tokio::test]
async fn commit_finding_neither_lock_nor_fence_entry_above_the_horizon_is_a_violation() {
    let w = World::new().await;
    bank(&w).await;
    let tx = TxId::random();
    let c = complete_req(
        &tx,
        w.clock.now_ms() + 5_000,
        "alice",
        json!({"add": {"balance": -10}}),
    );
    let reply = w.commit("accounts", &c).await;
    assert!(
        matches!(reply, CompleteReply::Violation { .. }),
        "{reply:?}"
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
}

#[tokio::test]
async fn commit_retried_after_its_fence_entry_was_pruned_is_done_not_reapplied() {
    let w = World::new().await;
    bank(&w).await;
    // T commits alice, its coordinator dies before finalizing; much later another transaction
    // prunes T's expired fence entry; then the sweeper re-drives T's commit.
    let c = prepared_on_alice(&w, 1_000, json!({"add": {"balance": -10}})).await;
    assert_eq!(w.commit("accounts", &c).await, CompleteReply::Done);
    let until = stale_after(&w.item("accounts", "alice").await.expect("alice").fence[&c.tx_id]);
    w.clock.advance(until - w.clock.now_ms() + 1);
    let later = w.transfer("alice", "bob", 1).await;
    assert_eq!(later.status, TxStatus::Committed);
    assert!(
        !w.item("accounts", "alice")
            .await
            .expect("alice")
            .fence
            .contains_key(&c.tx_id),
        "entry should be pruned"
    );
    assert_eq!(w.commit("accounts", &c).await, CompleteReply::AlreadyDone);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("89"),
        "applied once"
    );
}

#[tokio::test]
async fn late_prepare_after_commit_is_refused_by_the_fence() {
    let w = World::new().await;
    bank(&w).await;
    let rec = w.transfer("alice", "bob", 10).await;
    assert_eq!(rec.status, TxStatus::Committed);
    let p = &rec.participants[0];
    let late = PrepareRequest {
        tx_id: rec.tx_id.clone(),
        deadline: rec.deadline,
        began: rec.created_at,
        key: p.key.clone(),
        op: p.op.clone(),
        coordinator: "late".into(),
        payload: None,
        hot_until: None,
    };
    let reply = w.prepare("accounts", &late).await;
    assert_eq!(reason(&reply), Some(VoteReason::Fenced));
    assert_eq!(w.item("accounts", "alice").await.expect("alice").lock, None);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90")
    );
}

#[tokio::test]
async fn late_prepare_after_abort_is_refused_by_the_fence() {
    let w = World::new().await;
    bank(&w).await;
    // bob's side fails (it requires a balance bob does not have), so alice's yes is aborted.
    let body = json!({"participants": [
        {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": -10}}},
        {"participant": "wallets", "key": {"id": "bob"}, "op": {"add": {"balance": 10}, "require": {"balance": {"gte": 1}}}}]});
    let rec = w
        .coordinator
        .submit_to_end(&body, None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Aborted);
    for (i, table) in [(0, &w.accounts), (1, &w.wallets)] {
        let p = &rec.participants[i];
        let late = PrepareRequest {
            tx_id: rec.tx_id.clone(),
            deadline: rec.deadline,
            began: rec.created_at,
            key: p.key.clone(),
            op: p.op.clone(),
            coordinator: "late".into(),
            payload: None,
            hot_until: None,
        };
        let reply = w
            .participant
            .prepare(table, &late)
            .await
            .expect("late prepare");
        assert_eq!(reason(&reply), Some(VoteReason::Fenced), "participant {i}");
    }
    assert_unlocked(&w).await;
}

#[tokio::test]
async fn abort_that_overtakes_its_prepare_fences_it_out() {
    let w = World::new().await;
    bank(&w).await;
    let tx = TxId::random();
    let deadline = w.clock.now_ms() + 5_000;
    let o = json!({"add": {"balance": -10}});
    // The abort arrives first (the prepare was delayed in transit).
    assert_eq!(
        w.abort("accounts", &complete_req(&tx, deadline, "alice", o.clone()))
            .await,
        CompleteReply::Done
    );
    let reply = w
        .prepare("accounts", &prepare_req(&tx, deadline, "alice", o))
        .await;
    assert_eq!(reason(&reply), Some(VoteReason::Fenced));
    assert_unlocked(&w).await;
}

#[tokio::test]
async fn prepare_after_the_deadline_is_refused() {
    let w = World::new().await;
    bank(&w).await;
    let tx = TxId::random();
    let req = prepare_req(
        &tx,
        w.clock.now_ms() + 1_000,
        "alice",
        json!({"add": {"balance": -10}}),
    );
    w.clock.advance(1_001);
    assert_eq!(
        reason(&w.prepare("accounts", &req).await),
        Some(VoteReason::Expired)
    );
    assert_unlocked(&w).await;
}

/// When a fence entry goes stale under the default configuration.
fn stale_after(e: &FenceEntry) -> u64 {
    e.began + ParticipantConfig::default().fence_window_ms
}

#[tokio::test]
async fn stale_fence_entries_are_pruned_by_later_commits() {
    let w = World::new().await;
    bank(&w).await;
    let first = w.transfer("alice", "bob", 1).await;
    let alice = w.item("accounts", "alice").await.expect("alice");
    let until = stale_after(&alice.fence[&first.tx_id]);
    w.clock.advance(until - w.clock.now_ms() + 1);
    let second = w.transfer("alice", "bob", 1).await;
    assert_eq!(second.status, TxStatus::Committed);
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert!(
        !alice.fence.contains_key(&first.tx_id),
        "stale entry not pruned: {:?}",
        alice.fence
    );
    assert!(alice.fence.contains_key(&second.tx_id));
}

// ---------------------------------------------------------------- the transactions table

#[tokio::test]
async fn a_status_swap_returns_exactly_the_record_it_stored_without_reading_it_back() {
    let w = World::new().await;
    let req = w
        .coordinator
        .validate(&transfer("alice", "bob", 10))
        .expect("valid");
    let mut record = req.begin(TxId::random(), None, "test".into(), w.clock.now_ms());
    w.log.create(&record).await.expect("create");
    let votes = [
        Vote::yes(twopc_core::op::Mode::Exclusive),
        Vote::no(VoteReason::Condition, "short"),
    ];
    for (to, votes) in [
        (TxStatus::Aborting, Some(&votes[..])),
        (TxStatus::Aborted, None),
    ] {
        w.clock.advance(7);
        let Swapped::Done(moved) = w
            .log
            .transition(&record, to, votes, w.clock.now_ms())
            .await
            .expect("swap")
        else {
            panic!("lost the swap to {to}");
        };
        let stored = w
            .log
            .get(&record.tx_id)
            .await
            .expect("get")
            .expect("record");
        assert_eq!(*moved, stored, "after the swap to {to}");
        record = stored;
    }
    assert_eq!(record.votes, votes.to_vec());
}

// ---------------------------------------------------------------- the fence horizon

/// A fence of four entries, so that a handful of transfers fills it.
async fn small_fence_world() -> World {
    let w = World::with_participant_config(ParticipantConfig {
        fence_capacity: 4,
        ..ParticipantConfig::default()
    })
    .await;
    bank(&w).await;
    w
}

/// `n` committed transfers alice -> bob of 1 each, one millisecond apart.
async fn transfers(w: &World, n: usize) -> Vec<TxRecord> {
    let mut out = vec![];
    for _ in 0..n {
        w.clock.advance(1);
        let rec = w.transfer("alice", "bob", 1).await;
        assert_eq!(rec.status, TxStatus::Committed);
        out.push(rec);
    }
    out
}

/// The prepare and the commit that `rec` sent to its first participant.
fn first_participant_messages(rec: &TxRecord) -> (PrepareRequest, CompleteRequest) {
    let p = &rec.participants[0];
    (
        PrepareRequest {
            tx_id: rec.tx_id.clone(),
            deadline: rec.deadline,
            began: rec.created_at,
            key: p.key.clone(),
            op: p.op.clone(),
            coordinator: "late".into(),
            payload: None,
            hot_until: None,
        },
        CompleteRequest {
            tx_id: rec.tx_id.clone(),
            deadline: rec.deadline,
            began: rec.created_at,
            key: p.key.clone(),
            op: p.op.clone(),
            prune: None,
            refused: false,
        },
    )
}

#[tokio::test]
async fn a_hot_items_fence_stays_within_capacity_and_still_refuses_every_ended_transaction() {
    let w = small_fence_world().await;
    let done = transfers(&w, 12).await;
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert!(alice.fence.len() <= 4, "fence grew: {:?}", alice.fence);
    assert!(
        alice.horizon >= done[0].created_at,
        "evicting entries raises the horizon over them: {}",
        alice.horizon
    );
    // Every ended transaction is refused, by its entry or by the horizon, and its re-driven
    // commit applies nothing.
    for rec in &done {
        let (late, again) = first_participant_messages(rec);
        let reply = w.prepare("accounts", &late).await;
        assert_eq!(reason(&reply), Some(VoteReason::Fenced), "{}", rec.tx_id);
        assert_eq!(
            w.commit("accounts", &again).await,
            CompleteReply::AlreadyDone
        );
    }
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("88"),
        "12 transfers, each applied once"
    );
    assert_unlocked(&w).await;
}

#[tokio::test]
async fn an_abort_that_finds_the_fence_full_raises_the_horizon_instead_of_growing_it() {
    let w = small_fence_world().await;
    transfers(&w, 4).await;
    let before = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(before.fence.len(), 4, "full: {:?}", before.fence);
    // A transaction that never reached alice aborts there (no lock: the lock-free path).
    w.clock.advance(1);
    let tx = TxId::random();
    let mut abort = complete_req(
        &tx,
        w.clock.now_ms() + 5_000,
        "alice",
        json!({"add": {"balance": -1}}),
    );
    abort.began = w.clock.now_ms();
    let reply = w.abort("accounts", &abort).await;
    assert!(reply.acknowledged(), "{reply:?}");
    let after = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(after.fence, before.fence, "no entry added to a full fence");
    assert_eq!(after.horizon, abort.began);
    // Its prepare, landing late, is refused.
    let mut late = prepare_req(
        &tx,
        abort.deadline,
        "alice",
        json!({"add": {"balance": -1}}),
    );
    late.began = abort.began;
    let vote = w.prepare("accounts", &late).await;
    assert_eq!(reason(&vote), Some(VoteReason::Fenced));
    // A repeated abort has nothing left to do and writes nothing.
    assert_eq!(
        w.abort("accounts", &abort).await,
        CompleteReply::AlreadyDone
    );
    assert_eq!(w.item("accounts", "alice").await.expect("alice"), after);
}

#[tokio::test]
async fn a_commit_never_lowers_a_horizon_raised_after_its_prepare() {
    let w = small_fence_world().await;
    transfers(&w, 4).await;
    // T prepares on the full fence: its commit is to evict the oldest entry, horizon h1.
    w.clock.advance(1);
    let t = TxId::random();
    let o = json!({"add": {"balance": -5}});
    let deadline = w.clock.now_ms() + 5_000;
    let mut prep = prepare_req(&t, deadline, "alice", o.clone());
    prep.began = w.clock.now_ms();
    let vote = w.prepare("accounts", &prep).await;
    assert!(vote.vote.is_yes(), "{:?}", vote.vote);
    let prune = vote.prune.clone().expect("a full fence is pruned");
    // Meanwhile X, which began later, aborts on alice without a lock: the fence is full, so
    // X raises the horizon above h1.
    w.clock.advance(1);
    let x = TxId::random();
    let mut abort_x = complete_req(&x, deadline, "alice", o.clone());
    abort_x.began = w.clock.now_ms();
    assert!(abort_x.began > prune.horizon);
    assert!(w.abort("accounts", &abort_x).await.acknowledged());
    // T's commit with its prune hint must not lower the horizon X raised.
    let mut commit = complete_req(&t, deadline, "alice", o);
    commit.began = prep.began;
    commit.prune = Some(prune);
    assert_eq!(w.commit("accounts", &commit).await, CompleteReply::Done);
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(alice.horizon, abort_x.began, "horizon kept");
    assert_eq!(
        alice.fence.get(&t).map(|e| e.outcome),
        Some(FenceOutcome::Committed)
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("91"),
        "4 transfers of 1 and T's 5, each once"
    );
}

#[tokio::test]
async fn an_abort_hinted_refused_still_releases_a_lock_its_duplicate_prepare_took() {
    // The hint says this item voted no, but a duplicate of the prepare locked it since: the
    // abort fences first, finds its own lock, and releases it.
    let w = World::new().await;
    bank(&w).await;
    let tx = TxId::random();
    let deadline = w.clock.now_ms() + 5_000;
    let o = json!({"add": {"balance": -10}});
    let vote = w
        .prepare("accounts", &prepare_req(&tx, deadline, "alice", o.clone()))
        .await;
    assert!(vote.vote.is_yes(), "{:?}", vote.vote);
    let mut abort = complete_req(&tx, deadline, "alice", o);
    abort.refused = true;
    let reply = w.abort("accounts", &abort).await;
    assert_eq!(reply, CompleteReply::Done);
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(alice.lock, None);
    assert_eq!(
        alice.fence.get(&tx).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
}

#[tokio::test]
async fn an_abort_hinted_refused_fences_an_item_another_transaction_holds() {
    let w = World::new().await;
    bank(&w).await;
    let holder = TxId::random();
    let deadline = w.clock.now_ms() + 5_000;
    let o = json!({"add": {"balance": -10}, "set": {"memo": "held"}});
    w.prepare(
        "accounts",
        &prepare_req(&holder, deadline, "alice", o.clone()),
    )
    .await;
    let tx = TxId::random();
    let mut abort = complete_req(&tx, deadline, "alice", o.clone());
    abort.refused = true;
    assert_eq!(w.abort("accounts", &abort).await, CompleteReply::Done);
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(alice.lock.map(|l| l.tx_id), Some(holder));
    assert_eq!(
        alice.fence.get(&tx).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
    let late = w
        .prepare("accounts", &prepare_req(&tx, deadline, "alice", o))
        .await;
    assert_eq!(reason(&late), Some(VoteReason::Fenced));
}

// ---------------------------------------------------------------- the lock rule

/// An owner transaction T1 with a record in `status`, holding locks on alice (-10) and bob (+10)
/// that have expired by the time it returns.
async fn stuck_owner(w: &World, status: TxStatus) -> TxRecord {
    let tx = TxId::random();
    let now = w.clock.now_ms();
    let mut body = twopc_tests::exclusive(transfer("alice", "bob", 10));
    body["timeoutMs"] = json!(1_000);
    let req = w.coordinator.validate(&body).expect("valid");
    let record = req.begin(tx.clone(), None, "owner".into(), now);
    w.log.create(&record).await.expect("create");
    for (i, table) in [(0, &w.accounts), (1, &w.wallets)] {
        let p = &record.participants[i];
        let r = PrepareRequest {
            tx_id: tx.clone(),
            deadline: record.deadline,
            began: record.created_at,
            key: p.key.clone(),
            op: p.op.clone(),
            coordinator: "owner".into(),
            payload: None,
            hot_until: None,
        };
        assert!(
            w.participant
                .prepare(table, &r)
                .await
                .expect("owner prepare")
                .vote
                .is_yes()
        );
    }
    let mut record = record;
    let path: &[TxStatus] = match status {
        TxStatus::Preparing | TxStatus::Staging => &[],
        TxStatus::Committing => &[TxStatus::Committing],
        TxStatus::Committed => &[TxStatus::Committing, TxStatus::Committed],
        TxStatus::Aborting => &[TxStatus::Aborting],
        TxStatus::Aborted => &[TxStatus::Aborting, TxStatus::Aborted],
    };
    for to in path {
        match w
            .log
            .transition(&record, *to, None, now)
            .await
            .expect("swap")
        {
            Swapped::Done(r) => record = *r,
            Swapped::Lost(r) => panic!("lost swap: {r:?}"),
        }
    }
    w.clock.advance(1_001);
    record
}

/// A newcomer T2 prepares alice.
async fn newcomer(w: &World) -> (TxId, PrepareReply) {
    let tx = TxId::random();
    let req = prepare_req(
        &tx,
        w.clock.now_ms() + 5_000,
        "alice",
        json!({"set": {"note": "t2"}}),
    );
    let reply = w.prepare("accounts", &req).await;
    (tx, reply)
}

async fn lock_owner(w: &World, service: &str, id: &str) -> Option<TxId> {
    w.item(service, id)
        .await
        .and_then(|i| i.lock)
        .map(|l| l.tx_id)
}

#[tokio::test]
async fn expired_lock_of_a_preparing_owner_past_its_deadline_is_aborted_then_taken() {
    let w = World::new().await;
    bank(&w).await;
    let owner = stuck_owner(&w, TxStatus::Preparing).await;
    let (t2, reply) = newcomer(&w).await;
    assert!(reply.vote.is_yes(), "{:?}", reply.vote);
    assert_eq!(
        w.log
            .get(&owner.tx_id)
            .await
            .expect("get")
            .expect("rec")
            .status,
        TxStatus::Aborting
    );
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(alice.lock.map(|l| l.tx_id), Some(t2));
    assert_eq!(
        alice.fence.get(&owner.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    // The owner's other lock is finished by recovery, from the record alone.
    let done = w
        .coordinator
        .recover(w.log.get(&owner.tx_id).await.expect("get").expect("rec"))
        .await
        .expect("recover");
    assert_eq!(done.status, TxStatus::Aborted);
    assert_eq!(lock_owner(&w, "wallets", "bob").await, None);
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("0")
    );
}

#[tokio::test]
async fn expired_lock_of_a_committing_owner_is_rolled_forward_not_stolen() {
    let w = World::new().await;
    bank(&w).await;
    let owner = stuck_owner(&w, TxStatus::Committing).await;
    let resolution = w
        .participant
        .resolve(
            &w.accounts,
            &key("alice"),
            &w.item("accounts", "alice")
                .await
                .expect("alice")
                .lock
                .expect("lock"),
        )
        .await
        .expect("resolve");
    assert_eq!(resolution, Resolved::RolledForward);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90"),
        "the owner's debit must be applied"
    );
    let (t2, reply) = newcomer(&w).await;
    assert!(reply.vote.is_yes(), "{:?}", reply.vote);
    assert_eq!(lock_owner(&w, "accounts", "alice").await, Some(t2));
    let done = w
        .coordinator
        .recover(w.log.get(&owner.tx_id).await.expect("get").expect("rec"))
        .await
        .expect("recover");
    assert_eq!(done.status, TxStatus::Committed);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90"),
        "applied exactly once"
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("10")
    );
}

#[tokio::test]
async fn expired_lock_of_an_aborting_owner_is_released_unapplied() {
    let w = World::new().await;
    bank(&w).await;
    let owner = stuck_owner(&w, TxStatus::Aborting).await;
    let (t2, reply) = newcomer(&w).await;
    assert!(reply.vote.is_yes(), "{:?}", reply.vote);
    assert_eq!(lock_owner(&w, "accounts", "alice").await, Some(t2));
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(
        alice.fence.get(&owner.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
}

#[tokio::test]
async fn expired_lock_of_an_aborted_owner_is_released_unapplied() {
    let w = World::new().await;
    bank(&w).await;
    let owner = stuck_owner(&w, TxStatus::Aborted).await;
    let (t2, reply) = newcomer(&w).await;
    assert!(reply.vote.is_yes(), "{:?}", reply.vote);
    assert_eq!(lock_owner(&w, "accounts", "alice").await, Some(t2));
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    assert_eq!(
        w.log
            .get(&owner.tx_id)
            .await
            .expect("get")
            .expect("rec")
            .status,
        TxStatus::Aborted
    );
}

#[tokio::test]
async fn expired_lock_of_a_committed_owner_is_a_stale_duplicate_dropped_without_applying() {
    let w = World::new().await;
    bank(&w).await;
    let owner = stuck_owner(&w, TxStatus::Committed).await;
    let lock = w
        .item("accounts", "alice")
        .await
        .expect("alice")
        .lock
        .expect("lock");
    assert_eq!(
        w.participant
            .resolve(&w.accounts, &key("alice"), &lock)
            .await
            .expect("resolve"),
        Resolved::DroppedStale
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100"),
        "a stale lock's op is never applied"
    );
    let (t2, reply) = newcomer(&w).await;
    assert!(reply.vote.is_yes(), "{:?}", reply.vote);
    assert_eq!(lock_owner(&w, "accounts", "alice").await, Some(t2));
    assert_eq!(
        w.log
            .get(&owner.tx_id)
            .await
            .expect("get")
            .expect("rec")
            .status,
        TxStatus::Committed
    );
}

#[tokio::test]
async fn expired_lock_whose_owner_never_began_gets_an_aborted_record() {
    let w = World::new().await;
    bank(&w).await;
    let ghost = TxId::random();
    let lock = Lock {
        tx_id: ghost.clone(),
        expires_at: w.clock.now_ms() + 1_000,
        began: w.clock.now_ms(),
        op: op(json!({"add": {"balance": -50}})),
        coordinator: "ghost".into(),
    };
    let locked = w
        .participant
        .store()
        .prepare(&w.accounts, &key("alice"), &lock, None)
        .await
        .expect("raw prepare");
    assert!(matches!(locked, PrepareWrite::Locked { .. }));
    w.clock.advance(1_001);
    let (t2, reply) = newcomer(&w).await;
    assert!(reply.vote.is_yes(), "{:?}", reply.vote);
    let rec = w.log.get(&ghost).await.expect("get").expect("created");
    assert_eq!(rec.status, TxStatus::Aborted);
    assert_eq!(lock_owner(&w, "accounts", "alice").await, Some(t2));
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
}

#[tokio::test]
async fn unexpired_lock_is_never_resolved() {
    let w = World::new().await;
    bank(&w).await;
    let tx = TxId::random();
    let deadline = w.clock.now_ms() + 1_000;
    w.prepare(
        "accounts",
        &prepare_req(&tx, deadline, "alice", json!({"add": {"balance": -1}})),
    )
    .await;
    let (_, reply) = newcomer(&w).await;
    assert_eq!(reason(&reply), Some(VoteReason::Conflict));
    assert!(
        w.log.get(&tx).await.expect("get").is_none(),
        "nothing may be written about a live owner"
    );
}

// ---------------------------------------------------------------- the decide race

/// Delivers prepares normally; when the last one is answered, a resolver aborts the
/// transaction past its deadline, before the coordinator writes its decision.
struct ResolverWinsRace<'a> {
    world: &'a World,
    inner: &'a twopc_tests::TestTransport,
    answered: AtomicUsize,
}

impl Transport for ResolverWinsRace<'_> {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        let reply = self.inner.prepare(target, req).await?;
        if self.answered.fetch_add(1, Ordering::SeqCst) == 1 {
            self.world
                .clock
                .advance(req.deadline - self.world.clock.now_ms() + 1);
            let now = self.world.clock.now_ms();
            let record = self
                .world
                .log
                .get(&req.tx_id)
                .await
                .expect("get")
                .expect("the record");
            let swap = self
                .world
                .log
                .transition(&record, TxStatus::Aborting, None, now)
                .await
                .expect("resolver swap");
            assert!(matches!(swap, Swapped::Done(_)));
        }
        Ok(reply)
    }
    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        self.inner.commit(target, req).await
    }
    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        self.inner.abort(target, req).await
    }
    async fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        self.inner.inquire(target, req).await
    }
}

#[tokio::test]
async fn coordinator_losing_the_decide_race_follows_the_recorded_abort() {
    let w = World::new().await;
    bank(&w).await;
    let direct = twopc_core::direct::DirectTransport::new(w.participant.clone());
    let racing = ResolverWinsRace {
        world: &w,
        inner: &direct,
        answered: AtomicUsize::new(0),
    };
    let coordinator = twopc_core::coordinator::Coordinator::new(
        w.log.clone(),
        racing,
        w.clock.clone(),
        w.coordinator.config().clone(),
    );
    let rec = coordinator
        .submit_to_end(&transfer("alice", "bob", 10), None)
        .await
        .expect("submit");
    assert_eq!(
        rec.status,
        TxStatus::Aborted,
        "both voted yes, but the recorded decision is abort"
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("0")
    );
    assert_unlocked(&w).await;
}

// ---------------------------------------------------------------- exact numbers

#[tokio::test]
async fn point_one_plus_point_two_is_exactly_point_three() {
    let w = World::new().await;
    w.seed(
        "accounts",
        "alice",
        serde_json::from_str(r#"{"balance": 0.1}"#).expect("json"),
    )
    .await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    let body: Value = serde_json::from_str(
        r#"{"participants": [
        {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": 0.2}}},
        {"participant": "wallets", "key": {"id": "bob"}, "op": {"add": {"balance": "-0.2"}}}]}"#,
    )
    .expect("json");
    let rec = w
        .coordinator
        .submit_to_end(&body, None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Committed);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("0.3")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("-0.2")
    );
}

#[tokio::test]
async fn thirty_eight_digit_values_survive_a_transaction_exactly() {
    let w = World::new().await;
    w.seed(
        "accounts",
        "alice",
        serde_json::from_str(r#"{"balance": 9999999999999999999999999999999999999}"#)
            .expect("json"),
    )
    .await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    let body: Value = serde_json::from_str(r#"{"participants": [
        {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": 1}, "require": {"balance": {"gte": 9999999999999999999999999999999999998}}}},
        {"participant": "wallets", "key": {"id": "bob"}, "op": {"set": {"exact": 1234567890123456789.0123456789012345678}}}]}"#).expect("json");
    let rec = w
        .coordinator
        .submit_to_end(&body, None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Committed, "{:?}", rec.votes);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("10000000000000000000000000000000000000")
    );
    assert_eq!(
        w.attr("wallets", "bob", "exact").await.as_deref(),
        Some("1234567890123456789.0123456789012345678")
    );
    // The record keeps the operation's digits too.
    let stored = w.log.get(&rec.tx_id).await.expect("get").expect("rec");
    assert_eq!(
        stored.participants[1].op.set["exact"].to_string(),
        "1234567890123456789.0123456789012345678"
    );
}

// ---------------------------------------------------------------- idempotency

#[tokio::test]
async fn idempotency_key_replay_returns_the_same_transaction_applied_once() {
    let w = World::new().await;
    bank(&w).await;
    let first = w
        .coordinator
        .submit_to_end(&transfer("alice", "bob", 10), Some("order-1"))
        .await
        .expect("first");
    let again = w
        .coordinator
        .submit_to_end(&transfer("alice", "bob", 10), Some("order-1"))
        .await
        .expect("replay");
    assert_eq!(first.tx_id, again.tx_id);
    assert_eq!(again.status, TxStatus::Committed);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90")
    );
    assert_eq!(w.tx_count().await, 1);
}

#[tokio::test]
async fn idempotency_key_with_another_body_is_refused() {
    let w = World::new().await;
    bank(&w).await;
    w.coordinator
        .submit_to_end(&transfer("alice", "bob", 10), Some("order-2"))
        .await
        .expect("first");
    let err = w
        .coordinator
        .submit_to_end(&transfer("alice", "bob", 20), Some("order-2"))
        .await
        .unwrap_err();
    match err {
        SubmitError::Request(e) => {
            assert_eq!(e.code, codes::IDEMPOTENCY_KEY_REUSED);
            assert_eq!(e.http_status(), 409);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90")
    );
}

#[tokio::test]
async fn idempotency_key_replay_spelling_a_number_otherwise_is_the_same_transaction() {
    // GIVEN a keyed transfer of 10
    let w = World::new().await;
    bank(&w).await;
    let first = w
        .coordinator
        .submit_to_end(&transfer("alice", "bob", 10), Some("order-3"))
        .await
        .expect("first");
    // WHEN it is retried with the amount spelled 10.0, 1E1 or 10.000
    for spelling in ["10.0", "1E1", "10.000"] {
        let body: Value = serde_json::from_str(&format!(
            r#"{{"participants": [
            {{"participant": "accounts", "key": {{"id": "alice"}}, "op": {{"add": {{"balance": -{spelling}}}, "require": {{"balance": {{"gte": {spelling}}}}}}}}},
            {{"participant": "wallets", "key": {{"id": "bob"}}, "op": {{"add": {{"balance": {spelling}}}}}}}]}}"#
        ))
        .expect("json");
        // THEN it is a replay of the same transaction, applied once (DynamoDB reads the numbers
        // by value, and so does the request's hash)
        let again = w
            .coordinator
            .submit_to_end(&body, Some("order-3"))
            .await
            .unwrap_or_else(|e| panic!("{spelling}: {e:?}"));
        assert_eq!(
            (&again.tx_id, again.created_at),
            (&first.tx_id, first.created_at)
        );
    }
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("90")
    );
    assert_eq!(w.tx_count().await, 1);
}

// ---------------------------------------------------------------- bad input

#[tokio::test]
async fn bad_requests_are_refused_before_anything_is_written() {
    let w = World::new().await;
    bank(&w).await;
    let before = (
        w.item("accounts", "alice").await,
        w.item("wallets", "bob").await,
    );
    let cases = [
        (
            json!({"participants": [{"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": 1}, "require": {"balance": {"between": [1, 2]}}}}]}),
            codes::INVALID_OPERATION,
        ),
        (json!({"participants": []}), codes::INVALID_REQUEST),
        (
            json!({"participants": [
            {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": -1}}},
            {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": 1}}}]}),
            codes::DUPLICATE_ITEM,
        ),
        (
            json!({"participants": [{"participant": "accounts", "key": {"id": "alice"}, "op": {"set": {"balance = :v0, admin": true}}}]}),
            codes::INVALID_ATTRIBUTE_NAME,
        ),
        (
            json!({"participants": [{"participant": "accounts", "key": {"id": "alice"}, "op": {"require": {"#n0) OR attribute_exists(#n0": "exists"}}}]}),
            codes::INVALID_ATTRIBUTE_NAME,
        ),
        (
            json!({"participants": [{"participant": "ledger", "key": {"id": "alice"}, "op": {"delete": true}}]}),
            codes::UNKNOWN_PARTICIPANT,
        ),
        (
            json!({"participants": [{"participant": "accounts", "key": {"id": "alice"}, "op": {"set": {"lock": 1}}}]}),
            codes::INVALID_ATTRIBUTE_NAME,
        ),
    ];
    for (body, code) in cases {
        match w.coordinator.submit_to_end(&body, None).await {
            Err(SubmitError::Request(e)) => assert_eq!(e.code, code, "{body}: {}", e.message),
            other => panic!("{body}: expected {code}, got {other:?}"),
        }
    }
    assert_eq!(w.tx_count().await, 0, "a refused request writes no record");
    assert_eq!(
        (
            w.item("accounts", "alice").await,
            w.item("wallets", "bob").await
        ),
        before
    );
}

/// A transfer that also sets `note` on alice to `bytes` bytes of text.
fn noted_transfer(bytes: usize) -> Value {
    json!({"participants": [
        {"participant": "accounts", "key": {"id": "alice"},
         "op": {"add": {"balance": -1}, "set": {"note": "n".repeat(bytes)}}},
        {"participant": "wallets", "key": {"id": "bob"}, "op": {"add": {"balance": 1}}}]})
}

/// Neither item changed, and nothing holds either.
async fn assert_untouched(w: &World) {
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(alice.lock, None, "{:?}", alice.lock);
    assert_eq!(w.attr("accounts", "alice", "note").await, None);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("0")
    );
    assert_eq!(w.item("wallets", "bob").await.and_then(|b| b.lock), None);
}

#[tokio::test]
async fn a_set_dynamodb_cannot_store_on_the_item_votes_invalid_never_unreachable() {
    // GIVEN alice's item near DynamoDB's 400 KB, a record small enough to write
    let w = World::new().await;
    let blob = "b".repeat(390_000);
    w.seed("accounts", "alice", json!({"balance": 100, "blob": blob}))
        .await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    let body = noted_transfer(30_000);
    for mode in [CommitMode::Classic, CommitMode::Staged] {
        // WHEN a set would grow it past the limit
        let r = w.coordinator_in(mode).submit_to_end(&body, None).await;
        // THEN the hold cannot be written either: alice's prepare votes no `invalid`, saying the
        // store refused it (not `unreachable`, which reads as "try again"),
        let r = r.unwrap_or_else(|e| panic!("{mode:?}: {e:?}"));
        assert_eq!(r.status, TxStatus::Aborted, "{mode:?}");
        match &r.votes[0] {
            Vote::No { reason, message } => {
                assert_eq!(*reason, VoteReason::Invalid, "{mode:?}: {message}");
                assert!(message.contains("refused"), "{mode:?}: {message}");
            }
            other => panic!("{mode:?}: {other:?}"),
        }
        // AND the answer is the abort's 409 `invalid`, and nothing was applied or left held.
        let answer = twopc_core::api::submitted(&Submitted::of(r.clone()));
        assert_eq!(answer.status, 409, "{mode:?}");
        assert_eq!(answer.body["code"], codes::VOTE_INVALID.name, "{mode:?}");
        assert_untouched(&w).await;
    }
    // AND natively the whole write is refused: 400 `invalid_for_store`, no record.
    let before = w.tx_count().await;
    match w.coordinator_in(CommitMode::Auto).submit(&body, None).await {
        Err(SubmitError::Request(e)) => assert_eq!(e.code, codes::INVALID_FOR_STORE, "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(w.tx_count().await, before);
    assert_untouched(&w).await;
}

#[tokio::test]
async fn a_record_dynamodb_cannot_store_is_refused_invalid_for_store_never_retry() {
    // GIVEN a transaction whose record alone is past DynamoDB's 400 KB (the API's body limit
    // keeps such requests out; the coordinator does not count on it)
    let w = World::new().await;
    bank(&w).await;
    let body = noted_transfer(420_000);
    for mode in CommitMode::ALL {
        // WHEN it is submitted, with the record put before the prepares (classic), with them
        // (staged) or as one native write (auto)
        let r = w.coordinator_in(mode).submit(&body, None).await;
        // THEN it is a 400 that says the store refused it, never 503 "retry",
        match r {
            Err(SubmitError::Request(e)) => {
                assert_eq!(e.code, codes::INVALID_FOR_STORE, "{mode:?}: {e}");
                let answer = twopc_core::api::failed(&SubmitError::Request(e));
                assert_eq!(answer.status, 400, "{mode:?}");
            }
            other => panic!("{mode:?}: {other:?}"),
        }
        // AND nothing was written.
        assert_eq!(w.tx_count().await, 0, "{mode:?}");
        assert_untouched(&w).await;
    }
}
