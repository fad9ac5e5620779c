//! Clocks that disagree, on DynamoDB Local: a participant refuses a prepare that began further
//! ahead of its clock than the margin (`clockSkew`) and never fences such a transaction out, so
//! no clock running ahead puts an item's horizon in the future; a coordinator whose clock runs
//! ahead aborts cleanly and leaves its items as they were. (The completer's lagging clock:
//! `staged.rs`; the bank under skew: `bank.rs`.)

use serde_json::json;
use twopc_core::coordinator::{CommitMode, Coordinator};
use twopc_core::ids::TxId;
use twopc_core::message::{CompleteReply, InquireRequest, Inquiry};
use twopc_core::participant::ParticipantConfig;
use twopc_core::ports::Clock;
use twopc_core::record::{Vote, VoteReason};
use twopc_core::status::TxStatus;
use twopc_tests::{SkewedClock, SubmitToEnd, World, complete_req, prepare_req, reason, transfer};

/// The default margin (`TWOPC_FENCE_MARGIN_MS`).
const MARGIN_MS: u64 = 10_000;

/// A deadline whose transaction (the request helpers' `began`, 5 s before it) began `ahead`
/// ms ahead of the world's clock.
fn deadline_began_ahead(w: &World, ahead: u64) -> u64 {
    w.clock.now_ms() + ahead + 5_000
}

#[tokio::test]
async fn a_prepare_that_began_further_ahead_than_the_margin_is_refused_and_holds_nothing() {
    let w = World::new().await;
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    let debit = json!({"add": {"balance": -10}, "require": {"balance": {"gte": 10}}});

    let ahead = deadline_began_ahead(&w, MARGIN_MS + 1);
    let reply = w
        .prepare(
            "accounts",
            &prepare_req(&TxId::random(), ahead, "alice", debit.clone()),
        )
        .await;
    assert_eq!(reason(&reply), Some(VoteReason::ClockSkew), "{reply:?}");
    let Vote::No { message, .. } = &reply.vote else {
        unreachable!()
    };
    assert!(message.contains("10001 ms ahead"), "{message}");
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert!(alice.lock.is_none() && alice.reservations.is_empty() && alice.fence.is_empty());

    let within = deadline_began_ahead(&w, MARGIN_MS);
    let reply = w
        .prepare(
            "accounts",
            &prepare_req(&TxId::random(), within, "alice", debit),
        )
        .await;
    assert!(reply.vote.is_yes(), "within the margin: {reply:?}");
}

#[tokio::test]
async fn an_abort_of_a_transaction_from_a_clock_ahead_leaves_a_full_fences_horizon_alone() {
    // GIVEN an item whose fence is full (capacity 1, one transaction committed there)
    let w = World::with_participant_config(ParticipantConfig {
        fence_capacity: 1,
        ..ParticipantConfig::default()
    })
    .await;
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    assert_eq!(
        w.transfer("alice", "bob", 1).await.status,
        TxStatus::Committed
    );
    let before = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(before.fence.len(), 1);
    let op = json!({"set": {"memo": "x"}});

    // WHEN a transaction that began 30 s ahead, whose prepare it refused, is aborted there
    let ahead = TxId::random();
    let deadline = deadline_began_ahead(&w, 30_000);
    let mut abort = complete_req(&ahead, deadline, "alice", op.clone());
    abort.refused = true;
    assert_eq!(w.abort("accounts", &abort).await, CompleteReply::Done);

    // THEN neither an entry nor a horizon in the future: a prepare beginning now locks
    let after = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(
        (after.horizon, &after.fence),
        (before.horizon, &before.fence)
    );
    let now = prepare_req(
        &TxId::random(),
        w.clock.now_ms() + 5_000,
        "alice",
        op.clone(),
    );
    let now = twopc_core::message::PrepareRequest {
        began: w.clock.now_ms(),
        ..now
    };
    assert!(w.prepare("accounts", &now).await.vote.is_yes());

    // AND one within the margin is fenced out as always (on a full fence: the horizon)
    let w2 = World::with_participant_config(ParticipantConfig {
        fence_capacity: 1,
        ..ParticipantConfig::default()
    })
    .await;
    w2.seed("accounts", "alice", json!({"balance": 100})).await;
    w2.seed("wallets", "bob", json!({"balance": 0})).await;
    w2.transfer("alice", "bob", 1).await;
    let late = TxId::random();
    let deadline = deadline_began_ahead(&w2, 1_000);
    let mut abort = complete_req(&late, deadline, "alice", op);
    abort.refused = true;
    assert_eq!(w2.abort("accounts", &abort).await, CompleteReply::Done);
    let fenced = w2.item("accounts", "alice").await.expect("alice");
    assert_eq!(fenced.horizon, abort.began, "raised to its began");
}

