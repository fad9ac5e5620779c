//! A prepare that finds its transaction already held here: with the same payload (its numbers
//! spelled however) it is a retry and answers yes again without a call; with another payload it
//! is not, and is refused without a call, the held state keeping its payload. A state of another
//! `began` under the id is no duplicate: a key used again after its window is a new transaction. Run on both state
//! stores: [`MemoryStates`], and [`DynamoStates`] on DynamoDB Local, which gives numbers back by
//! value (`12.50` as `12.5`).

mod common;

use std::sync::{Arc, Mutex};

use serde_json::Value;
use twopc_core::decimal::canonical_json;
use twopc_core::ids::TxId;
use twopc_core::memory::MemoryTxLog;
use twopc_core::message::{CompleteReply, CompleteRequest, PrepareRequest};
use twopc_core::op::Operation;
use twopc_core::ports::{Clock, ManualClock, SystemClock};
use twopc_core::record::{Vote, VoteReason};
use twopc_participant_sdk::state::Phase;
use twopc_participant_sdk::{
    Call, DynamoStates, HookError, Hooks, MemoryStates, Reservation, SdkParticipant, StateStore,
};

/// Holds anything; counts its `reserve` calls.
#[derive(Clone, Default)]
struct Counter(Arc<Mutex<usize>>);

impl Hooks for Counter {
    type Payload = Value;

    async fn reserve(&self, _: Call<'_, Value>) -> Result<Reservation, HookError> {
        *self.0.lock().expect("count") += 1;
        Ok(Reservation::Held)
    }
    async fn confirm(&self, _: Call<'_, Value>) -> Result<(), HookError> {
        Ok(())
    }
    async fn cancel(&self, _: Call<'_, Value>) -> Result<(), HookError> {
        Ok(())
    }
}

async fn memory() -> MemoryStates {
    MemoryStates::default()
}

async fn dynamodb() -> DynamoStates {
    common::dynamodb_states("d").await
}

/// A prepare of `tx` (begun when the tests started: a transaction is its id and its `began`).
fn prepare(tx: &TxId, payload: &str) -> PrepareRequest {
    static STARTED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let now = *STARTED.get_or_init(|| SystemClock.now_ms());
    PrepareRequest {
        tx_id: tx.clone(),
        deadline: now + 60_000,
        began: now,
        key: Default::default(),
        op: Operation::default(),
        coordinator: "duplicates test".into(),
        payload: Some(serde_json::from_str(payload).expect("a payload")),
        hot_until: None,
    }
}

