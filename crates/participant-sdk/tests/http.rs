//! The HTTP adapter, reached by the coordinator's own `http` transport (signing on) and by raw
//! requests for what that transport never sends: each refusal answers a JSON error with a
//! stable `code`, and no hook runs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use twopc_core::ids::TxId;
use twopc_core::memory::MemoryTxLog;
use twopc_core::message::{CompleteReply, CompleteRequest, PrepareRequest};
use twopc_core::op::Operation;
use twopc_core::ports::{Clock, ManualClock, SystemClock, Transport};
use twopc_core::record::{Target, Vote, VoteReason};
use twopc_core::signing::{self, Secret};
use twopc_participant_sdk::http::{HttpConfig, router};
use twopc_participant_sdk::{Call, HookError, Hooks, MemoryStates, Reservation, SdkParticipant};
use twopc_runtime::transport::HttpTransport;

const SECRET: &[u8] = b"shared with the coordinator";

/// Holds anything with an `amount`; records every call.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<&'static str>>>);

impl Recorder {
    fn note(&self, hook: &'static str) {
        self.0.lock().expect("calls").push(hook);
    }
    fn calls(&self) -> Vec<&'static str> {
        self.0.lock().expect("calls").clone()
    }
}

impl Hooks for Recorder {
    type Payload = Value;

    async fn reserve(&self, call: Call<'_, Value>) -> Result<Reservation, HookError> {
        self.note("reserve");
        Ok(match call.payload.get("amount") {
            Some(_) => Reservation::Held,
            None => Reservation::invalid("no amount"),
        })
    }
    async fn confirm(&self, _: Call<'_, Value>) -> Result<(), HookError> {
        self.note("confirm");
        Ok(())
    }
    async fn cancel(&self, _: Call<'_, Value>) -> Result<(), HookError> {
        self.note("cancel");
        Ok(())
    }
}

struct Served {
    url: String,
    hooks: Recorder,
    clock: ManualClock,
}

async fn serve() -> Served {
    let hooks = Recorder::default();
    let clock = ManualClock::new(SystemClock.now_ms());
    let participant = SdkParticipant::builder(hooks.clone())
        .states(MemoryStates::default())
        .log(MemoryTxLog::default())
        .clock(clock.clone())
        .build();
    let app = router(participant, HttpConfig::new(Secret::new(SECRET)));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Served { url, hooks, clock }
}

fn prepare(tx: &TxId, payload: Value) -> PrepareRequest {
    let now = SystemClock.now_ms();
    PrepareRequest {
        tx_id: tx.clone(),
        deadline: now + 60_000,
        began: now,
        key: [("id".to_owned(), json!("order-42"))].into(),
        op: Operation::default(),
        coordinator: "http test".into(),
        payload: Some(payload),
        hot_until: None,
    }
}

fn complete(p: &PrepareRequest) -> CompleteRequest {
    CompleteRequest {
        tx_id: p.tx_id.clone(),
        deadline: p.deadline,
        began: p.began,
        key: p.key.clone(),
        op: Operation::default(),
        prune: None,
        refused: false,
    }
}

fn transport(secret: Option<&[u8]>) -> HttpTransport {
    let t = HttpTransport::new(Duration::from_secs(5));
    match secret {
        Some(s) => t.with_signing_secret(Secret::new(s)),
        None => t,
    }
}

/// POSTs `body` with `headers`; the status and the JSON answer.
async fn raw(url: &str, path: &str, headers: &[(&str, String)], body: &[u8]) -> (u16, Value) {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    let status = answer[9..12].parse().expect("status");
    let json = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    (status, serde_json::from_str(json).expect("a JSON answer"))
}

#[tokio::test]
async fn the_coordinators_signed_transport_prepares_commits_and_is_answered_idempotently() {
    let s = serve().await;
    let t = transport(Some(SECRET));
    let target = Target::Http { url: s.url.clone() };
    let p = prepare(&TxId::random(), json!({"amount": 12.50}));
    let yes = t.prepare(&target, &p).await.expect("prepare");
    assert!(yes.vote.is_yes(), "{yes:?}");
    let c = complete(&p);
    assert_eq!(
        t.commit(&target, &c).await.expect("commit"),
        CompleteReply::Done
    );
    assert_eq!(
        t.commit(&target, &c).await.expect("again"),
        CompleteReply::AlreadyDone
    );
    // An abort before its prepare, then the prepare: refused, nothing called.
    let q = prepare(&TxId::random(), json!({"amount": 1}));
    assert_eq!(
        t.abort(&target, &complete(&q)).await.expect("abort"),
        CompleteReply::Done
    );
    let late = t.prepare(&target, &q).await.expect("late prepare");
    assert!(
        matches!(
            late.vote,
            Vote::No {
                reason: VoteReason::Fenced,
                ..
            }
        ),
        "{late:?}"
    );
    assert_eq!(s.hooks.calls(), vec!["reserve", "confirm"]);
}

