//! What coordinators and participants send each other, over every transport: prepare,
//! commit and abort, and their answers. The operation always comes from the durable record (or
//! the lock), never from a client at this point.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::ids::TxId;
use crate::item::Key;
use crate::op::Operation;
use crate::record::{Vote, VoteReason};

/// Prepare, as sent to a participant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepareRequest {
    /// Transaction.
    pub tx_id: TxId,
    /// Its deadline (epoch ms): a prepare arriving later is refused.
    pub deadline: u64,
    /// When it began (epoch ms, the record's `createdAt`).
    pub began: u64,
    /// The item.
    pub key: Key,
    /// The operation to hold in the lock; absent (empty) for a custom participant, whose work
    /// is its payload. The generic participant refuses an empty one (`invalid`).
    #[serde(default, skip_serializing_if = "Operation::is_empty")]
    pub op: Operation,
    /// Who asks.
    pub coordinator: String,
    /// A custom participant's payload: opaque JSON the coordinator carries from the request and
    /// the participant validates in prepare (absent for a table's participant, whose work is
    /// `op`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// The item's heat mark to write with the hold (epoch ms): the coordinator's native attempt
    /// found the item contended (`rules::heat`), so native writes give way there until then.
    /// Absent for every other prepare; a custom participant ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_until: Option<u64>,
}

/// What the lock holder's commit or abort removes from the item's fence, in the same write,
/// and the horizon it sets (computed at prepare from the fence the lock was taken over; see
/// [`crate::rules::plan_prune`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prune {
    /// The entries to remove.
    pub ids: Vec<TxId>,
    /// The item's horizon after the write: at least the `began` of every removed entry.
    pub horizon: u64,
}

/// A participant's answer to prepare.
///
/// `Deserialize` is written by hand: `#[serde(flatten)]` buffers the content, and with
/// `arbitrary_precision` a buffered number no longer reads as `u64`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepareReply {
    /// The vote.
    #[serde(flatten)]
    pub vote: Vote,
    /// What to prune from the fence with the commit or abort (a `yes` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune: Option<Prune>,
}

impl PrepareReply {
    /// A `no` vote.
    pub fn no(reason: VoteReason, message: impl Into<String>) -> PrepareReply {
        PrepareReply {
            vote: Vote::no(reason, message),
            prune: None,
        }
    }
}

impl<'de> Deserialize<'de> for PrepareReply {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut v = Value::deserialize(d)?;
        let mut take = |name: &str| v.as_object_mut().and_then(|o| o.remove(name));
        let prune = match take("prune") {
            None | Some(Value::Null) => None,
            Some(p) => Some(serde_json::from_value(p).map_err(D::Error::custom)?),
        };
        Ok(PrepareReply {
            vote: serde_json::from_value(v).map_err(D::Error::custom)?,
            prune,
        })
    }
}

/// Commit or abort, as sent to a participant. The operation comes from the durable record (or
/// the lock), never from anything a client sends at this point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteRequest {
    /// Transaction.
    pub tx_id: TxId,
    /// Its deadline (epoch ms): the fence entry outlives it.
    pub deadline: u64,
    /// When it began (epoch ms, the record's `createdAt`).
    pub began: u64,
    /// The item.
    pub key: Key,
    /// The operation of the record (absent for a custom participant).
    #[serde(default, skip_serializing_if = "Operation::is_empty")]
    pub op: Operation,
    /// What to prune from the fence in the same write (from the prepare's reply; may be absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune: Option<Prune>,
    /// This item answered the prepare with a `no` (a hint for abort: fence first, since the lock
    /// is most likely not ours; a duplicate prepare that locked it since is still released).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
}

/// A participant's answer to commit or abort.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum CompleteReply {
    /// Done now.
    Done,
    /// Done before (a duplicate): nothing changed.
    AlreadyDone,
    /// The item contradicts the decision (e.g. commit finds neither its lock nor its fence
    /// entry). Never papered over: the transaction stays unfinished and is reported.
    Violation {
        /// What was found.
        message: String,
    },
}

impl CompleteReply {
    /// Whether the participant acknowledged.
    pub fn acknowledged(&self) -> bool {
        !matches!(self, CompleteReply::Violation { .. })
    }
}