async fn a_held_transaction_is_prepared_again_only_with_its_own_payload<S: StateStore + Clone>(
    states: S,
) {
    let hooks = Counter::default();
    let participant = SdkParticipant::builder(hooks.clone())
        .states(states.clone())
        .log(MemoryTxLog::default())
        .clock(ManualClock::new(SystemClock.now_ms()))
        .build();
    let tx = TxId::random();
    // GIVEN the transaction holds the participant with a payment of 12.50.
    let first = participant
        .prepare(&prepare(&tx, r#"{"card": "4242", "amount": 12.50}"#))
        .await
        .expect("prepare");
    assert!(first.vote.is_yes(), "{first:?}");
    // WHEN a prepare of it carries another payment
    let other = participant
        .prepare(&prepare(&tx, r#"{"card": "4242", "amount": 99}"#))
        .await
        .expect("prepare");
    // THEN it is refused, invalid, and the state keeps the first payment
    match &other.vote {
        Vote::No { reason, .. } => assert_eq!(*reason, VoteReason::Invalid),
        yes => panic!("another payload was taken for a retry: {yes:?}"),
    }
    let state = states.get(&tx).await.expect("get").expect("a state");
    assert_eq!(state.phase, Phase::Reserved);
    assert_eq!(
        canonical_json(state.payload.as_ref().expect("payload")),
        canonical_json(&serde_json::from_str(r#"{"card": "4242", "amount": 12.5}"#).expect("json"))
    );
    // AND a retry with the first payment, its amount spelled otherwise, is yes again.
    let retry = participant
        .prepare(&prepare(&tx, r#"{"card": "4242", "amount": 12.5}"#))
        .await
        .expect("prepare");
    assert!(retry.vote.is_yes(), "{retry:?}");
    // AND reserve ran once.
    assert_eq!(*hooks.0.lock().expect("count"), 1);
}

async fn a_key_used_again_after_its_window_is_a_new_transaction_here<S: StateStore + Clone>(
    states: S,
) {
    let hooks = Counter::default();
    let clock = ManualClock::new(SystemClock.now_ms());
    let participant = SdkParticipant::builder(hooks.clone())
        .states(states.clone())
        .log(MemoryTxLog::default())
        .clock(clock.clone())
        .build();
    let tx = TxId::for_idempotency_key("order-42");
    let at = |began: u64| PrepareRequest {
        deadline: began + 60_000,
        began,
        ..prepare(&tx, r#"{"card": "4242", "amount": 12.50}"#)
    };
    let commit = |req: &PrepareRequest| CompleteRequest {
        tx_id: req.tx_id.clone(),
        deadline: req.deadline,
        began: req.began,
        key: req.key.clone(),
        op: Operation::default(),
        prune: None,
        refused: false,
    };
    // GIVEN the key's transaction committed here.
    let first = at(clock.now_ms());
    assert!(
        participant
            .prepare(&first)
            .await
            .expect("prepare")
            .vote
            .is_yes()
    );
    let done = participant.commit(&commit(&first)).await.expect("commit");
    assert_eq!(done, CompleteReply::Done);
    // WHEN, a week later (its record expired), the same key begins a transaction again
    clock.advance(7 * 24 * 3_600_000 + 1);
    let again = at(clock.now_ms());
    let vote = participant.prepare(&again).await.expect("prepare");
    // THEN it is a new transaction: reserved (the hook called again) and committed.
    assert!(
        vote.vote.is_yes(),
        "the former's state taken for its own: {vote:?}"
    );
    let done = participant.commit(&commit(&again)).await.expect("commit");
    assert_eq!(done, CompleteReply::Done);
    assert_eq!(*hooks.0.lock().expect("count"), 2);
    let state = states.get(&tx).await.expect("get").expect("a state");
    assert_eq!((state.phase, state.began), (Phase::Confirmed, again.began));
    // AND the first transaction's late prepare is no retry of the new one's.
    let late = participant.prepare(&first).await.expect("prepare");
    assert!(!late.vote.is_yes(), "{late:?}");
    // AND its late abort replaces nothing of the new one's.
    let late = participant.abort(&commit(&first)).await;
    assert!(late.is_err(), "{late:?}");
    let state = states.get(&tx).await.expect("get").expect("a state");
    assert_eq!((state.phase, state.began), (Phase::Confirmed, again.began));
}

mod memory {
    #[tokio::test]
    async fn a_held_transaction_is_prepared_again_only_with_its_own_payload() {
        super::a_held_transaction_is_prepared_again_only_with_its_own_payload(
            super::memory().await,
        )
        .await;
    }

    #[tokio::test]
    async fn a_key_used_again_after_its_window_is_a_new_transaction_here() {
        super::a_key_used_again_after_its_window_is_a_new_transaction_here(super::memory().await)
            .await;
    }
}

mod dynamodb {
    #[tokio::test]
    async fn a_held_transaction_is_prepared_again_only_with_its_own_payload() {
        super::a_held_transaction_is_prepared_again_only_with_its_own_payload(
            super::dynamodb().await,
        )
        .await;
    }

    #[tokio::test]
    async fn a_key_used_again_after_its_window_is_a_new_transaction_here() {
        super::a_key_used_again_after_its_window_is_a_new_transaction_here(super::dynamodb().await)
            .await;
    }
}
