//! Records and messages: transaction record, lock, fence, votes, participant messages.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::ids::TxId;
use crate::op::Operation;
use crate::status::TxStatus;

/// An item's key: attribute name → value (a string or a number).
pub type Key = BTreeMap<String, Value>;

/// How a participant service is reached (stored in the record, so recovery needs nothing else).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "lowercase")]
pub enum Target {
    /// The coordinator runs the participant logic on the table itself.
    Direct {
        /// The participant table.
        table: String,
    },
    /// A participant Lambda function, invoked `RequestResponse`.
    Lambda {
        /// Function name or ARN.
        function: String,
    },
    /// An external service speaking the participant JSON over HTTP.
    Http {
        /// Base URL; `/prepare`, `/commit` and `/abort` are appended.
        url: String,
    },
}

/// Why a participant voted no.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VoteReason {
    /// The item is locked by another live transaction.
    Conflict,
    /// A `require` condition does not hold (or `put` found the item already there).
    Condition,
    /// The item does not exist.
    NotFound,
    /// The operation cannot apply to this item.
    Invalid,
    /// The transaction's deadline has passed.
    Expired,
    /// This transaction already ended on this item (a late or duplicated prepare).
    Fenced,
    /// The participant did not answer (timeout, transport error).
    Unreachable,
}

impl VoteReason {
    /// The stable code, as in the API's `code` field.
    pub fn code(self) -> &'static str {
        match self {
            VoteReason::Conflict => "conflict",
            VoteReason::Condition => "condition",
            VoteReason::NotFound => "notFound",
            VoteReason::Invalid => "invalid",
            VoteReason::Expired => "expired",
            VoteReason::Fenced => "fenced",
            VoteReason::Unreachable => "unreachable",
        }
    }
}

/// A participant's answer to prepare.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "vote", rename_all = "lowercase")]
pub enum Vote {
    /// Locked and every rule holds.
    Yes,
    /// Refused.
    No {
        /// Why.
        reason: VoteReason,
        /// For people.
        message: String,
    },
}

impl Vote {
    /// A `no` vote.
    pub fn no(reason: VoteReason, message: impl Into<String>) -> Vote {
        Vote::No {
            reason,
            message: message.into(),
        }
    }

    /// Whether the vote is yes.
    pub fn is_yes(&self) -> bool {
        matches!(self, Vote::Yes)
    }

    /// Whether the participant itself refused (a `no` for any reason but `unreachable`): its
    /// prepare took no lock, as far as that answer goes.
    pub fn refused(&self) -> bool {
        matches!(self, Vote::No { reason, .. } if *reason != VoteReason::Unreachable)
    }
}

/// The lock a prepared transaction holds on an item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lock {
    /// The owner.
    pub tx_id: TxId,
    /// When the owner's deadline passes (epoch ms). Past it, a newcomer may *resolve* the
    /// owner (the lock rule, `docs/protocol.md`); it never frees the lock by itself.
    pub expires_at: u64,
    /// When the owner began (epoch ms, its record's `createdAt`): orders it against the
    /// item's fence horizon.
    pub began: u64,
    /// The pending operation, applied at commit.
    pub op: Operation,
    /// Who prepared it (for people reading the item).
    pub coordinator: String,
}

/// A transaction's outcome as recorded in an item's fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FenceOutcome {
    /// Committed on this item.
    Committed,
    /// Aborted on this item.
    Aborted,
}

/// One fence entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredFenceEntry")]
pub struct FenceEntry {
    /// The outcome.
    #[serde(rename = "o")]
    pub outcome: FenceOutcome,
    /// When the transaction began (epoch ms): removing the entry raises the item's horizon to
    /// at least this.
    #[serde(rename = "b")]
    pub began: u64,
    /// When the entry is stale (epoch ms): a later write removes it unless the fence has room.
    #[serde(rename = "x")]
    pub expires_at: u64,
}

/// A fence entry as stored: entries written before the horizon existed have no `b`. Their
/// `x` (at least their deadline, so later than their begin) stands in: removing such an entry
/// then raises the horizon at least as far as needed, never less (safe; at worst a live
/// transaction's prepare is refused for a while after the upgrade).
#[derive(Deserialize)]
struct StoredFenceEntry {
    o: FenceOutcome,
    b: Option<u64>,
    x: u64,
}

impl From<StoredFenceEntry> for FenceEntry {
    fn from(e: StoredFenceEntry) -> Self {
        FenceEntry {
            outcome: e.o,
            began: e.b.unwrap_or(e.x),
            expires_at: e.x,
        }
    }
}

/// A participant item as the protocol sees it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ItemState {
    /// The lock, if a transaction holds one.
    pub lock: Option<Lock>,
    /// Recent transaction outcomes on the item.
    pub fence: BTreeMap<TxId, FenceEntry>,
    /// The fence horizon (`txFenceHorizon`, 0 when absent): every transaction whose entry was
    /// removed began at or before it, and a prepare of a transaction that began at or before
    /// it is refused. See "The fence horizon" in `docs/architecture.md`.
    pub horizon: u64,
    /// A placeholder locked by a creating prepare: readers treat it as absent.
    pub placeholder: bool,
    /// What a committed delete (or an aborted create) leaves: the key, the fence and the
    /// horizon, so that late prepares stay refused. Readers treat it as absent; a creating
    /// prepare may take it.
    pub tombstone: bool,
    /// The business attributes (protocol attributes removed).
    pub attributes: BTreeMap<String, Value>,
}

