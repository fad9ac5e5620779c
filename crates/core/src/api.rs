//! The HTTP API's answers (docs/api.md), shared by the Lambda and the local stack;
//! [`codes`]: every stable `code` they carry (the ground vocabulary of [`crate::codes`], named
//! here too as the API's); [`operator`]: the operator API's. `docs/openapi.json` describes them.

pub use crate::codes;

pub mod operator;

use serde_json::{Map, Value, json};

use crate::codes::Code;
use crate::coordinator::{Outcome, SubmitError, Submitted};
use crate::record::{ParticipantEntry, TxRecord, Vote};
use crate::request::RequestError;

/// An HTTP answer: status code and JSON body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// JSON body.
    pub body: Value,
}

/// Each participant as the API, the data lake and the live page show it: the service, the
/// item's key (a table's; a custom participant has none), and its vote once recorded (`vote`,
/// with `reason` and `message` for a no, `mode` for a table's yes: a custom participant holds
/// what it holds its own way, so it has no mode).
pub fn participant_outcomes(participants: &[ParticipantEntry], votes: &[Vote]) -> Vec<Value> {
    participants
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut m = Map::new();
            m.insert("participant".into(), Value::String(p.participant.clone()));
            let custom = p.key.is_empty();
            if !custom {
                m.insert(
                    "key".into(),
                    Value::Object(p.key.clone().into_iter().collect()),
                );
            }
            if let Some(Ok(Value::Object(v))) = votes.get(i).map(serde_json::to_value) {
                m.extend(v.into_iter().filter(|(k, _)| !(custom && k == "mode")));
            }
            Value::Object(m)
        })
        .collect()
}

fn participants(record: &TxRecord) -> Vec<Value> {
    participant_outcomes(&record.participants, &record.votes)
}

/// The answer to `POST /transactions`: 200 once the transaction is committed (decided, or
/// answered by its stager: `outcome` says so, `applied` whether every participant applied it
/// yet), the abort's 409 once aborted, 202 while pending.
pub fn submitted(submitted: &Submitted) -> Answer {
    let record = &submitted.record;
    let mut body = json!({
        "txId": record.tx_id,
        "status": record.status,
        "outcome": submitted.outcome.as_str(),
        "applied": submitted.applied(),
        "participants": participants(record),
    });
    let status = match submitted.outcome {
        Outcome::Committed => 200,
        Outcome::Aborted => {
            let first_no = record.votes.iter().find_map(|v| match v {
                Vote::No { reason, message } => Some((reason.abort_code(), message.clone())),
                Vote::Yes { .. } => None,
            });
            let (code, message) = first_no.unwrap_or((
                codes::ABORTED,
                "the transaction was aborted (its deadline passed before it was decided)"
                    .to_owned(),
            ));
            body["code"] = Value::String(code.name.to_owned());
            body["message"] = Value::String(message);
            code.status
        }
        Outcome::Pending => 202,
    };
    Answer { status, body }
}

/// The answer to `GET /transactions/{id}`: the record, with the outcome it tells.
pub fn record(record: &TxRecord) -> Answer {
    let outcome = Outcome::of(record);
    Answer {
        status: 200,
        body: json!({
            "txId": record.tx_id,
            "status": record.status,
            "outcome": outcome.as_str(),
            "applied": record.status.is_terminal(),
            "participants": participants(record),
            "deadline": record.deadline,
            "createdAt": record.created_at,
            "updatedAt": record.updated_at,
        }),
    }
}

/// The answer to `GET /transactions?status=pending`: a page of unfinished transactions, each as
/// [`record`] shows it, and where the next page starts (absent on the last).
pub fn listing(records: &[TxRecord], next: Option<String>) -> Answer {
    let mut body = json!({
        "transactions": records.iter().map(|r| record(r).body).collect::<Vec<_>>(),
    });
    if let Some(next) = next {
        body["next"] = json!(next);
    }
    Answer { status: 200, body }
}

/// An error answer: the code's status, `{"code", "message"}`.
pub fn error(code: Code, message: impl Into<String>) -> Answer {
    Answer {
        status: code.status,
        body: json!({"code": code.name, "message": message.into()}),
    }
}

/// The answer to a refused request.
pub fn refused(e: &RequestError) -> Answer {
    error(e.code, e.message.clone())
}

/// The answer to a failed submit.
pub fn failed(e: &SubmitError) -> Answer {
    match e {
        SubmitError::Request(r) => refused(r),
        SubmitError::Unavailable { tx_id, .. } => {
            let mut a = error(
                codes::UNAVAILABLE,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Mode;
    use crate::record::VoteReason;

    fn entry(participant: &str, key: Option<&str>) -> ParticipantEntry {
        let json = match key {
            Some(id) => {
                json!({"participant": participant, "target": {"transport": "direct", "table": "t"},
                "key": {"id": id}, "op": {"add": {"n": 1}}})
            }
            None => {
                json!({"participant": participant, "target": {"transport": "http", "url": "http://x"},
                "key": {}, "payload": "{\"card\":\"4242\"}"})
            }
        };
        serde_json::from_value(json).expect("an entry")
    }

    #[test]
    fn outcomes_show_keys_of_tables_and_no_mode_for_custom_participants() {
        let ps = [entry("accounts", Some("alice")), entry("payments", None)];
        let votes = [Vote::yes(Mode::Reserved), Vote::yes(Mode::Exclusive)];
        assert_eq!(
            participant_outcomes(&ps, &votes),
            vec![
                json!({"participant": "accounts", "key": {"id": "alice"}, "vote": "yes", "mode": "reserved"}),
                json!({"participant": "payments", "vote": "yes"}),
            ]
        );
        let no = [Vote::no(VoteReason::Condition, "the card was declined")];
        assert_eq!(
            participant_outcomes(&ps[1..], &no),
            vec![
                json!({"participant": "payments", "vote": "no", "reason": "condition",
                "message": "the card was declined"})
            ]
        );
        assert_eq!(
            participant_outcomes(&ps, &[]),
            vec![
                json!({"participant": "accounts", "key": {"id": "alice"}}),
                json!({"participant": "payments"})
            ],
            "before the votes are recorded, no vote"
        );
    }
}