/// An inquiry about a staged transaction, as sent to a participant: does it hold the item, or
/// can it never take it? With `prevent` (a recoverer's, past the deadline) the participant makes
/// sure of the second where the first is not so (`rules::inquire`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InquireRequest {
    /// Transaction.
    pub tx_id: TxId,
    /// Its deadline (epoch ms): a prevent's fence entry outlives it.
    pub deadline: u64,
    /// When it began (epoch ms): the horizon a prevent may raise.
    pub began: u64,
    /// The item.
    pub key: Key,
    /// The operation the transaction's request names for the item (a table's; absent for a
    /// custom participant's, and from an older coordinator: not compared). A hold of the
    /// transaction carrying another operation is not evidence of this one: the item named
    /// twice, under two spellings of its key (`rules::inquire`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<Operation>,
    /// The payload the transaction's request gives a custom participant (absent for a table's,
    /// and from an older coordinator: not compared). A state of the transaction holding
    /// another payload is not evidence of this part: one participant's store reached through
    /// two services (the SDK's `inquire`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
    /// Prevent the transaction where it does not hold the item.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prevent: bool,
}

/// What an inquiry found of a `STAGING` transaction on one item (on the wire, the answer to
/// an `inquire` call: `{"inquiry": "held"}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Inquiry {
    /// The transaction holds the item (lock or reservation). Stable while its record is
    /// `STAGING`: only a commit or abort releases a hold, and both follow a decided record.
    Held,
    /// The transaction can never take the item: its `aborted` entry, or a horizon covering it.
    /// Final: an entry leaves the fence only under a horizon that covers it, the horizon never
    /// drops, and tombstones are never removed.
    Prevented,
    /// The transaction committed here: its record is already decided (re-read it).
    Committed,
    /// Neither (a read-only inquiry): its prepare may still land.
    Open,
}

/// A participant's answer to an inquiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InquireReply {
    /// What it found (or made sure of).
    pub inquiry: Inquiry,
}

/// A message to a participant over a transport (`lambda`, `http`):
/// `{"action": "prepare"|"commit"|"abort", "request": {...}}`.
///
/// Parsed through [`serde_json::Value`] by hand, never through a serde-tagged enum: tagged and
/// untagged enums buffer their content and would lose the exact text of numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParticipantCall {
    /// Lock and check.
    Prepare(PrepareRequest),
    /// Apply and unlock.
    Commit(CompleteRequest),
    /// Unlock.
    Abort(CompleteRequest),
    /// Held or prevented? (the staged commit's recovery)
    Inquire(InquireRequest),
}

