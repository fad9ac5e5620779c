//! The stack as a user's client sees it: its HTTP API (hyper-util's client, one pool for the
//! run) and its WebSocket, subscribed to everything, every message timestamped on arrival.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::LiveError;

/// How long one HTTP request may take before it counts as failed (and is retried).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Milliseconds since the epoch, now (to compare with the stream's record times).
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The HTTP API of one `twopc serve`.
#[derive(Clone)]
pub struct Api {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Api {
    /// A client of the API at `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: &str) -> Api {
        Api {
            base: base.to_owned(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// One request: the status and the body as JSON (`Null` if it is not JSON).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        idempotency_key: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(u16, Value), String> {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(k) = idempotency_key {
            req = req.header("Idempotency-Key", k);
        }
        let req = req
            .body(Full::new(Bytes::from(
                body.map(Value::to_string).unwrap_or_default(),
            )))
            .map_err(|e| e.to_string())?;
        let answer = async {
            let resp = self.client.request(req).await.map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok((
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            ))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, answer)
            .await
            .map_err(|_| format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()))?
    }

    /// The business view of every account (`GET /local/items/accounts`): id → balance text.
    pub async fn balances(&self) -> Result<Vec<(String, String)>, LiveError> {
        let (status, body) = self
            .call("GET", "/local/items/accounts", None, None)
            .await
            .map_err(|e| LiveError::Check(format!("listing the accounts: {e}")))?;
        if status != 200 {
            return Err(LiveError::Check(format!(
                "listing the accounts: {status} {body}"
            )));
        }
        let mut out: Vec<(String, String)> = body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| {
                let item = &i["item"];
                Some((item["id"].as_str()?.to_owned(), item["balance"].to_string()))
            })
            .collect();
        out.sort();
        Ok(out)
    }
}

/// When the messages of one transaction arrived.
#[derive(Clone, Copy, Debug)]
pub struct Arrivals {
    /// The first one.
    pub first: Instant,
    /// The first one, on the wall clock (ms since the epoch).
    pub first_wall_ms: u64,
    /// The last one.
    pub last: Instant,
    /// How many (`entity.committed` and `transaction.completed` together).
    pub count: usize,
    /// The first `transaction.completed`.
    pub completed: Option<Instant>,
}

/// What one WebSocket connection received, by transaction.
#[derive(Default)]
pub struct Received {
    /// Per txId.
    pub by_tx: HashMap<String, Arrivals>,
    /// Every message carrying a txId.
    pub messages: usize,
    /// Messages by what they say happened (`txId/participant/key` of an `entity.committed`,
    /// `txId/status` of a `transaction.completed`, as the lake's `eventId`): a count above 1 is
    /// a message delivered again.
    pub events: HashMap<String, usize>,
    /// Messages of another type (`subscribed`, `error`, ...).
    pub other: usize,
}

/// A WebSocket subscribed to everything, read by a task of its own.
pub struct Feed {
    /// What it received so far.
    pub received: Arc<Mutex<Received>>,
    sink: futures::stream::SplitSink<
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
        Message,
    >,
    reader: tokio::task::JoinHandle<()>,
}

impl Feed {
    /// Connects to `{url}/ws?token=...`, subscribes to everything and waits for the
    /// `subscribed` answer (so no commit made after this returns can be missed).
    pub async fn open(url: &str, token: &str) -> Result<Feed, LiveError> {
        let ws_url = format!("{}/ws?token={token}", url.replacen("http", "ws", 1));
        let (ws, _) = tokio_tungstenite::connect_async(&ws_url)
            .await
            .map_err(|e| LiveError::Setup(format!("WebSocket {ws_url}: {e}")))?;
        let (mut sink, mut stream) = ws.split();
        sink.send(Message::Text(
            json!({"action": "subscribe", "all": true})
                .to_string()
                .into(),
        ))
        .await
        .map_err(|e| LiveError::Setup(format!("WebSocket subscribe: {e}")))?;
        let answer = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(Ok(msg)) = stream.next().await {
                if let Message::Text(t) = msg {
                    return serde_json::from_str::<Value>(&t).ok();
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        if answer.as_ref().map(|a| &a["type"]) != Some(&json!("subscribed")) {
            return Err(LiveError::Setup(format!(
                "WebSocket subscribe: expected {{\"type\": \"subscribed\"}}, got {answer:?}"
            )));
        }
        let received = Arc::new(Mutex::new(Received::default()));
        let into = received.clone();
        let reader = tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                let now = Instant::now();
                let wall = wall_ms();
                let Message::Text(text) = msg else { continue };
                let v = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
                let Ok(mut r) = into.lock() else { return };
                let Some(tx) = v["txId"].as_str().map(str::to_owned) else {
                    r.other += 1;
                    continue;
                };
                let completed = (v["type"] == "transaction.completed").then_some(now);
                let event = match completed {
                    Some(_) => format!("{tx}/{}", v["status"].as_str().unwrap_or_default()),
                    None => format!(
                        "{tx}/{}/{}",
                        v["participant"].as_str().unwrap_or_default(),
                        v["key"]
                    ),
                };
                r.messages += 1;
                *r.events.entry(event).or_default() += 1;
                r.by_tx
                    .entry(tx)
                    .and_modify(|a| {
                        a.last = now;
                        a.count += 1;
                        a.completed = a.completed.or(completed);
                    })
                    .or_insert(Arrivals {
                        first: now,
                        first_wall_ms: wall,
                        last: now,
                        count: 1,
                        completed,
                    });
            }
        });
        Ok(Feed {
            received,
            sink,
            reader,
        })
    }

    /// When `tx`'s first message arrived, if it did.
    pub fn arrival(&self, tx: &str) -> Option<Arrivals> {
        self.received
            .lock()
            .ok()
            .and_then(|r| r.by_tx.get(tx).copied())
    }

    /// How many of `txs` have had `at_least` messages.
    pub fn arrived(&self, txs: &[String], at_least: usize) -> usize {
        self.received.lock().map_or(0, |r| {
            txs.iter()
                .filter(|t| r.by_tx.get(*t).is_some_and(|a| a.count >= at_least))
                .count()
        })
    }

    /// Waits until every one of `txs` has had `at_least` messages, or `deadline`. Returns whether
    /// all did.
    pub async fn wait_for(&self, txs: &[String], at_least: usize, deadline: Instant) -> bool {
        loop {
            if self.arrived(txs, at_least) == txs.len() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            // Arrival times are taken by the reader task; this only decides when to stop waiting.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Closes the connection (its `$disconnect` runs) and stops reading.
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.sink.close()).await;
        tokio::time::sleep(Duration::from_millis(200)).await; // let the close handshake finish
        self.reader.abort();
    }
}
