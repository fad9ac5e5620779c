//! Loopback stand-ins for the AWS APIs the fan-out writes to: a Firehose `PutRecordBatch`
//! endpoint ([`FirehoseShim`]) that keeps every call's rows and rejects the records a rule
//! picks, and [`serve`], which serves a router on a free loopback port.

use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};

/// Which records (call number from 1, row) the shim rejects.
type RejectRule = dyn Fn(usize, &str) -> bool + Send + Sync;

/// A `PutRecordBatch` endpoint: every call's rows kept, the records a rule picks rejected
/// (`ServiceUnavailableException`), the others accepted.
#[derive(Clone)]
pub struct FirehoseShim {
    calls: Arc<Mutex<Vec<Vec<String>>>>,
    reject: Arc<RejectRule>,
}

impl FirehoseShim {
    /// A shim that accepts every record.
    pub fn accepting() -> FirehoseShim {
        FirehoseShim::rejecting(|_, _| false)
    }

    /// A shim that rejects the records `rule` picks (by call number from 1, and row).
    pub fn rejecting(rule: impl Fn(usize, &str) -> bool + Send + Sync + 'static) -> FirehoseShim {
        FirehoseShim {
            calls: Arc::default(),
            reject: Arc::new(rule),
        }
    }

    /// Each call's rows, in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every row of every call, in order.
    pub fn rows(&self) -> Vec<String> {
        self.calls().concat()
    }

    /// The endpoint, at `/` as the SDK posts it.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/", post(put_record_batch))
            .with_state(self.clone())
    }
}

async fn put_record_batch(
    State(shim): State<FirehoseShim>,
    body: Bytes,
) -> axum::response::Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let rows: Vec<String> = req["Records"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let data = r["Data"].as_str().unwrap_or("");
            let bytes = aws_smithy_types::base64::decode(data).expect("base64");
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect();
    let call = {
        let mut calls = shim.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.push(rows.clone());
        calls.len()
    };
    let responses: Vec<Value> = rows
        .iter()
        .map(|row| {
            if (shim.reject)(call, row) {
                json!({"ErrorCode": "ServiceUnavailableException", "ErrorMessage": "slow down"})
            } else {
                json!({"RecordId": "r"})
            }
        })
        .collect();
    let failed = responses
        .iter()
        .filter(|r| r.get("ErrorCode").is_some())
        .count();
    let body = json!({"FailedPutCount": failed, "Encrypted": false, "RequestResponses": responses});
    (
        [("content-type", "application/x-amz-json-1.1")],
        body.to_string(),
    )
        .into_response()
}

/// Serves `app` on a free loopback port; its URL.
pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}
