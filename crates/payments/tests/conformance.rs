//! The payments example passes the SDK's conformance kit, each check a named test, and its
//! gateway captures what a commit confirms, voids what an abort cancels and declines what it
//! was told to.

use serde_json::{Value, json};
use twopc_participant_sdk::conformance::{Kit, Subject, TxStatus};
use twopc_participant_sdk::{MemoryStates, Vote, VoteReason};

use payments::{CardGateway, Payment};

fn payment() -> Value {
    serde_json::from_str(r#"{"card": "4242", "amount": 12.50}"#).expect("json")
}

fn subject(gateway: CardGateway) -> Subject<CardGateway> {
    Subject {
        hooks: gateway,
        store: MemoryStates::default(),
        valid: payment(),
        invalid: json!({"card": "4242", "amount": -1}),
    }
}

twopc_participant_sdk::conformance_tests!(subject(CardGateway::default()));

#[tokio::test]
async fn a_commit_captures_the_authorisation_and_an_abort_voids_it() {
    let gateway = CardGateway::default();
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
    let ledger: Vec<Value> = gateway
        .authorisations()
        .iter()
        .map(|a| a.to_json())
        .collect();
    assert_eq!(
        ledger,
        [
            json!({"txId": paid.id, "card": "4242", "amount": payment()["amount"], "status": "captured"}),
            json!({"txId": voided.id, "card": "4242", "amount": payment()["amount"], "status": "voided"}),
        ],
        "in the order authorised, the amount's exact text"
    );
    assert_eq!(ledger[0]["amount"].to_string(), "12.50");
}

#[tokio::test]
async fn a_declined_card_is_a_condition_no_and_holds_nothing() {
    let gateway = CardGateway::default();
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
    // Exact: 38 significant digits survive (an f64 would keep 17).
    let long = json!({"card": "4242", "amount": serde_json::from_str::<Value>("1234567890123456789012345678.9012345678").expect("json")});
    let p = serde_json::from_value::<Payment>(long).expect("valid");
    assert_eq!(p.amount.as_str(), "1234567890123456789012345678.9012345678");
    let read = |v: &Value| serde_json::from_value::<Payment>(v.clone());
    let ok = read(&payment()).expect("valid");
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
        assert!(read(&bad).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn an_unreadable_payload_is_an_invalid_vote_saying_why() {
    let gateway = CardGateway::default();
    let kit = Kit::new(Subject {
        valid: json!({"card": "4242", "amount": 1, "tip": 1}),
        ..subject(gateway.clone())
    });
    let tx = kit.begin().await;
    let reply = kit.send_prepare(&tx).await;
    let Vote::No { reason, message } = &reply.vote else {
        panic!("{reply:?}");
    };
    assert_eq!(*reason, VoteReason::Invalid);
    assert!(message.contains("unknown field `tip`"), "{message}");
    assert!(gateway.authorisations().is_empty(), "no hook was called");
}