impl ItemState {
    /// What the protocol's rules read of this item, for transaction `tx` (which began at
    /// `began`) at time `now`.
    pub fn seen_by(&self, tx: &TxId, began: u64, now: u64) -> crate::rules::Seen {
        use crate::rules::{Holder, Seen, Shape};
        Seen {
            shape: if self.placeholder {
                Shape::Placeholder
            } else if self.tombstone {
                Shape::Tombstone
            } else {
                Shape::Real
            },
            holder: match &self.lock {
                None => Holder::Nobody,
                Some(l) if &l.tx_id == tx => Holder::Me,
                Some(l) => Holder::Other {
                    expired: now > l.expires_at,
                },
            },
            entry: self.fence.get(tx).map(|e| e.outcome),
            covered: began <= self.horizon,
        }
    }
}

/// A participant as recorded in the transaction record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParticipantEntry {
    /// The service name.
    pub participant: String,
    /// How it is reached.
    pub target: Target,
    /// The item's key.
    pub key: Key,
    /// What to do to the item.
    pub op: Operation,
}

/// The transaction record: alone enough to finish the transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TxRecord {
    /// Id.
    pub tx_id: TxId,
    /// Status.
    pub status: TxStatus,
    /// Participants, in request order.
    pub participants: Vec<ParticipantEntry>,
    /// Votes, in participant order; empty until decided.
    #[serde(default)]
    pub votes: Vec<Vote>,
    /// Prepare must be decided by then (epoch ms).
    pub deadline: u64,
    /// Epoch ms.
    pub created_at: u64,
    /// Epoch ms.
    pub updated_at: u64,
    /// The client's idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Hash of the request body: the same key with another body is refused.
    pub request_hash: String,
    /// The coordinator run that began it (tells our own retried begin from a client replay).
    pub begun_by: String,
    /// Recovery attempts that could not finish it.
    #[serde(default)]
    pub attempts: u32,
    /// Not scheduled for recovery before then (epoch ms); set by the sweeper's backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

impl TxRecord {
    /// The record the lock rule writes for a lock whose owner never began: `ABORTED`, so that
    /// owner can never begin (its begin is conditional on no record).
    pub fn never_began(tx: &TxId, now: u64) -> TxRecord {
        TxRecord {
            tx_id: tx.clone(),
            status: TxStatus::Aborted,
            participants: vec![],
            votes: vec![],
            deadline: now,
            created_at: now,
            updated_at: now,
            idempotency_key: None,
            request_hash: String::new(),
            begun_by: "resolver (the transaction never began)".into(),
            attempts: 0,
            retry_after: None,
        }
    }

    /// The record as a successful status swap to `to` leaves it (what [`TxLog::transition`]
    /// writes, computed here instead of read back).
    ///
    /// [`TxLog::transition`]: crate::ports::TxLog::transition
    pub fn moved(&self, to: TxStatus, votes: Option<&[Vote]>, now: u64) -> TxRecord {
        let mut r = self.clone();
        r.status = to;
        r.updated_at = now;
        if let Some(v) = votes {
            r.votes = v.to_vec();
        }
        if to.is_terminal() {
            r.retry_after = None;
        }
        r
    }
}

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
    /// The operation to hold in the lock.
    pub op: Operation,
    /// Who asks.
    pub coordinator: String,
}

/// What the lock holder's commit or abort removes from the item's fence, in the same write,
/// and the horizon it sets (computed at prepare from the fence the lock was taken over; see
/// [`crate::participant::plan_prune`]).
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
        let prune = match v.as_object_mut().and_then(|o| o.remove("prune")) {
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
    /// The operation of the record.
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
}

impl ParticipantCall {
    /// The action name.
    pub fn action(&self) -> &'static str {
        match self {
            ParticipantCall::Prepare(_) => "prepare",
            ParticipantCall::Commit(_) => "commit",
            ParticipantCall::Abort(_) => "abort",
        }
    }

    /// The wire form.
    pub fn to_json(&self) -> Value {
        let request = match self {
            ParticipantCall::Prepare(r) => serde_json::to_value(r),
            ParticipantCall::Commit(r) | ParticipantCall::Abort(r) => serde_json::to_value(r),
        };
        serde_json::json!({"action": self.action(), "request": request.unwrap_or(Value::Null)})
    }

    /// Reads the wire form; the error says what is wrong.
    pub fn from_json(mut v: Value) -> Result<ParticipantCall, String> {
        let action = v
            .get("action")
            .and_then(Value::as_str)
            .ok_or("missing \"action\" (prepare, commit or abort)")?
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
            other => Err(format!(
                "unknown action {other:?}; expected prepare, commit or abort"
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
    fn a_fence_entry_without_its_begin_takes_its_expiry_as_an_upper_bound() {
        let old: FenceEntry =
            serde_json::from_str(r#"{"o": "committed", "x": 1700000125000}"#).expect("old entry");
        assert_eq!(old.began, 1_700_000_125_000);
        let new = FenceEntry {
            outcome: FenceOutcome::Aborted,
            began: 1_700_000_000_000,
            expires_at: 1_700_000_015_000,
        };
        let back: FenceEntry =
            serde_json::from_str(&serde_json::to_string(&new).expect("ser")).expect("de");
        assert_eq!(back, new);
    }

    #[test]
    fn replies_round_trip() {
        let no = PrepareReply::no(VoteReason::Conflict, "held");
        let yes = PrepareReply {
            vote: Vote::Yes,
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
