//! Commit and outcome detection from stream images (pure).

use std::collections::BTreeMap;

use serde_json::{Map, Number, Value};
use twopc_core::api::participant_outcomes;
use twopc_core::layout::{
    LAST_TX, LOCK, LOCK_TX, OPERATOR_ACTIONS, PARTICIPANTS, PLACEHOLDER, STATUS, TOMBSTONE, TX_ID,
    UPDATED_AT, VERSION, VOTES, is_protocol_attribute,
};
use twopc_core::record::{ParticipantEntry, Vote};
use twopc_core::service::KeySchema;
use twopc_core::status::TxStatus;

/// A table the processor knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableRole {
    /// The transactions table.
    Transactions,
    /// A participant service's table.
    Participant {
        /// The service name.
        participant: String,
        /// The table's key.
        key: KeySchema,
    },
}

/// Table name → role.
pub type Tables = BTreeMap<String, TableRole>;

/// A stream record, reduced to what detection needs (images as exact JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The stream's event id (also Lambda's batch item identifier source).
    pub event_id: String,
    /// The record's sequence number (the batch item identifier Lambda wants back).
    pub sequence_number: String,
    /// The table the change belongs to.
    pub table: String,
    /// When DynamoDB wrote it (epoch ms).
    pub at_ms: u64,
    /// The item before, if any.
    pub old: Option<Map<String, Value>>,
    /// The item after, if any.
    pub new: Option<Map<String, Value>>,
}

/// What a change means to the outside.
#[derive(Clone, Debug, PartialEq)]
pub enum Detected {
    /// A committed change of a participant item.
    ItemCommitted {
        /// The committing transaction.
        tx_id: String,
        /// The service.
        participant: String,
        /// The item's key.
        key: Map<String, Value>,
        /// The item after the commit (business attributes only); None when deleted.
        item: Option<Map<String, Value>>,
        /// The item's `txVersion` after the commit.
        version: Value,
        /// When DynamoDB wrote it (epoch ms).
        committed_at: u64,
    },
    /// A transaction reached its end.
    TransactionCompleted {
        /// The transaction.
        tx_id: String,
        /// `COMMITTED` or `ABORTED`.
        status: String,
        /// The participants as the API shows them (service, key, vote).
        participants: Vec<Value>,
        /// When (epoch ms).
        completed_at: u64,
    },
    /// An operator acted on a transaction (recover, abort): the note appended to its record's
    /// `operatorActions`, with who asked.
    OperatorActed {
        /// The transaction.
        tx_id: String,
        /// Which note of the record this is (0 for the first): with the id, the event's id.
        index: usize,
        /// The note (`ActionNote`: action, by, at, result, status).
        note: Map<String, Value>,
    },
}

/// An item's `txVersion` (0 when it has none): every commit, by the protocol or native,
/// raises it by one and names itself in `lastTx`; nothing else writes either.
fn version(image: Option<&Map<String, Value>>) -> u64 {
    image
        .and_then(|i| i.get(VERSION))
        .and_then(|v| v.as_u64().or_else(|| v.to_string().parse().ok()))
        .unwrap_or(0)
}