#[tokio::test]
async fn unsigned_and_wrongly_signed_requests_are_refused_with_a_code() {
    let s = serve().await;
    let target = Target::Http { url: s.url.clone() };
    let p = prepare(&TxId::random(), json!({"amount": 1}));
    for (secret, code) in [(None, "unsigned"), (Some(&b"a guess"[..]), "bad_signature")] {
        let e = transport(secret)
            .prepare(&target, &p)
            .await
            .expect_err("refused");
        assert!(
            e.message.contains("401") && e.message.contains(&format!("\"code\":\"{code}\"")),
            "{code}: {}",
            e.message
        );
        assert!(!e.undetermined, "a 4xx did nothing");
    }
    assert!(s.hooks.calls().is_empty());
}

#[tokio::test]
async fn a_stale_request_is_refused() {
    let s = serve().await;
    s.clock.advance(signing::DEFAULT_MAX_SKEW_MS + 1_000);
    let target = Target::Http { url: s.url.clone() };
    let p = prepare(&TxId::random(), json!({"amount": 1}));
    let e = transport(Some(SECRET))
        .prepare(&target, &p)
        .await
        .expect_err("refused");
    assert!(e.message.contains("stale_request"), "{}", e.message);
    assert!(s.hooks.calls().is_empty());
}

#[tokio::test]
async fn a_signature_for_another_transaction_a_body_that_is_no_request_or_too_large_is_refused() {
    let s = serve().await;
    let p = prepare(&TxId::random(), json!({"amount": 1}));
    let body = serde_json::to_vec(&p).expect("body");
    let now = SystemClock.now_ms();
    let other = signing::sign(SECRET, &TxId::random(), now, &body);
    let (status, answer) = raw(&s.url, "/prepare", &other, &body).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (401, Some("wrong_transaction"))
    );
    let junk = br#"{"hello": "world"}"#;
    let signed = signing::sign(SECRET, &p.tx_id, now, junk);
    let (status, answer) = raw(&s.url, "/commit", &signed, junk).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (400, Some("invalid_request"))
    );
    assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()));
    let huge = prepare(
        &p.tx_id,
        json!({"amount": 1, "memo": "x".repeat(70 * 1024)}),
    );
    let huge = serde_json::to_vec(&huge).expect("body");
    let signed = signing::sign(SECRET, &p.tx_id, now, &huge);
    let (status, answer) = raw(&s.url, "/prepare", &signed, &huge).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (413, Some("request_too_large"))
    );
    assert!(s.hooks.calls().is_empty());
}

#[tokio::test]
async fn the_configured_signing_secret_signs_the_functions_http_transport() {
    use twopc_function::var;
    use twopc_runtime::config::{Settings, SweeperSettings};
    let s = serve().await;
    let secret = std::str::from_utf8(SECRET).expect("text");
    let config = |with_secret: bool| {
        SweeperSettings::from_lookup(|name| match name {
            var::TRANSACTIONS_TABLE => Some("tx".into()),
            // Local, so the clients take static credentials; no DynamoDB call is made.
            var::DYNAMODB_ENDPOINT => Some("http://127.0.0.1:1".into()),
            var::HTTP_SIGNING_SECRET if with_secret => Some(secret.into()),
            _ => None,
        })
        .expect("config")
    };
    let target = Target::Http { url: s.url.clone() };
    let p = prepare(&TxId::random(), json!({"amount": 1}));
    let signed = config(true);
    let clients = twopc_runtime::Clients::load(&signed).await;
    let yes = twopc_runtime::transport(&signed, &clients)
        .prepare(&target, &p)
        .await
        .expect("prepare");
    assert!(yes.vote.is_yes(), "{yes:?}");
    let unsigned = config(false);
    let refused = twopc_runtime::transport(&unsigned, &clients)
        .prepare(&target, &prepare(&TxId::random(), json!({"amount": 1})))
        .await;
    assert!(refused.is_err(), "unsigned: {refused:?}");
    assert_eq!(s.hooks.calls(), vec!["reserve"]);
}
