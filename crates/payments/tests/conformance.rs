//! The payments example passes the SDK's conformance kit, each check a named test, and its
//! gateway captures what a commit confirms, voids what an abort cancels and declines what it
//! was told to.

use serde_json::{Value, json};
use twopc_core::record::{Vote, VoteReason};
use twopc_core::status::TxStatus;
use twopc_participant_sdk::MemoryStates;
use twopc_participant_sdk::conformance::{self, Kit, Subject};

use payments::{Gateway, Payment};

fn payment() -> Value {
    serde_json::from_str(r#"{"card": "4242", "amount": 12.50}"#).expect("json")
}

fn subject(gateway: Gateway) -> Subject<Gateway> {
    Subject {
        hooks: gateway,
        store: MemoryStates::default(),
        valid: payment(),
        invalid: json!({"card": "4242", "amount": -1}),
    }
}

macro_rules! checks {
    ($($check:ident),* $(,)?) => {
        $(#[tokio::test]
        async fn $check() {
            conformance::$check(Kit::new(subject(Gateway::default()))).await;
        })*
    };
}

checks!(
    prepare_reserves_once_and_a_duplicate_gets_the_same_yes,
    an_invalid_payload_is_a_no_vote_that_holds_nothing,
    commit_confirms_once_and_a_duplicate_is_already_done,
    abort_cancels_once_and_a_duplicate_is_already_done,
    an_abort_before_its_prepare_calls_nothing_and_refuses_the_prepare,
    a_prepare_after_its_transaction_ended_is_refused,
    a_prepare_past_its_deadline_is_refused_and_holds_nothing,
    a_decision_contradicting_the_state_is_a_violation_and_calls_nothing,
    concurrent_duplicates_call_each_hook_once,
    a_failed_hook_is_called_again_by_the_next_message,
    an_interrupted_call_is_taken_over_once_its_claim_expires,
    a_silent_coordinator_is_resolved_by_the_record,
);

#[tokio::test]
async fn a_commit_captures_the_authorisation_and_an_abort_voids_it() {
    let gateway = Gateway::default();
    let kit = Kit::new(subject(gateway.clone()));
    let (paid, voided) = (kit.begin().await, kit.begin().await);
    assert!(kit.send_prepare(&paid).await.vote.is_yes());
    assert!(kit.send_prepare(&voided).await.vote.is_yes());
    assert_eq!(gateway.held().len(), 2);
    kit.decide(&paid, TxStatus::Committing).await;
    kit.send_commit(&paid).await;
    kit.decide(&voided, TxStatus::Aborting).await;
    kit.send_abort(&voided).await;
    assert!(gateway.held().is_empty(), "no hold is left");
    let captured: Vec<String> = gateway
        .captured()
        .values()
        .map(|p| p.amount.as_str().to_owned())
        .collect();
    assert_eq!(captured, ["12.50"], "the amount's exact text");
    assert_eq!(gateway.voided().len(), 1);
}

#[tokio::test]
async fn a_declined_card_is_a_condition_no_and_holds_nothing() {
    let gateway = Gateway::default();
    gateway.decline("4242");
    let kit = Kit::new(subject(gateway.clone()));
    let tx = kit.begin().await;
    let reply = kit.send_prepare(&tx).await;
    assert!(
        matches!(
            reply.vote,
            Vote::No {
                reason: VoteReason::Condition,
                ..
            }
        ),
        "{reply:?}"
    );
    assert!(gateway.held().is_empty());
}

#[test]
fn payloads_are_read_strictly() {
    let ok = Payment::from_payload(&payment()).expect("valid");
    assert_eq!((ok.card.as_str(), ok.amount.as_str()), ("4242", "12.50"));
    for bad in [
        json!("4242"),
        json!({"card": "4242"}),
        json!({"amount": 1}),
        json!({"card": "", "amount": 1}),
        json!({"card": "4242", "amount": 0}),
        json!({"card": "4242", "amount": "0.00"}),
        json!({"card": "4242", "amount": -5}),
        json!({"card": "4242", "amount": 1, "tip": 1}),
    ] {
        assert!(Payment::from_payload(&bad).is_err(), "{bad}");
    }
}