impl ParticipantCall {
    /// The action name.
    pub fn action(&self) -> &'static str {
        match self {
            ParticipantCall::Prepare(_) => "prepare",
            ParticipantCall::Commit(_) => "commit",
            ParticipantCall::Abort(_) => "abort",
            ParticipantCall::Inquire(_) => "inquire",
        }
    }

    /// The wire form.
    pub fn to_json(&self) -> Value {
        let request = match self {
            ParticipantCall::Prepare(r) => serde_json::to_value(r),
            ParticipantCall::Commit(r) | ParticipantCall::Abort(r) => serde_json::to_value(r),
            ParticipantCall::Inquire(r) => serde_json::to_value(r),
        };
        serde_json::json!({"action": self.action(), "request": request.unwrap_or(Value::Null)})
    }

    /// Reads the wire form; the error says what is wrong.
    pub fn from_json(mut v: Value) -> Result<ParticipantCall, String> {
        let action = v
            .get("action")
            .and_then(Value::as_str)
            .ok_or("missing \"action\" (prepare, commit, abort or inquire)")?
            .to_owned();
        let request = v
            .get_mut("request")
            .map(Value::take)
            .ok_or("missing \"request\"")?;
        let bad = |e: serde_json::Error| format!("{action} request: {e}");
        match action.as_str() {
            "prepare" => serde_json::from_value(request)
                .map(ParticipantCall::Prepare)
                .map_err(bad),
            "commit" => serde_json::from_value(request)
                .map(ParticipantCall::Commit)
                .map_err(bad),
            "abort" => serde_json::from_value(request)
                .map(ParticipantCall::Abort)
                .map_err(bad),
            "inquire" => serde_json::from_value(request)
                .map(ParticipantCall::Inquire)
                .map_err(bad),
            other => Err(format!(
                "unknown action {other:?}; expected prepare, commit, abort or inquire"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn participant_calls_round_trip_with_exact_numbers() {
        let v: Value = serde_json::from_str(
            r#"{"action": "commit", "request": {"txId": "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69",
                "deadline": 1700000000000, "began": 1699999995000, "key": {"id": "alice"},
                "op": {"add": {"balance": 12345678901234567890123456789012345678}}}}"#,
        )
        .expect("json");
        let call = ParticipantCall::from_json(v.clone()).expect("parse");
        let ParticipantCall::Commit(req) = &call else {
            panic!("{call:?}")
        };
        assert_eq!(
            req.op.add["balance"].as_str(),
            "12345678901234567890123456789012345678"
        );
        assert_eq!(
            ParticipantCall::from_json(call.to_json()).expect("again"),
            call
        );
        assert!(
            ParticipantCall::from_json(serde_json::json!({"action": "explode", "request": {}}))
                .is_err()
        );
    }

    #[test]
    fn a_custom_participants_prepare_carries_a_payload_and_no_operation() {
        let text = r#"{"txId": "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69", "deadline": 2, "began": 1,
            "key": {"id": "order-42"}, "coordinator": "c",
            "payload": {"card": "4242", "amount": 12.50}}"#;
        let req: PrepareRequest = serde_json::from_str(text).expect("prepare");
        assert!(req.op.is_empty());
        let payload = req.payload.as_ref().expect("payload");
        assert_eq!(payload["amount"].to_string(), "12.50");
        let wire = serde_json::to_value(&req).expect("ser");
        assert!(wire.get("op").is_none(), "an empty operation is left out");
        assert_eq!(
            serde_json::from_value::<PrepareRequest>(wire).expect("de"),
            req
        );
        // A table's prepare is as before: an operation, no payload.
        let table = PrepareRequest {
            op: Operation::from_json("op", &serde_json::json!({"set": {"n": 1}})).expect("op"),
            payload: None,
            ..req
        };
        let wire = serde_json::to_value(&table).expect("ser");
        assert!(wire.get("payload").is_none());
        assert_eq!(
            serde_json::from_value::<PrepareRequest>(wire).expect("de"),
            table
        );
    }

    #[test]
    fn an_inquiry_and_its_answer_round_trip() {
        let call = ParticipantCall::Inquire(InquireRequest {
            tx_id: TxId::random(),
            deadline: 2,
            began: 1,
            key: [("id".to_owned(), serde_json::json!("alice"))].into(),
            op: Some(
                Operation::from_json("op", &serde_json::json!({"add": {"balance": -1}}))
                    .expect("op"),
            ),
            payload: None,
            prevent: true,
        });
        let wire = call.to_json();
        assert_eq!(wire["action"], "inquire");
        assert_eq!(wire["request"]["prevent"], true);
        assert_eq!(wire["request"]["op"]["add"]["balance"], -1);
        assert_eq!(ParticipantCall::from_json(wire).expect("parse"), call);
        // Without an operation (a custom participant's, an older coordinator's): none on the wire.
        let ParticipantCall::Inquire(req) = call else {
            unreachable!()
        };
        let bare = ParticipantCall::Inquire(InquireRequest { op: None, ..req });
        let wire = bare.to_json();
        assert!(wire["request"].get("op").is_none());
        assert_eq!(ParticipantCall::from_json(wire).expect("parse"), bare);
        let reply: InquireReply =
            serde_json::from_value(serde_json::json!({"inquiry": "prevented"})).expect("reply");
        assert_eq!(reply.inquiry, Inquiry::Prevented);
    }

    #[test]
    fn replies_round_trip() {
        let no = PrepareReply::no(VoteReason::Conflict, "held");
        let yes = PrepareReply {
            vote: Vote::yes(crate::op::Mode::Reserved),
            prune: Some(Prune {
                ids: vec![TxId::random()],
                horizon: 1_700_000_000_123,
            }),
        };
        for r in [no, yes] {
            let text = serde_json::to_string(&r).expect("ser");
            let back: PrepareReply = serde_json::from_str(&text).expect("de from text");
            assert_eq!(back, r);
            let back: PrepareReply =
                serde_json::from_value(serde_json::to_value(&r).expect("ser")).expect("de");
            assert_eq!(back, r);
        }
        let c = CompleteReply::Violation {
            message: "x".into(),
        };
        let back: CompleteReply =
            serde_json::from_value(serde_json::to_value(&c).expect("ser")).expect("de");
        assert_eq!(back, c);
    }
}
