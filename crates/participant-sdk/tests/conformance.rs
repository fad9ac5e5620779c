//! The conformance kit, each check a named test, against a small example participant: a card
//! gateway in memory that authorises an amount in `reserve`, captures it in `confirm` and voids
//! it in `cancel`. Then every check at once, with the state in DynamoDB Local
//! (`TWOPC_DYNAMODB_ENDPOINT`).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::json;
use twopc_core::decimal::Decimal;
use twopc_core::ids::TxId;
use twopc_core::record::{Vote, VoteReason};
use twopc_participant_sdk::conformance::{self, Kit, Subject};
use twopc_participant_sdk::{Call, HookError, Hooks, MemoryStates, Reservation};

/// Authorisations and captures, by transaction. Amounts stay decimal text, never `f64`.
#[derive(Clone, Default)]
struct CardGateway {
    held: Arc<Mutex<BTreeMap<TxId, Decimal>>>,
    captured: Arc<Mutex<BTreeMap<TxId, Decimal>>>,
}

/// What the gateway is asked: read by the SDK, exactly (`amount` from the number's text).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Payment {
    card: String,
    amount: Decimal,
}

impl Hooks for CardGateway {
    type Payload = Payment;

    async fn reserve(&self, call: Call<'_, Payment>) -> Result<Reservation, HookError> {
        let Payment { card, amount } = call.payload;
        if amount.is_negative() {
            return Ok(Reservation::invalid("a negative amount"));
        }
        if card == "declined" {
            return Ok(Reservation::condition("the card was declined"));
        }
        let mut held = self.held.lock().map_err(|_| HookError::new("poisoned"))?;
        held.insert(call.tx_id.clone(), amount.clone());
        Ok(Reservation::Held)
    }

    async fn confirm(&self, call: Call<'_, Payment>) -> Result<(), HookError> {
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

    async fn cancel(&self, call: Call<'_, Payment>) -> Result<(), HookError> {
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
async fn a_payload_that_does_not_read_is_refused_before_any_hook_saying_why() {
    let kit = Kit::new(example().await);
    let tx = kit.begin_invalid().await;
    for attempt in 1..=2 {
        let r = kit.send_prepare(&tx).await;
        let Vote::No { reason, message } = &r.vote else {
            panic!("prepare #{attempt}: {r:?}");
        };
        assert_eq!(*reason, VoteReason::Invalid, "prepare #{attempt}");
        assert!(
            message.contains("invalid type: number, expected a string"),
            "serde's reason, the same for the duplicate: {message}"
        );
    }
    assert!(kit.send_abort(&tx).await.acknowledged());
    assert_eq!(kit.counts(&tx), [0, 0, 0], "no hook saw it");
}

/// The same participant served by the SDK's signed router on a real socket, reached by the
/// coordinator's own `http` transport: every check again, through the wire, and the wire's own
/// checks (raw requests the coordinator never sends).
mod over_http {
    use std::time::Duration;

    use serde_json::Value;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use twopc_core::ids::TxId;
    use twopc_core::memory::MemoryTxLog;
    use twopc_core::message::{
        CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
    };
    use twopc_core::ports::{ManualClock, Transport, TransportError};
    use twopc_core::record::Target;
    use twopc_core::signing::Secret;
    use twopc_participant_sdk::MemoryStates;
    use twopc_participant_sdk::conformance::{
        Atomicity, Effects, Entry, Failure, Faults, Resolved, Sdk, Tx, UnderTest,
    };
    use twopc_participant_sdk::http::{HttpConfig, router};
    use twopc_runtime::transport::HttpTransport;

    const SECRET: &[u8] = b"shared by the kit and the router";

    struct OverHttp {
        sdk: Sdk<super::CardGateway, MemoryStates>,
        transport: HttpTransport,
        target: Target,
    }

    async fn serve() -> OverHttp {
        let sdk = Sdk::from(super::example().await);
        let app = router(
            sdk.participant().clone(),
            HttpConfig::new(Secret::new(SECRET)),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let transport =
            HttpTransport::new(Duration::from_secs(5)).with_signing_secret(Secret::new(SECRET));
        OverHttp {
            sdk,
            transport,
            target: Target::Http { url },
        }
    }

    /// What the router's answer says, by its stable `code` (`http` module's table).
    fn failure(e: TransportError) -> Failure {
        let text = e.to_string();
        if text.contains("503") && text.contains(r#""code":"busy""#) {
            Failure::Busy(text)
        } else if text.contains("500") && text.contains(r#""code":"hook_failed""#) {
            Failure::Failed(text)
        } else {
            Failure::Other(text)
        }
    }

    impl UnderTest for OverHttp {
        type Log = MemoryTxLog;

        fn log(&self) -> &MemoryTxLog {
            self.sdk.log()
        }

        fn clock(&self) -> &ManualClock {
            self.sdk.clock()
        }

        fn atomicity(&self) -> Atomicity {
            self.sdk.atomicity()
        }

        fn faults(&self) -> &Faults {
            self.sdk.faults()
        }

        async fn valid(&self, tx: &TxId) -> Entry {
            self.sdk.valid(tx).await
        }

        async fn invalid(&self, tx: &TxId) -> Entry {
            self.sdk.invalid(tx).await
        }

        async fn prepare(&self, req: &PrepareRequest) -> Result<PrepareReply, Failure> {
            let reply = self.transport.prepare(&self.target, req).await;
            reply.map_err(failure)
        }

        async fn commit(&self, req: &CompleteRequest) -> Result<CompleteReply, Failure> {
            let reply = self.transport.commit(&self.target, req).await;
            reply.map_err(failure)
        }

        async fn abort(&self, req: &CompleteRequest) -> Result<CompleteReply, Failure> {
            let reply = self.transport.abort(&self.target, req).await;
            reply.map_err(failure)
        }

        async fn inquire(&self, req: &InquireRequest) -> Result<InquireReply, Failure> {
            let reply = self.transport.inquire(&self.target, req).await;
            reply.map_err(failure)
        }

        async fn resolve(&self, tx: &Tx) -> Result<Resolved, Failure> {
            self.sdk.resolve(tx).await
        }

        async fn sweep(&self) -> Result<Vec<(TxId, Resolved)>, Failure> {
            self.sdk.sweep().await
        }

        async fn effects(&self, tx: &Tx) -> Option<Effects> {
            self.sdk.effects(tx).await
        }

        async fn post_raw(
            &self,
            _what: &str,
            action: &str,
            headers: &[(&'static str, String)],
            body: &[u8],
        ) -> Option<(u16, Value)> {
            let Target::Http { url } = &self.target else {
                return None;
            };
            Some(raw(url, &format!("/{action}"), headers, body).await)
        }

        fn secret(&self) -> Option<&[u8]> {
            Some(SECRET)
        }
    }

    /// POSTs `body` with exactly `headers` on a socket; the status and the JSON answer.
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
        (status, serde_json::from_str(json).unwrap_or(Value::Null))
    }

    // Every check, the wire's too.
    twopc_participant_sdk::conformance_tests!(claimed_wire: serve().await);
}

#[tokio::test]
async fn every_check_passes_with_the_state_in_dynamodb() {
    let states = common::dynamodb_states("c").await;
    conformance::check_all(|| async {
        let e = example().await;
        Subject {
            hooks: e.hooks,
            store: states.clone(),
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
