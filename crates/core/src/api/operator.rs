//! The operator API's answers (`/operator/...`, docs/api.md "The operator API"): a listing's
//! transactions, one transaction's story, an action's answer, the counts and an item.

use serde_json::{Map, Value, json};

use super::{Answer, error, participants};
use crate::codes::Code;
use crate::ids::TxId;
use crate::item::{FenceOutcome, ItemState, Key};
use crate::operator::{self, Counts, Hold, ListPage, OperatorAction};
use crate::record::{Target, TxRecord};
use crate::status::TxStatus;

/// A transaction as an operator's list shows it: what `GET /transactions/{id}` shows, and
/// whether it is overdue, when it was decided, the sweeper's failed attempts and its backoff,
/// and what it waits for.
pub fn summary(record: &TxRecord, now: u64) -> Value {
    let mut body = super::record(record).body;
    let overdue = !record.status.is_terminal() && now > record.deadline;
    body["overdue"] = json!(overdue);
    body["attempts"] = json!(record.attempts);
    if let Some(at) = record.decided_at {
        body["decidedAt"] = json!(at);
    }
    if let Some(at) = record.retry_after {
        body["retryAfter"] = json!(at);
    }
    body["waitingFor"] = json!(operator::waiting_for(record, now, None));
    body
}

/// `GET /operator/transactions`: a page, and where the next one starts.
pub fn listing(page: &ListPage, now: u64) -> Answer {
    let mut body = json!({
        "transactions": page.records.iter().map(|r| summary(r, now)).collect::<Vec<_>>(),
    });
    if let Some(next) = &page.next {
        body["next"] = json!(next.token());
    }
    Answer { status: 200, body }
}

/// `GET /operator/counts`.
pub fn counts(c: &Counts) -> Answer {
    Answer {
        status: 200,
        body: serde_json::to_value(c).unwrap_or(Value::Null),
    }
}

fn transport(t: &Target) -> &'static str {
    match t {
        Target::Direct { .. } => "direct",
        Target::Lambda { .. } => "lambda",
        Target::Http { .. } => "http",
    }
}

/// `GET /operator/transactions/{id}`: the transaction ([`summary`]), each participant with its
/// operation, vote and mode and what it holds now, the timeline, and what it waits for.
pub fn story(record: &TxRecord, holds: &[Hold], now: u64) -> Answer {
    let mut transaction = summary(record, now);
    transaction["waitingFor"] = json!(operator::waiting_for(record, now, Some(holds)));
    transaction["operatorActions"] = json!(record.operator_actions);
    let shown = participants(record);
    let participants: Vec<Value> = record
        .participants
        .iter()
        .zip(shown)
        .zip(holds)
        .map(|((p, mut shown), hold)| {
            shown["transport"] = json!(transport(&p.target));
            if !p.op.is_empty() {
                shown["op"] = serde_json::to_value(&p.op).unwrap_or(Value::Null);
            }
            shown["holds"] = serde_json::to_value(hold).unwrap_or(Value::Null);
            shown
        })
        .collect();
    Answer {
        status: 200,
        body: json!({
            "transaction": transaction,
            "participants": participants,
            "timeline": operator::timeline(record),
        }),
    }
}

/// What an action that ran answers: 200, the status it found and the transaction as recovery
/// left it (`ended` false: a participant did not answer; the sweeper retries).
pub fn acted(action: OperatorAction, before: TxStatus, record: &TxRecord, now: u64) -> Answer {
    let message = match (action, before, record.status) {
        (OperatorAction::Abort, _, TxStatus::Committed) => {
            "every participant held the STAGING transaction, so recovery committed it (its client may have been answered committed): an abort could not be".to_owned()
        }
        (_, b, s) if s.is_terminal() => format!("{b} -> {s}: ended"),
        (_, b, s) => format!(
            "{b} -> {s}: not ended yet ({}); the sweeper keeps trying",
            operator::waiting_for(record, now, None)
        ),
    };
    Answer {
        status: 200,
        body: json!({
            "action": action.as_str(),
            "result": operator::DONE,
            "before": before,
            "ended": record.status.is_terminal(),
            "message": message,
            "transaction": summary(record, now),
        }),
    }
}

/// A refused action: the code's answer, with the transaction as it is.
pub fn refused(action: OperatorAction, code: Code, record: &TxRecord, now: u64) -> Answer {
    let why = match record.status {
        s if s.is_terminal() => format!("it ended {s}"),
        s if s.decision().is_some() => format!("it is decided ({s}); recover finishes it"),
        s => format!(
            "it is {s} and its deadline has not passed: its coordinator may still decide; after {} recovery may act",
            record.deadline
        ),
    };
    let mut a = error(
        code,
        format!("{} refused for {}: {why}", action.as_str(), record.tx_id),
    );
    a.body["transaction"] = summary(record, now);
    a
}

/// `GET /operator/items/{participant}?key=...`: who holds the item (lock, reservations), its
/// fence and horizon, and its business attributes (`item`, null when it does not exist).
pub fn item(participant: &str, key: &Key, state: Option<&ItemState>) -> Answer {
    let exists = state.is_some_and(|s| !s.tombstone && !s.placeholder);
    let mut body = json!({
        "participant": participant,
        "key": key,
        "exists": exists,
        "item": if exists { state.map(|s| json!(s.attributes)) } else { None },
    });
    if let Some(s) = state {
        let holder = |tx: &TxId, l: &crate::item::Lock| {
            json!({"txId": tx, "expiresAt": l.expires_at, "began": l.began, "op": l.op,
                "coordinator": (!l.coordinator.is_empty()).then_some(&l.coordinator)})
        };
        body["lock"] = s.lock.as_ref().map_or(Value::Null, |l| holder(&l.tx_id, l));
        body["reservations"] = s.reservations.iter().map(|(t, l)| holder(t, l)).collect();
        let fence: Vec<Value> = s
            .fence
            .iter()
            .map(|(t, e)| {
                let outcome = match e.outcome {
                    FenceOutcome::Committed => "committed",
                    FenceOutcome::Aborted => "aborted",
                };
                json!({"txId": t, "outcome": outcome, "began": e.began})
            })
            .collect();
        body["fence"] = fence.into();
        body["horizon"] = json!(s.horizon);
        let mut marks = Map::new();
        if s.paused_until > 0 {
            marks.insert("pausedUntil".into(), json!(s.paused_until));
        }
        if s.hot_until > 0 {
            marks.insert("hotUntil".into(), json!(s.hot_until));
        }
        body["marks"] = Value::Object(marks);
    }
    Answer { status: 200, body }
}
