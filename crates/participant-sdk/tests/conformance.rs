//! The conformance kit, each check a named test, against a small example participant: a card
//! gateway in memory that authorises an amount in `reserve`, captures it in `confirm` and voids
//! it in `cancel`. Then every check at once, with the state in DynamoDB Local
//! (`TWOPC_DYNAMODB_ENDPOINT`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use twopc_core::decimal::Decimal;
use twopc_core::ids::TxId;
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};
use twopc_participant_sdk::conformance::{self, Kit, Subject};
use twopc_participant_sdk::{Call, DynamoStates, HookError, Hooks, MemoryStates, Reservation};

/// Authorisations and captures, by transaction. Amounts stay decimal text, never `f64`.
#[derive(Clone, Default)]
struct CardGateway {
    held: Arc<Mutex<BTreeMap<TxId, Decimal>>>,
    captured: Arc<Mutex<BTreeMap<TxId, Decimal>>>,
}

impl CardGateway {
    fn payment(payload: &Value) -> Result<(String, Decimal), String> {
        let card = payload["card"].as_str().ok_or("missing \"card\"")?;
        let amount = match &payload["amount"] {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return Err("missing \"amount\"".into()),
        };
        let amount = Decimal::parse(&amount).map_err(|e| e.to_string())?;
        if amount.is_negative() {
            return Err("a negative amount".into());
        }
        Ok((card.to_owned(), amount))
    }
}

impl Hooks for CardGateway {
    async fn reserve(&self, call: Call<'_>) -> Result<Reservation, HookError> {
        let (card, amount) = match Self::payment(call.payload) {
            Ok(p) => p,
            Err(why) => return Ok(Reservation::invalid(why)),
        };
        if card == "declined" {
            return Ok(Reservation::condition("the card was declined"));
        }
        let mut held = self.held.lock().map_err(|_| HookError::new("poisoned"))?;
        held.insert(call.tx_id.clone(), amount);
        Ok(Reservation::Held)
    }

    async fn confirm(&self, call: Call<'_>) -> Result<(), HookError> {
        let mut held = self.held.lock().map_err(|_| HookError::new("poisoned"))?;
        let mut captured = self
            .captured
            .lock()
            .map_err(|_| HookError::new("poisoned"))?;
        // Idempotent per transaction: a repeated capture finds it captured.
        if let Some(amount) = held.remove(call.tx_id) {
            captured.insert(call.tx_id.clone(), amount);
        }
        Ok(())
    }

    async fn cancel(&self, call: Call<'_>) -> Result<(), HookError> {
        let mut held = self.held.lock().map_err(|_| HookError::new("poisoned"))?;
        held.remove(call.tx_id);
        Ok(())
    }
}

async fn example() -> Subject<CardGateway> {
    Subject {
        hooks: CardGateway::default(),
        store: MemoryStates::default(),
        valid: serde_json::from_str(r#"{"card": "4242", "amount": 12.50}"#).expect("json"),
        invalid: json!({"card": 4242}),
    }
}

twopc_participant_sdk::conformance_tests!(example().await);

#[tokio::test]
async fn every_check_passes_with_the_state_in_dynamodb() {
    let endpoint = std::env::var("TWOPC_DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("TWOPC_DYNAMODB_ENDPOINT is not set: run under infra/dynamodb-local.sh run")
    });
    let client = twopc_dynamo::client(Some(&endpoint)).await;
    let name = format!("c{}-payments-state", &TxId::random().as_str()[..8]);
    let spec = TableSpec {
        name: name.clone(),
        kind: TableKind::ParticipantState,
    };
    ensure_table(&client, &spec).await.expect("create table");
    conformance::check_all(|| async {
        let e = example().await;
        Subject {
            hooks: e.hooks,
            store: DynamoStates::new(client.clone(), &name),
            valid: e.valid,
            invalid: e.invalid,
        }
    })
    .await;
}

#[tokio::test]
async fn the_example_captures_what_it_held_and_voids_the_rest() {
    // The kit counts calls; this checks the example's own effect once, through the library.
    let subject = example().await;
    let gateway = subject.hooks.clone();
    let kit = Kit::new(subject);
    let paid = kit.begin().await;
    let voided = kit.begin().await;
    assert!(kit.send_prepare(&paid).await.vote.is_yes());
    assert!(kit.send_prepare(&voided).await.vote.is_yes());
    kit.send_commit(&paid).await;
    kit.send_abort(&voided).await;
    let captured = gateway.captured.lock().expect("captured").clone();
    assert_eq!(
        captured.get(&paid.id).map(Decimal::as_str),
        Some("12.50"),
        "exact"
    );
    assert!(
        gateway.held.lock().expect("held").is_empty(),
        "no hold left"
    );
    assert!(!captured.contains_key(&voided.id));
}

#[tokio::test]
async fn the_wire_form_a_lambda_receives_is_answered_by_the_same_driver() {
    let kit = Kit::new(example().await);
    let tx = kit.begin().await;
    let call = twopc_core::message::ParticipantCall::Prepare(kit.prepare(&tx));
    let reply = kit
        .participant()
        .handle(call.to_json())
        .await
        .expect("prepare");
    assert_eq!(reply["vote"], json!("yes"), "{reply}");
    let call = twopc_core::message::ParticipantCall::Abort(kit.complete(&tx));
    let reply = kit
        .participant()
        .handle(call.to_json())
        .await
        .expect("abort");
    assert_eq!(reply["result"], json!("done"), "{reply}");
    let bad = kit.participant().handle(json!({"action": "explode"})).await;
    assert!(bad.is_err(), "{bad:?}");
}
