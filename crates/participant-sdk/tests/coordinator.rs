//! The coordinator with a custom participant: a table's items in-process (`direct`) and an
//! `SdkParticipant` behind its HTTP router, reached by the coordinator's own signed `http`
//! transport, sharing one in-memory transaction log (the participant resolves by reading it).
//! The payload travels from the request, through the record, to the `reserve` hook; commit and
//! abort reach `confirm` and `cancel` by the transaction id alone. Last, the record with a
//! payload in DynamoDB Local (`TWOPC_DYNAMODB_ENDPOINT`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use twopc_core::coordinator::{CommitMode, Coordinator, CoordinatorConfig};
use twopc_core::direct::DirectTransport;
use twopc_core::ids::TxId;
use twopc_core::item::Key;
use twopc_core::memory::{MemoryItems, MemoryTxLog};
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::participant::{Participant, ParticipantConfig};
use twopc_core::ports::{
    Clock, ManualClock, ParticipantStore, SystemClock, Transport, TransportError, TxLog,
};
use twopc_core::record::{Target, TxRecord, Vote, VoteReason};
use twopc_core::request::Limits;
use twopc_core::service::{KeySchema, ServiceConfig};
use twopc_core::signing::Secret;
use twopc_core::status::TxStatus;
use twopc_participant_sdk::http::{HttpConfig, router};
use twopc_participant_sdk::{Call, HookError, Hooks, MemoryStates, Reservation, SdkParticipant};
use twopc_runtime::transport::HttpTransport;

const SECRET: &[u8] = b"shared by the coordinator and payments";
const TABLE: &str = "accounts";

/// A card gateway in miniature: holds `{"amount": n}` unless the card is `"declined"`; a payload
/// without an amount is invalid. Records each call with the payload it was given.
#[derive(Clone, Default)]
struct Payments(Arc<Mutex<Vec<HookCall>>>);

/// A hook and the payload it was given (`reserve` only).
type HookCall = (&'static str, Option<Value>);

impl Payments {
    fn note(&self, hook: &'static str, payload: Option<&Value>) {
        self.0.lock().expect("calls").push((hook, payload.cloned()));
    }
    fn calls(&self) -> Vec<HookCall> {
        self.0.lock().expect("calls").clone()
    }
}

impl Hooks for Payments {
    type Payload = Value;

    async fn reserve(&self, call: Call<'_, Value>) -> Result<Reservation, HookError> {
        self.note("reserve", Some(call.payload));
        Ok(
            match (call.payload.get("amount"), call.payload.get("card")) {
                (None, _) => Reservation::invalid("a payment needs an \"amount\""),
                (_, Some(card)) if card == "declined" => {
                    Reservation::condition("the card was declined")
                }
                _ => Reservation::Held,
            },
        )
    }
    async fn confirm(&self, _: Call<'_, Value>) -> Result<(), HookError> {
        self.note("confirm", None);
        Ok(())
    }
    async fn cancel(&self, _: Call<'_, Value>) -> Result<(), HookError> {
        self.note("cancel", None);
        Ok(())
    }
}

/// `direct` targets in-process, `http` targets over the signed transport.
struct Route<S, L, C> {
    direct: DirectTransport<S, L, C>,
    http: HttpTransport,
}

impl<S: ParticipantStore, L: TxLog, C: Clock> Transport for Route<S, L, C> {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        match target {
            Target::Http { .. } => self.http.prepare(target, req).await,
            _ => self.direct.prepare(target, req).await,
        }
    }
    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        match target {
            Target::Http { .. } => self.http.commit(target, req).await,
            _ => self.direct.commit(target, req).await,
        }
    }
    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        match target {
            Target::Http { .. } => self.http.abort(target, req).await,
            _ => self.direct.abort(target, req).await,
        }
    }
    async fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        match target {
            Target::Http { .. } => self.http.inquire(target, req).await,
            _ => self.direct.inquire(target, req).await,
        }
    }
}

struct Shop {
    items: MemoryItems,
    payments: Payments,
    coordinator:
        Coordinator<MemoryTxLog, Route<MemoryItems, MemoryTxLog, ManualClock>, ManualClock>,
}

fn key(id: &str) -> Key {
    [("id".to_owned(), json!(id))].into()
}

async fn shop() -> Shop {
    let (items, log) = (MemoryItems::default(), MemoryTxLog::default());
    // The signature's time is the system's: the participant's clock starts there.
    let clock = ManualClock::new(SystemClock.now_ms());
    items.put(
        TABLE,
        &key("alice"),
        [("balance".to_owned(), json!(100))].into(),
    );
    let payments = Payments::default();
    let sdk = SdkParticipant::builder(payments.clone())
        .states(MemoryStates::default())
        .log(log.clone())
        .clock(clock.clone())
        .build();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let app = router(sdk, HttpConfig::new(Secret::new(SECRET)));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let services: BTreeMap<String, ServiceConfig> = [
        (
            "accounts".to_owned(),
            ServiceConfig::table(
                Target::Direct {
                    table: TABLE.into(),
                },
                KeySchema::string_hash("id"),
            ),
        ),
        (
            "payments".to_owned(),
            ServiceConfig::custom(Target::Http { url }),
        ),
    ]
    .into();
    let participant = Participant::new(
        items.clone(),
        log.clone(),
        clock.clone(),
        ParticipantConfig::default(),
    );
    let coordinator = Coordinator::new(
        log,
        Route {
            direct: DirectTransport::new(participant),
            http: HttpTransport::new(Duration::from_secs(5))
                .with_signing_secret(Secret::new(SECRET)),
        },
        clock,
        CoordinatorConfig {
            id: "coordinator-test".into(),
            services,
            limits: Limits::default(),
            // Staged, as a deployment may be configured: a transaction with a custom
            // participant (which answers no inquiry) is still committed the classic way.
            mode: CommitMode::Staged,
            heat_window_ms: CoordinatorConfig::DEFAULT_HEAT_WINDOW_MS,
        },
    );
    Shop {
        items,
        payments,
        coordinator,
    }
}

