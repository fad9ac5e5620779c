//! The participant as the conformance kit reaches it over HTTP: signed requests as the
//! coordinator's `http` transport sends them, raw ones for the wire's checks, and a journal of
//! what was sent raw and what is left held. The records the kit writes go to a log of its own
//! that the service never reads (its prepare, commit and abort do not); its clock is the real
//! one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use serde::Serialize;
use serde_json::{Value, json};
use twopc_core::ids::TxId;
use twopc_core::item::Key;
use twopc_core::memory::MemoryTxLog;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::op::Operation;
use twopc_core::ports::{Clock, ManualClock, SystemClock};
use twopc_core::signing;
use twopc_participant_sdk::conformance::{
    Atomicity, Effects, Entry, Failure, Faults, Resolved, Tx, UnderTest,
};

/// The HTTP(S) client.
pub type Https = HttpClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One request a wire check sent, and the answer.
#[derive(Clone, Debug, Serialize)]
pub struct Sent {
    /// What it was.
    pub what: String,
    /// The path.
    pub path: String,
    /// The answer's status.
    pub status: u16,
    /// The answer's `code`.
    pub code: Option<String>,
}

/// What the runner shares with the checks it plays: the requests sent raw, the transactions
/// left held.
#[derive(Default)]
pub struct Journal {
    /// The requests sent raw.
    pub sent: Vec<Sent>,
    /// The transactions prepared (yes) and not ended, with the abort that ends each.
    pub open: BTreeMap<TxId, CompleteRequest>,
}

/// The participant as the kit reaches it over HTTP.
pub struct Remote {
    url: String,
    secret: Vec<u8>,
    client: Https,
    log: MemoryTxLog,
    clock: ManualClock,
    faults: Faults,
    valid: Value,
    invalid: Value,
    pub(super) journal: Arc<Mutex<Journal>>,
}

impl Remote {
    /// The participant at `url`, reached with `client`, its checks' payloads `valid` and
    /// `invalid`, what it sends noted in `journal`.
    pub fn new(
        url: &str,
        secret: &[u8],
        client: &Https,
        payloads: [&Value; 2],
        journal: Arc<Mutex<Journal>>,
    ) -> Remote {
        Remote {
            url: url.to_owned(),
            secret: secret.to_vec(),
            client: client.clone(),
            log: MemoryTxLog::default(),
            clock: ManualClock::new(SystemClock.now_ms()),
            faults: Faults::default(),
            valid: payloads[0].clone(),
            invalid: payloads[1].clone(),
            journal,
        }
    }

    fn note(&self, f: impl FnOnce(&mut Journal)) {
        if let Ok(mut j) = self.journal.lock() {
            f(&mut j);
        }
    }

