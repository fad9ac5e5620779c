//! The HTTP API's answers (README, "A transaction"), shared by the Lambda and the local stack.

use serde_json::{Map, Value, json};

use crate::coordinator::SubmitError;
use crate::record::{TxRecord, Vote};
use crate::request::RequestError;
use crate::status::TxStatus;

/// An HTTP answer: status code and JSON body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// JSON body.
    pub body: Value,
}

fn participants(record: &TxRecord) -> Vec<Value> {
    record
        .participants
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut m = Map::new();
            m.insert("participant".into(), Value::String(p.participant.clone()));
            // A custom participant has no item: no key.
            if !p.key.is_empty() {
                m.insert(
                    "key".into(),
                    Value::Object(p.key.clone().into_iter().collect()),
                );
            }
            if let Some(Ok(Value::Object(v))) = record.votes.get(i).map(serde_json::to_value) {
                m.extend(v);
            }
            Value::Object(m)
        })
        .collect()
}

/// The answer to `POST /transactions` for a transaction's record.
pub fn submitted(record: &TxRecord) -> Answer {
    let mut body = json!({
        "txId": record.tx_id,
        "status": record.status,
        "participants": participants(record),
    });
    let status = match record.status {
        TxStatus::Committed => 200,
        TxStatus::Aborted | TxStatus::Aborting => {
            let first_no = record.votes.iter().find_map(|v| match v {
                Vote::No { reason, message } => Some((reason.code(), message.clone())),
                Vote::Yes { .. } => None,
            });
            let (code, message) = first_no.unwrap_or((
                "aborted",
                "the transaction was aborted (its deadline passed before it was decided)"
                    .to_owned(),
            ));
            body["code"] = Value::String(code.to_owned());
            body["message"] = Value::String(message);
            409
        }
        TxStatus::Committing | TxStatus::Preparing => 202,
    };
    Answer { status, body }
}

/// The answer to `GET /transactions/{id}`.
pub fn record(record: &TxRecord) -> Answer {
    Answer {
        status: 200,
        body: json!({
            "txId": record.tx_id,
            "status": record.status,
            "participants": participants(record),
            "deadline": record.deadline,
            "createdAt": record.created_at,
            "updatedAt": record.updated_at,
        }),
    }
}

/// An error answer.
pub fn error(status: u16, code: &str, message: impl Into<String>) -> Answer {
    Answer {
        status,
        body: json!({"code": code, "message": message.into()}),
    }
}

/// The answer to a refused request.
pub fn refused(e: &RequestError) -> Answer {
    error(e.http_status(), e.code, e.message.clone())
}

/// The answer to a failed submit.
pub fn failed(e: &SubmitError) -> Answer {
    match e {
        SubmitError::Request(r) => refused(r),
        SubmitError::Unavailable { tx_id, .. } => {
            let mut a = error(
                503,
                "unavailable",
                format!(
                    "the transaction store could not be reached ({e:#}); retry with the same Idempotency-Key"
                ),
            );
            if let Some(id) = tx_id {
                a.body["txId"] = Value::String(id.to_string());
            }
            a
        }
    }
}
