//! A prepare that finds its transaction already held here: with the same payload (its numbers
//! spelled however) it is a retry and answers yes again without a call; with another payload it
//! is not, and is refused without a call, the held state keeping its payload. Run on both state
//! stores: [`MemoryStates`], and [`DynamoStates`] on DynamoDB Local, which gives numbers back by
//! value (`12.50` as `12.5`).

mod common;

use std::sync::{Arc, Mutex};

use serde_json::Value;
use twopc_core::decimal::canonical_json;
use twopc_core::ids::TxId;
use twopc_core::memory::MemoryTxLog;
use twopc_core::message::PrepareRequest;
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

fn prepare(tx: &TxId, payload: &str) -> PrepareRequest {
    let now = SystemClock.now_ms();
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

mod memory {
    #[tokio::test]
    async fn a_held_transaction_is_prepared_again_only_with_its_own_payload() {
        super::a_held_transaction_is_prepared_again_only_with_its_own_payload(
            super::memory().await,
        )
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
}