    /// POSTs `body` to `{url}/{action}` with `headers`: the status and the JSON answer.
    pub async fn post(
        &self,
        action: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<(u16, Value), String> {
        let endpoint = format!("{}/{action}", self.url.trim_end_matches('/'));
        let mut request =
            hyper::Request::post(&endpoint).header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("{endpoint:?} is not a usable URL: {e}"))?;
        let answer = self
            .client
            .request(request)
            .await
            .map_err(|e| format!("POST {endpoint}: {e} (is the service running there?)"))?;
        let status = answer.status().as_u16();
        let bytes = Limited::new(answer.into_body(), 1024 * 1024)
            .collect()
            .await
            .map_err(|e| format!("POST {endpoint}: reading the answer: {e}"))?
            .to_bytes();
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    /// A call as the coordinator sends it: signed now. A non-200 answer is a [`Failure`] by its
    /// code (`busy`: retry; `hook_failed`: the work failed).
    async fn call<R: serde::de::DeserializeOwned>(
        &self,
        action: &str,
        tx: &TxId,
        request: &impl Serialize,
    ) -> Result<R, Failure> {
        let body = serde_json::to_vec(request).map_err(|e| Failure::Other(e.to_string()))?;
        let headers = signing::sign(&self.secret, tx, SystemClock.now_ms(), &body);
        let (status, answer) = self
            .post(action, &headers, body)
            .await
            .map_err(Failure::Other)?;
        let text = format!("/{action} answered {status}: {answer}");
        match (status, answer["code"].as_str()) {
            (200, _) => serde_json::from_value(answer)
                .map_err(|e| Failure::Other(format!("{text}: not a {action} reply: {e}"))),
            (503, Some("busy")) => Err(Failure::Busy(text)),
            (500, Some("hook_failed")) => Err(Failure::Failed(text)),
            _ => Err(Failure::Other(text)),
        }
    }

    fn entry(payload: &Value) -> Entry {
        Entry {
            key: Key::default(), // what the coordinator sends a custom participant
            op: Operation::default(),
            payload: Some(payload.clone()),
        }
    }

    /// A signed commit or abort (`action`); an answered one ends the transaction's hold here.
    pub async fn complete(
        &self,
        action: &str,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, Failure> {
        let reply = self.call(action, &req.tx_id, req).await;
        if reply.is_ok() {
            self.note(|j| {
                j.open.remove(&req.tx_id);
            });
        }
        reply
    }
}

fn in_process_only(what: &str) -> Failure {
    Failure::Other(format!(
        "{what} needs the participant in process: not played over HTTP"
    ))
}

impl UnderTest for Remote {
    type Log = MemoryTxLog;

    fn log(&self) -> &MemoryTxLog {
        &self.log
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    fn atomicity(&self) -> Atomicity {
        // Read only by the checks that inject failures, which are not played over HTTP.
        Atomicity::OneWrite
    }

    fn faults(&self) -> &Faults {
        &self.faults
    }

    async fn valid(&self, _: &TxId) -> Entry {
        Remote::entry(&self.valid)
    }

    async fn invalid(&self, _: &TxId) -> Entry {
        Remote::entry(&self.invalid)
    }

    async fn prepare(&self, req: &PrepareRequest) -> Result<PrepareReply, Failure> {
        let reply: PrepareReply = self.call("prepare", &req.tx_id, req).await?;
        if reply.vote.is_yes() {
            let abort = CompleteRequest {
                tx_id: req.tx_id.clone(),
                deadline: req.deadline,
                began: req.began,
                key: req.key.clone(),
                op: req.op.clone(),
                prune: None,
                refused: false,
            };
            self.note(|j| {
                j.open.entry(req.tx_id.clone()).or_insert(abort);
            });
        }
        Ok(reply)
    }

    async fn commit(&self, req: &CompleteRequest) -> Result<CompleteReply, Failure> {
        self.complete("commit", req).await
    }

    async fn abort(&self, req: &CompleteRequest) -> Result<CompleteReply, Failure> {
        self.complete("abort", req).await
    }

    async fn inquire(&self, req: &InquireRequest) -> Result<InquireReply, Failure> {
        self.call("inquire", &req.tx_id, req).await
    }

    async fn resolve(&self, _: &Tx) -> Result<Resolved, Failure> {
        Err(in_process_only("resolve"))
    }

    async fn sweep(&self) -> Result<Vec<(TxId, Resolved)>, Failure> {
        Err(in_process_only("sweep"))
    }

    async fn effects(&self, _: &Tx) -> Option<Effects> {
        None
    }

    async fn post_raw(
        &self,
        what: &str,
        action: &str,
        headers: &[(&'static str, String)],
        body: &[u8],
    ) -> Option<(u16, Value)> {
        let (status, answer) = match self.post(action, headers, body.to_vec()).await {
            Ok(a) => a,
            Err(e) => (0, json!({"code": null, "message": e})),
        };
        let sent = Sent {
            what: what.to_owned(),
            path: format!("/{action}"),
            status,
            code: answer["code"].as_str().map(str::to_owned),
        };
        self.note(|j| j.sent.push(sent));
        Some((status, answer))
    }

    fn secret(&self) -> Option<&[u8]> {
        Some(&self.secret)
    }
}
