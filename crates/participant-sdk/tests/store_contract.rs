//! One contract for the state store, run against both implementations: [`MemoryStates`] (what
//! the conformance kit and fast tests run on) and [`DynamoStates`] on DynamoDB Local
//! (`TWOPC_DYNAMODB_ENDPOINT`, as `make test` and `infra/dynamodb-local.sh run` set it). Each
//! case states what the port promises; `memory::*` and `dynamodb::*` run the same case.

mod common;

use serde_json::json;
use twopc_core::ids::TxId;
use twopc_core::ports::{Clock, SystemClock};
use twopc_participant_sdk::state::{Phase, TxState};
use twopc_participant_sdk::{DynamoStates, MemoryStates, StateStore, Written};

async fn memory() -> MemoryStates {
    MemoryStates::default()
}

async fn dynamodb() -> DynamoStates {
    common::dynamodb_states("s").await
}

/// Each case, once per implementation.
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::memory().await).await;
            })*
        }
        mod dynamodb {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::dynamodb().await).await;
            })*
        }
    };
}

contract!(
    create_writes_once_and_reports_the_state_it_found,
    replace_writes_only_over_the_previous_revision,
    overdue_lists_unfinished_states_past_their_deadline_earliest_first,
    payloads_keep_their_numbers_exactly,
    a_prevent_refuses_the_late_writes_of_the_prepare_it_overtook,
);

fn state(tx: &TxId, phase: Phase, deadline: u64) -> TxState {
    let now = SystemClock.now_ms();
    let mut s = TxState::first(tx, phase, deadline, now - 1_000, now);
    s.payload = Some(json!({"card": "4242", "amount": "12.50"}));
    s
}

async fn create_writes_once_and_reports_the_state_it_found(s: impl StateStore) {
    let tx = TxId::random();
    assert_eq!(s.get(&tx).await.expect("get"), None);
    let first = state(&tx, Phase::Reserving, 10);
    assert_eq!(s.create(&first).await.expect("create"), Written::Done);
    assert_eq!(s.get(&tx).await.expect("get"), Some(first.clone()));
    let second = state(&tx, Phase::Aborted, 20);
    assert_eq!(
        s.create(&second).await.expect("create again"),
        Written::Lost(Some(Box::new(first.clone()))),
        "the state that was there, unchanged"
    );
    assert_eq!(s.get(&tx).await.expect("get"), Some(first));
}

async fn replace_writes_only_over_the_previous_revision(s: impl StateStore) {
    let tx = TxId::random();
    let first = state(&tx, Phase::Reserving, 10);
    let held = first.moved(Phase::Reserved, None, 11);
    assert_eq!(
        s.replace(&held).await.expect("replace nothing"),
        Written::Lost(None),
        "no state: nothing to replace"
    );
    s.create(&first).await.expect("create");
    assert_eq!(s.replace(&held).await.expect("replace"), Written::Done);
    let stale = first.moved(Phase::Refused, None, 12);
    assert_eq!(
        s.replace(&stale).await.expect("stale replace"),
        Written::Lost(Some(Box::new(held.clone()))),
        "a writer that read revision 1 loses to the one that wrote revision 2"
    );
    let confirming = held.moved(Phase::Confirming, Some(99), 13);
    assert_eq!(s.replace(&confirming).await.expect("next"), Written::Done);
    assert_eq!(s.get(&tx).await.expect("get"), Some(confirming));
}

async fn overdue_lists_unfinished_states_past_their_deadline_earliest_first(s: impl StateStore) {
    // Deadlines far in the past, unique to this case, so the shared memory/table is no issue.
    let base = 1_000_000;
    let late = TxId::random();
    let later = TxId::random();
    let live = TxId::random();
    let done = TxId::random();
    s.create(&state(&later, Phase::Reserved, base + 20))
        .await
        .expect("later");
    s.create(&state(&late, Phase::Reserving, base + 10))
        .await
        .expect("late");
    s.create(&state(&live, Phase::Reserved, base + 500))
        .await
        .expect("live");
    let finished = state(&done, Phase::Reserved, base + 5);
    s.create(&finished).await.expect("done");
    s.replace(&finished.moved(Phase::Confirming, Some(1), 1))
        .await
        .expect("confirming");
    let confirmed = finished
        .moved(Phase::Confirming, Some(1), 1)
        .moved(Phase::Confirmed, None, 2);
    s.replace(&confirmed).await.expect("confirmed");
    let ids = |v: Vec<TxState>| v.into_iter().map(|s| s.tx_id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.overdue(base + 100, 10).await.expect("overdue")),
        vec![late.clone(), later.clone()],
        "finished and not-yet-due states are left out"
    );
    assert_eq!(
        ids(s.overdue(base + 100, 1).await.expect("one")),
        vec![late]
    );
}

async fn payloads_keep_their_numbers_exactly(s: impl StateStore) {
    let tx = TxId::random();
    let mut st = state(&tx, Phase::Reserving, 10);
    let payload: serde_json::Value = serde_json::from_str(
        r#"{"amount": 0.1, "big": 12345678901234567890123456789012345678, "cents": [0.20, 3]}"#,
    )
    .expect("json");
    st.payload = Some(payload.clone());
    s.create(&st).await.expect("create");
    let back = s.get(&tx).await.expect("get").expect("state");
    let got = back.payload.expect("payload");
    assert_eq!(got["amount"].to_string(), "0.1");
    assert_eq!(
        got["big"].to_string(),
        "12345678901234567890123456789012345678"
    );
    assert_eq!(got["cents"][1].to_string(), "3");
    // DynamoDB keeps a number's value, not its text: 0.20 may come back as 0.2.
    assert!(["0.20", "0.2"].contains(&got["cents"][0].to_string().as_str()));
}

/// The two writes an inquiry's prevent makes (`Phase::inquire`), and the late writes of the
/// prepare each must refuse: ending a claim under way refuses the hook's result (written over
/// the claim's revision); recording an unknown transaction aborted refuses its claim.
async fn a_prevent_refuses_the_late_writes_of_the_prepare_it_overtook(s: impl StateStore) {
    let tx = TxId::random();
    let mut claim = state(&tx, Phase::Reserving, 10);
    claim.claimed_until = Some(10);
    s.create(&claim).await.expect("claim");
    let ended = claim.moved(Phase::Cancelling, Some(5), 5);
    assert_eq!(s.replace(&ended).await.expect("end"), Written::Done);
    let late = claim.moved(Phase::Reserved, None, 6);
    assert_eq!(
        s.replace(&late).await.expect("late result"),
        Written::Lost(Some(Box::new(ended.clone()))),
        "the hook's result, written over the claim's revision, loses to the ended claim"
    );
    assert_eq!(s.get(&tx).await.expect("get"), Some(ended));

    let unknown = TxId::random();
    let aborted = state(&unknown, Phase::Aborted, 10);
    assert_eq!(s.create(&aborted).await.expect("prevent"), Written::Done);
    assert_eq!(
        s.create(&state(&unknown, Phase::Reserving, 10))
            .await
            .expect("late claim"),
        Written::Lost(Some(Box::new(aborted))),
        "the late prepare's claim finds the transaction aborted"
    );
}