fn order(payment: Value) -> Value {
    json!({"participants": [
        {"participant": "accounts", "key": {"id": "alice"},
         "op": {"add": {"balance": -10}, "require": {"balance": {"gte": 10}}}},
        {"participant": "payments", "payload": payment}]})
}

impl Shop {
    async fn submit(&self, body: Value) -> TxRecord {
        // The coordinator's one way in, then the work after the answer at once.
        let answered = self.coordinator.submit(&body, None).await.expect("submit");
        match answered.finish {
            Some(finish) => self.coordinator.finish(finish).await.expect("finish"),
            None => answered.answer.record,
        }
    }

    async fn balance(&self) -> String {
        let state = self
            .items
            .read(TABLE, &key("alice"))
            .await
            .expect("read")
            .expect("alice");
        state.attributes["balance"].to_string()
    }
}

#[tokio::test]
async fn a_custom_participant_is_given_the_payload_and_confirms_the_commit() {
    let shop = shop().await;
    let payment = json!({"card": "4242", "amount": 10.00});
    let record = shop.submit(order(payment.clone())).await;
    assert_eq!(record.status, TxStatus::Committed, "{record:?}");
    assert!(record.votes.iter().all(Vote::is_yes), "{:?}", record.votes);
    assert_eq!(
        record.participants[1].payload.as_ref(),
        Some(&payment),
        "the record keeps the payload, as it keeps operations"
    );
    assert_eq!(
        shop.payments.calls(),
        [("reserve", Some(payment)), ("confirm", None)]
    );
    assert_eq!(shop.balance().await, "90");
}

#[tokio::test]
async fn a_declined_payment_aborts_the_order_and_nothing_is_held() {
    let shop = shop().await;
    let record = shop
        .submit(order(json!({"card": "declined", "amount": 10})))
        .await;
    assert_eq!(record.status, TxStatus::Aborted, "{record:?}");
    assert!(
        matches!(
            &record.votes[1],
            Vote::No {
                reason: VoteReason::Condition,
                ..
            }
        ),
        "{:?}",
        record.votes
    );
    let hooks: Vec<&str> = shop.payments.calls().iter().map(|(h, _)| *h).collect();
    assert_eq!(
        hooks,
        ["reserve"],
        "a refused reservation holds nothing to cancel"
    );
    assert_eq!(shop.balance().await, "100", "the debit was released");
}

#[tokio::test]
async fn a_bad_payload_is_the_participants_no_vote_invalid() {
    let shop = shop().await;
    let record = shop.submit(order(json!({"card": "4242"}))).await;
    assert_eq!(record.status, TxStatus::Aborted, "{record:?}");
    assert!(
        matches!(
            &record.votes[1],
            Vote::No {
                reason: VoteReason::Invalid,
                ..
            }
        ),
        "{:?}",
        record.votes
    );
    assert_eq!(shop.balance().await, "100");
}

#[tokio::test]
async fn a_request_mixing_op_and_payload_is_refused_and_nothing_is_written() {
    let shop = shop().await;
    let body = json!({"participants": [
        {"participant": "payments", "op": {"add": {"amount": 1}}}]});
    let e = shop
        .coordinator
        .submit(&body, Some("mixed-1"))
        .await
        .expect_err("refused");
    let answer = twopc_core::api::failed(&e);
    assert_eq!(answer.status, 400);
    assert_eq!(answer.body["code"], "wrong_participant_kind");
    let tx = TxId::for_idempotency_key("mixed-1");
    assert_eq!(
        shop.coordinator.status(&tx).await.expect("read"),
        None,
        "no record"
    );
    assert!(shop.payments.calls().is_empty());
}

#[tokio::test]
async fn a_payload_is_recorded_in_dynamodb_as_given() {
    use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};
    use twopc_dynamo::txlog::DynamoTxLog;
    let endpoint = std::env::var("TWOPC_DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("TWOPC_DYNAMODB_ENDPOINT is not set: run under infra/dynamodb-local.sh run")
    });
    let client = twopc_dynamo::client(Some(&endpoint)).await;
    let table = format!("c{}-transactions", &TxId::random().as_str()[..8]);
    let spec = TableSpec {
        name: table.clone(),
        kind: TableKind::Transactions,
    };
    ensure_table(&client, &spec).await.expect("create table");
    let log = DynamoTxLog::new(client, &table);
    // More digits than a DynamoDB number holds, an empty string, a null: opaque, kept as text.
    let payment: Value = serde_json::from_str(
        r#"{"amount": 12.50, "ref": 123456789012345678901234567890123456789012, "memo": "", "x": null}"#,
    )
    .expect("json");
    let shop = shop().await;
    let request = shop
        .coordinator
        .validate(&order(payment.clone()))
        .expect("valid");
    let record = request.begin(TxId::random(), None, "test".into(), SystemClock.now_ms());
    log.create(&record).await.expect("create");
    let back = log
        .get(&record.tx_id)
        .await
        .expect("get")
        .expect("a record");
    assert_eq!(back, record);
    let kept = back.participants[1].payload.as_ref().expect("payload");
    assert_eq!(kept.to_string(), payment.to_string(), "the exact text");
}