#[tokio::test]
async fn a_coordinator_whose_clock_runs_ahead_aborts_with_clock_skew_and_moves_no_horizon() {
    // GIVEN a coordinator whose clock runs 30 s ahead of the participants'
    let w = World::new().await;
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    for mode in [CommitMode::Classic, CommitMode::Staged] {
        let ahead = SkewedClock::new(w.clock.clone(), 30_000);
        let config = w.coordinator_in(mode).config().clone();
        let c = Coordinator::new(w.log.clone(), w.direct(), ahead, config);

        // WHEN it runs a transfer
        let record = c
            .submit_to_end(&transfer("alice", "bob", 10), None)
            .await
            .expect("submit");

        // THEN it aborts, both items voting clockSkew, and leaves them as they were
        assert_eq!(record.status, TxStatus::Aborted, "{mode:?}");
        for vote in &record.votes {
            assert!(
                matches!(
                    vote,
                    Vote::No {
                        reason: VoteReason::ClockSkew,
                        ..
                    }
                ),
                "{mode:?}: {vote:?}"
            );
        }
        for (service, id) in [("accounts", "alice"), ("wallets", "bob")] {
            let item = w.item(service, id).await.expect("item");
            assert!(item.lock.is_none() && item.reservations.is_empty());
            assert!(item.horizon <= w.clock.now_ms(), "{service}: {item:?}");
            assert!(!item.fence.contains_key(&record.tx_id), "not fenced out");
        }
    }
    // AND a coordinator on time commits the same transfer at once
    assert_eq!(
        w.transfer("alice", "bob", 10).await.status,
        TxStatus::Committed
    );
}

#[tokio::test]
async fn a_prevent_of_a_transaction_from_a_clock_ahead_never_raises_the_horizon_past_the_margin() {
    // GIVEN an item whose fence is full (capacity 1, one transaction committed there)
    let w = World::with_participant_config(ParticipantConfig {
        fence_capacity: 1,
        ..ParticipantConfig::default()
    })
    .await;
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    w.transfer("alice", "bob", 1).await;
    let before = w.item("accounts", "alice").await.expect("alice");
    assert_eq!(before.fence.len(), 1);

    // WHEN recovery prevents a staged transaction that began 30 s ahead of the item's clock
    let ahead = TxId::random();
    let deadline = deadline_began_ahead(&w, 30_000);
    let prevent = InquireRequest {
        tx_id: ahead.clone(),
        deadline,
        began: twopc_tests::began(deadline),
        key: twopc_tests::key("alice"),
        op: None,
        payload: None,
        prevent: true,
    };
    let reply = w
        .participant
        .inquire(&w.accounts, &prevent)
        .await
        .expect("inquire");

    // THEN it is prevented for good, by its entry (beyond the capacity), never by a horizon in
    // the future: the horizon rises at most the margin past the participant's clock,
    assert_eq!(reply.inquiry, Inquiry::Prevented);
    let after = w.item("accounts", "alice").await.expect("alice");
    assert!(
        after.horizon <= w.clock.now_ms() + MARGIN_MS,
        "horizon {} is {} ms ahead",
        after.horizon,
        after.horizon.saturating_sub(w.clock.now_ms())
    );
    assert!(after.fence.contains_key(&ahead), "{:?}", after.fence);
    // AND a prepare beginning now locks the item, while the prevented one's is refused.
    let op = json!({"set": {"memo": "x"}});
    let now = twopc_core::message::PrepareRequest {
        began: w.clock.now_ms(),
        ..prepare_req(
            &TxId::random(),
            w.clock.now_ms() + 5_000,
            "alice",
            op.clone(),
        )
    };
    let reply = w.prepare("accounts", &now).await;
    assert!(reply.vote.is_yes(), "{reply:?}");
    let again = w.participant.inquire(&w.accounts, &prevent).await;
    assert_eq!(again.expect("inquire").inquiry, Inquiry::Prevented);
}