fn business(image: &Map<String, Value>) -> Map<String, Value> {
    image
        .iter()
        .filter(|(k, _)| !is_protocol_attribute(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn key_of(image: &Map<String, Value>, schema: &KeySchema) -> Map<String, Value> {
    schema
        .attributes()
        .filter_map(|a| image.get(&a.name).map(|v| (a.name.clone(), v.clone())))
        .collect()
}

/// The operator's note a record change appended, if it appended one: a note is appended
/// alone (`OperatorLog::note_action` writes nothing else), one per write.
fn operator_acted(old: Option<&Map<String, Value>>, new: &Map<String, Value>) -> Option<Detected> {
    let notes = |image: Option<&Map<String, Value>>| {
        image
            .and_then(|i| i.get(OPERATOR_ACTIONS))
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    };
    let (before, after) = (notes(old), notes(Some(new)));
    if after <= before {
        return None;
    }
    let note = new.get(OPERATOR_ACTIONS)?.as_array()?.get(after - 1)?;
    Some(Detected::OperatorActed {
        tx_id: new.get(TX_ID)?.as_str()?.to_owned(),
        index: after - 1,
        note: note.as_object()?.clone(),
    })
}

/// What a change means, if anything.
pub fn detect(change: &Change, tables: &Tables) -> Option<Detected> {
    match tables.get(&change.table)? {
        TableRole::Transactions => {
            let new = change.new.as_ref()?;
            let status = new.get(STATUS)?.as_str()?;
            let before = change
                .old
                .as_ref()
                .and_then(|o| o.get(STATUS))
                .and_then(Value::as_str);
            if let Some(acted) = operator_acted(change.old.as_ref(), new) {
                return Some(acted);
            }
            if !TxStatus::parse(status).is_some_and(TxStatus::is_terminal) || before == Some(status)
            {
                return None;
            }
            // As the API shows them: key (a table's), vote, and reason or mode.
            let field = |name| new.get(name).cloned().unwrap_or(Value::Null);
            let entries: Vec<ParticipantEntry> =
                serde_json::from_value(field(PARTICIPANTS)).unwrap_or_default();
            let votes: Vec<Vote> = serde_json::from_value(field(VOTES)).unwrap_or_default();
            let participants = participant_outcomes(&entries, &votes);
            Some(Detected::TransactionCompleted {
                tx_id: new.get(TX_ID)?.as_str()?.to_owned(),
                status: status.to_owned(),
                participants,
                completed_at: change.at_ms,
            })
        }
        TableRole::Participant { participant, key } => match (&change.old, &change.new) {
            (_, Some(new)) => {
                if new.contains_key(PLACEHOLDER) {
                    return None;
                }
                // A commit raised the version: a protocol commit (which also writes its fence
                // entry) or a native one (which writes none).
                if version(Some(new)) <= version(change.old.as_ref()) {
                    return None;
                }
                let tx = new.get(LAST_TX)?.as_str()?;
                // A committed delete leaves a tombstone.
                let deleted = new.contains_key(TOMBSTONE);
                Some(Detected::ItemCommitted {
                    tx_id: tx.to_owned(),
                    participant: participant.clone(),
                    key: key_of(new, key),
                    item: (!deleted).then(|| business(new)),
                    version: new.get(VERSION).cloned().unwrap_or(Value::Null),
                    committed_at: change.at_ms,
                })
            }
            (Some(old), None) => {
                // A removal of an item its lock held (a committed delete before deletes left
                // tombstones). A placeholder's or a tombstone's removal is not a commit.
                if old.contains_key(TOMBSTONE) || old.contains_key(PLACEHOLDER) {
                    return None;
                }
                let tx = old.get(LOCK)?.get(LOCK_TX)?.as_str()?;
                let version = match old
                    .get(VERSION)
                    .and_then(|v| v.to_string().parse::<u64>().ok())
                {
                    Some(v) => Value::Number(Number::from(v + 1)),
                    None => Value::Number(Number::from(1u64)),
                };
                Some(Detected::ItemCommitted {
                    tx_id: tx.to_owned(),
                    participant: participant.clone(),
                    key: key_of(old, key),
                    item: None,
                    version,
                    committed_at: change.at_ms,
                })
            }
            (None, None) => None,
        },
    }
}

/// When the coordinator wrote a transaction record's change (its `updatedAt`, epoch ms): how
/// old a record is when it reaches the processor. `None` for other tables' records, which carry
/// no clock of their own (the stream's `ApproximateCreationDateTime` is whole seconds in AWS and
/// whole minutes in DynamoDB Local).
pub fn written_ms(change: &Change, tables: &Tables) -> Option<u64> {
    if tables.get(&change.table)? != &TableRole::Transactions {
        return None;
    }
    change.new.as_ref()?.get(UPDATED_AT)?.as_u64()
}

/// A stream image (`serde_dynamo::Item`) as exact JSON (numbers keep their text), through the
/// one attribute-value converter, `twopc_dynamo::codec`. `None` for an empty image or one that has
/// no JSON form.
pub fn image_json(item: &serde_dynamo::Item) -> Option<Map<String, Value>> {
    let map: &std::collections::HashMap<String, serde_dynamo::AttributeValue> = item.as_ref();
    if map.is_empty() {
        return None;
    }
    let item: twopc_dynamo::codec::Item = map
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    twopc_dynamo::codec::from_item(&item).ok()
}

/// The table name in a stream ARN (`arn:aws:dynamodb:…:table/NAME/stream/…`).
pub fn table_from_arn(arn: &str) -> Option<&str> {
    let rest = arn.split_once(":table/")?.1;
    Some(rest.split('/').next().unwrap_or(rest))
}

/// A Lambda stream record as a [`Change`].
pub fn change_of(record: &aws_lambda_events::dynamodb::EventRecord) -> Option<Change> {
    let table = record
        .event_source_arn
        .as_deref()
        .and_then(table_from_arn)
        .or(record.table_name.as_deref())?;
    Some(Change {
        event_id: record.event_id.clone(),
        sequence_number: record
            .change
            .sequence_number
            .clone()
            .unwrap_or_else(|| record.event_id.clone()),
        table: table.to_owned(),
        at_ms: record
            .change
            .approximate_creation_date_time
            .timestamp_millis()
            .max(0) as u64,
        old: image_json(&record.change.old_image),
        new: image_json(&record.change.new_image),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tables() -> Tables {
        [
            ("tx".to_owned(), TableRole::Transactions),
            (
                "acc".to_owned(),
                TableRole::Participant {
                    participant: "accounts".into(),
                    key: KeySchema::string_hash("id"),
                },
            ),
        ]
        .into()
    }

    fn change(table: &str, old: Option<Value>, new: Option<Value>) -> Change {
        let obj = |v: Value| v.as_object().cloned();
        Change {
            event_id: "e".into(),
            sequence_number: "1".into(),
            table: table.into(),
            at_ms: 5,
            old: old.and_then(obj),
            new: new.and_then(obj),
        }
    }

    #[test]
    fn a_prepare_is_not_a_commit() {
        let old = json!({"id": "a", "balance": 1});
        let new = json!({"id": "a", "balance": 1, "lock": {"txId": "T"}, "txFence": {}});
        assert_eq!(
            detect(&change("acc", Some(old), Some(new)), &tables()),
            None
        );
    }

    #[test]
    fn a_native_commit_raises_the_version_without_a_fence_entry() {
        let old = json!({"id": "a", "balance": 1, "txVersion": 2, "lastTx": "S"});
        let new = json!({"id": "a", "balance": 5, "txVersion": 3, "lastTx": "N"});
        match detect(&change("acc", Some(old.clone()), Some(new)), &tables()) {
            Some(Detected::ItemCommitted {
                tx_id,
                item,
                version,
                ..
            }) => {
                assert_eq!(tx_id, "N");
                assert_eq!(
                    item.map(Value::Object),
                    Some(json!({"id": "a", "balance": 5}))
                );
                assert_eq!(version, json!(3));
            }
            other => panic!("{other:?}"),
        }
        // A native create: no image before.
        let created = json!({"id": "c", "balance": 0, "txVersion": 1, "lastTx": "N"});
        assert!(matches!(
            detect(&change("acc", None, Some(created)), &tables()),
            Some(Detected::ItemCommitted { tx_id, .. }) if tx_id == "N"
        ));
        // A write that leaves the version (a prune, a reservation, the service's own) is none.
        let touched = json!({"id": "a", "balance": 1, "note": "x", "txVersion": 2, "lastTx": "S"});
        assert_eq!(
            detect(&change("acc", Some(old), Some(touched)), &tables()),
            None
        );
    }

    #[test]
    fn a_commit_adds_its_committed_fence_entry() {
        let old = json!({"id": "a", "balance": 1, "lock": {"txId": "T"}, "txFence": {"S": {"o": "committed", "x": 1}}});
        let new = json!({"id": "a", "balance": 2, "txVersion": 3, "lastTx": "T", "txFence": {"S": {"o": "committed", "x": 1}, "T": {"o": "committed", "x": 9}}});
        match detect(&change("acc", Some(old), Some(new)), &tables()) {
            Some(Detected::ItemCommitted {
                tx_id,
                key,
                item,
                version,
                ..
            }) => {
                assert_eq!(tx_id, "T");
                assert_eq!(Value::Object(key), json!({"id": "a"}));
                assert_eq!(
                    item.map(Value::Object),
                    Some(json!({"id": "a", "balance": 2}))
                );
                assert_eq!(version, json!(3));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_abort_is_not_a_commit() {
        let old = json!({"id": "a", "lock": {"txId": "T"}, "txFence": {}});
        let new = json!({"id": "a", "txFence": {"T": {"o": "aborted", "x": 9}}});
        assert_eq!(
            detect(&change("acc", Some(old), Some(new)), &tables()),
            None
        );
        let placeholder = json!({"id": "p", "lock": {"txId": "T"}, "txPlaceholder": true});
        assert_eq!(
            detect(&change("acc", Some(placeholder), None), &tables()),
            None
        );
    }

    #[test]
    fn a_committed_delete_leaves_a_tombstone_and_is_a_commit_without_item() {
        let old =
            json!({"id": "a", "balance": 0, "txVersion": 4, "lock": {"txId": "T"}, "txFence": {}});
        let new = json!({"id": "a", "txTombstone": true, "txVersion": 5, "lastTx": "T", "txFence": {"T": {"o": "committed", "b": 1, "x": 9}}});
        match detect(&change("acc", Some(old), Some(new.clone())), &tables()) {
            Some(Detected::ItemCommitted {
                tx_id,
                item: None,
                version,
                ..
            }) => {
                assert_eq!(tx_id, "T");
                assert_eq!(version, json!(5));
            }
            other => panic!("{other:?}"),
        }
        // An aborted create leaves a tombstone too: not a commit; nor is a tombstone's removal.
        let placeholder =
            json!({"id": "p", "lock": {"txId": "U"}, "txPlaceholder": true, "txFence": {}});
        let buried = json!({"id": "p", "txTombstone": true, "txFence": {"U": {"o": "aborted", "b": 1, "x": 9}}});
        assert_eq!(
            detect(
                &change("acc", Some(placeholder), Some(buried.clone())),
                &tables()
            ),
            None
        );
        assert_eq!(detect(&change("acc", Some(new), None), &tables()), None);
        assert_eq!(detect(&change("acc", Some(buried), None), &tables()), None);
    }

    #[test]
    fn a_committed_delete_is_a_commit_without_item() {
        let old = json!({"id": "a", "txVersion": 4, "lock": {"txId": "T"}});
        match detect(&change("acc", Some(old), None), &tables()) {
            Some(Detected::ItemCommitted {
                item: None,
                version,
                ..
            }) => assert_eq!(version, json!(5)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_outcome_lists_each_participant_with_its_vote_custom_ones_included() {
        let old = json!({"txId": "T", "status": "COMMITTING"});
        let new = json!({"txId": "T", "status": "COMMITTED",
            "participants": [
                {"participant": "accounts", "target": {"transport": "direct", "table": "t"},
                 "key": {"id": "a"}, "op": {"add": {"balance": -1}}},
                {"participant": "payments", "target": {"transport": "http", "url": "http://p"},
                 "key": {}, "payload": "{\"card\":\"4242\"}"}],
            "votes": [{"vote": "yes", "mode": "reserved"}, {"vote": "yes", "mode": "exclusive"}]});
        match detect(&change("tx", Some(old), Some(new)), &tables()) {
            Some(Detected::TransactionCompleted { participants, .. }) => assert_eq!(
                participants,
                vec![
                    json!({"participant": "accounts", "key": {"id": "a"}, "vote": "yes", "mode": "reserved"}),
                    json!({"participant": "payments", "vote": "yes"}),
                ]
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn outcomes_come_from_the_status_change_only() {
        let old = json!({"txId": "T", "status": "COMMITTING"});
        let new = json!({"txId": "T", "status": "COMMITTED", "participants": [{"participant": "accounts", "key": {"id": "a"}, "op": {}}]});
        assert!(
            matches!(detect(&change("tx", Some(old), Some(new.clone())), &tables()), Some(Detected::TransactionCompleted { status, .. }) if status == "COMMITTED")
        );
        assert_eq!(
            detect(&change("tx", Some(new.clone()), Some(new)), &tables()),
            None,
            "a rewrite of a terminal record is not a new outcome"
        );
    }

    #[test]
    fn table_names_come_from_stream_arns() {
        assert_eq!(
            table_from_arn(
                "arn:aws:dynamodb:us-east-1:123:table/twopc-accounts/stream/2026-01-01T00:00:00.000"
            ),
            Some("twopc-accounts")
        );
    }

    #[test]
    fn an_operators_note_is_detected_once_with_who_asked() {
        let note = json!({"action": "abort", "by": "token:ops", "at": 7, "result": "done", "status": "ABORTED"});
        let old = json!({"txId": "T", "status": "ABORTED"});
        let new = json!({"txId": "T", "status": "ABORTED", "operatorActions": [note]});
        match detect(&change("tx", Some(old), Some(new.clone())), &tables()) {
            Some(Detected::OperatorActed { tx_id, index, note }) => {
                assert_eq!((tx_id.as_str(), index), ("T", 0));
                assert_eq!(note["by"], "token:ops");
                let row = crate::rows::row(&Detected::OperatorActed { tx_id, index, note });
                assert_eq!(row["type"], "operator");
                assert_eq!(row["eventId"], "T/operator/0");
                assert_eq!(
                    row["item"],
                    json!({"action": "abort", "by": "token:ops", "result": "done"})
                );
                assert_eq!(
                    (row["status"].as_str(), row["committedAt"].as_u64()),
                    (Some("ABORTED"), Some(7))
                );
            }
            other => panic!("{other:?}"),
        }
        // A later write that leaves the notes as they were is no new action.
        assert_eq!(
            detect(&change("tx", Some(new.clone()), Some(new)), &tables()),
            None
        );
    }
}
