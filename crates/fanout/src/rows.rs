//! Data-lake rows and WebSocket messages, with their ids and topics.

use serde_json::{Value, json};

use crate::detect::Detected;
use crate::lake::{split_item, text, text_map};

/// The topic every subscriber of `{"all": true}` listens to.
pub const ALL: &str = "all";

/// The topic of one entity.
pub fn entity_topic(participant: &str, key: &serde_json::Map<String, Value>) -> String {
    format!("entity:{participant}:{}", Value::Object(key.clone()))
}

/// The topic of one transaction.
pub fn tx_topic(tx_id: &str) -> String {
    format!("tx:{tx_id}")
}

/// The data-lake row of a detected change, as JSON whose keys are the lake's columns
/// (`crate::lake::COLUMNS`, matched ignoring case) with their types' values: what Firehose
/// converts to Parquet and what the local lake writes. `eventId` is derived from what happened,
/// not from the delivery, so a redelivered record yields the same id: duplicates are detectable.
pub fn row(d: &Detected) -> Value {
    match d {
        Detected::ItemCommitted {
            tx_id,
            participant,
            key,
            item,
            version,
            committed_at,
        } => {
            let event_id = format!("{tx_id}/{participant}/{}", Value::Object(key.clone()));
            let (texts, numbers) = match item {
                Some(item) => {
                    let (t, n) = split_item(item);
                    (Value::Object(t), Value::Object(n))
                }
                None => (Value::Null, Value::Null),
            };
            json!({
                "type": "item",
                "eventId": event_id,
                "txId": tx_id,
                "participant": participant,
                "key": text_map(key),
                "item": texts,
                "numbers": numbers,
                "version": version,
                "committedAt": committed_at,
            })
        }
        Detected::TransactionCompleted {
            tx_id,
            status,
            participants,
            completed_at,
        } => {
            let participants: Vec<Value> = participants
                .iter()
                .map(|p| {
                    let mut p = p.as_object().cloned().unwrap_or_default();
                    for v in p.values_mut() {
                        *v = match &*v {
                            Value::Object(m) => Value::Object(text_map(m)),
                            other => text(other),
                        };
                    }
                    Value::Object(p)
                })
                .collect();
            let items = participants
                .iter()
                .filter(|p| p.get("key").is_some_and(Value::is_object))
                .count();
            json!({
                "type": "transaction",
                "eventId": format!("{tx_id}/{status}"),
                "txId": tx_id,
                "status": status,
                "participants": participants,
                "items": items,
                "committedAt": completed_at,
            })
        }
        Detected::OperatorActed { tx_id, index, note } => {
            // The audit row: who asked what (in `item`: action, by, result) and the status it
            // left, at the time it was asked.
            let field = |name: &str| note.get(name).map(text).unwrap_or(Value::Null);
            json!({
                "type": "operator",
                "eventId": format!("{tx_id}/operator/{index}"),
                "txId": tx_id,
                "item": {"action": field("action"), "by": field("by"), "result": field("result")},
                "status": field("status"),
                "committedAt": note.get("at").cloned().unwrap_or(Value::Null),
            })
        }
    }
}

/// The WebSocket message of a detected change and the topics whose subscribers get it.
pub fn message(d: &Detected) -> (Vec<String>, Value) {
    match d {
        Detected::ItemCommitted {
            tx_id,
            participant,
            key,
            item,
            version,
            ..
        } => (
            vec![entity_topic(participant, key), ALL.to_owned()],
            json!({
                "type": "entity.committed",
                "participant": participant,
                "key": Value::Object(key.clone()),
                "txId": tx_id,
                "item": item.clone().map(Value::Object),
                "version": version,
            }),
        ),
        Detected::TransactionCompleted {
            tx_id,
            status,
            participants,
            ..
        } => (
            vec![tx_topic(tx_id), ALL.to_owned()],
            json!({"type": "transaction.completed", "txId": tx_id, "status": status,
                "participants": participants}),
        ),
        Detected::OperatorActed { tx_id, note, .. } => (
            vec![tx_topic(tx_id), ALL.to_owned()],
            json!({"type": "transaction.operator", "txId": tx_id, "note": note}),
        ),
    }
}

/// The `dt=YYYY-MM-DD` partition (UTC) of an epoch-ms instant.
pub fn partition_date(ms: u64) -> String {
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = (ms / 86_400_000) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dates_are_utc_calendar_days() {
        assert_eq!(partition_date(0), "1970-01-01");
        assert_eq!(partition_date(951_782_400_000), "2000-02-29");
        assert_eq!(partition_date(1_795_305_599_999), "2026-11-21");
        assert_eq!(partition_date(1_795_305_600_000), "2026-11-22");
    }

    #[test]
    fn event_ids_are_stable_across_redelivery() {
        let d = Detected::TransactionCompleted {
            tx_id: "T".into(),
            status: "COMMITTED".into(),
            participants: vec![],
            completed_at: 1,
        };
        assert_eq!(row(&d)["eventId"], row(&d.clone())["eventId"]);
        assert_eq!(row(&d)["eventId"], "T/COMMITTED");
    }
}
