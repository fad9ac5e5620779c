//! The transaction record, alone enough to finish a transaction: its participants (service,
//! target, key, operation), status, deadline and votes.

use serde::{Deserialize, Serialize};

use crate::codes::{self, Code};
use crate::ids::TxId;
use crate::item::Key;
use crate::op::{Mode, Operation};
use crate::status::TxStatus;

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

impl Target {
    /// What the target reaches, spelled one way: a table by its name (a table ARN's last part),
    /// a function by its name (a function ARN's, without a version or alias), a URL as given
    /// (less a trailing `/`). Two services reaching one thing are one participant under two
    /// names: a configuration naming both is refused, and a request's items are told apart by
    /// this, never by the configuration's spelling.
    pub fn reaches(&self) -> String {
        match self {
            Target::Direct { table } => {
                let name = table
                    .rsplit_once(":table/")
                    .map_or(table.as_str(), |(_, n)| n);
                format!("table {name}")
            }
            Target::Lambda { function } => {
                let name = function
                    .split_once(":function:")
                    .map_or(function.as_str(), |(_, n)| n);
                let name = name.split(':').next().unwrap_or(name);
                format!("function {name}")
            }
            Target::Http { url } => format!("url {}", url.trim_end_matches('/')),
        }
    }
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
    /// The transaction began further ahead of the participant's clock than the fence margin:
    /// its coordinator's clock runs ahead (`rules::too_far_ahead`).
    ClockSkew,
}

impl VoteReason {
    /// Every reason.
    pub const ALL: [VoteReason; 8] = [
        VoteReason::Conflict,
        VoteReason::Condition,
        VoteReason::NotFound,
        VoteReason::Invalid,
        VoteReason::Expired,
        VoteReason::Fenced,
        VoteReason::Unreachable,
        VoteReason::ClockSkew,
    ];

    /// The code of the 409 answer a no vote for this reason aborts with (serde's spelling of
    /// the reason; a test pins the two together).
    pub(crate) fn abort_code(self) -> Code {
        match self {
            VoteReason::Conflict => codes::VOTE_CONFLICT,
            VoteReason::Condition => codes::VOTE_CONDITION,
            VoteReason::NotFound => codes::VOTE_NOT_FOUND,
            VoteReason::Invalid => codes::VOTE_INVALID,
            VoteReason::Expired => codes::VOTE_EXPIRED,
            VoteReason::Fenced => codes::VOTE_FENCED,
            VoteReason::Unreachable => codes::VOTE_UNREACHABLE,
            VoteReason::ClockSkew => codes::VOTE_CLOCK_SKEW,
        }
    }

    /// The stable code, as in the API's `code` field and the votes' `reason`.
    pub fn code(self) -> &'static str {
        self.abort_code().name
    }
}

/// A participant's answer to prepare.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "vote", rename_all = "lowercase")]
pub enum Vote {
    /// Held (locked or reserved) and every rule holds.
    Yes {
        /// How the participant holds the item (records written before modes read as
        /// exclusive).
        #[serde(default)]
        mode: Mode,
    },
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

    /// A `yes` vote.
    pub fn yes(mode: Mode) -> Vote {
        Vote::Yes { mode }
    }

    /// Whether the vote is yes.
    pub fn is_yes(&self) -> bool {
        matches!(self, Vote::Yes { .. })
    }

    /// Whether the participant itself refused (a `no` for any reason but `unreachable`): its
    /// prepare took no lock, as far as that answer goes.
    pub fn refused(&self) -> bool {
        matches!(self, Vote::No { reason, .. } if *reason != VoteReason::Unreachable)
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
    /// The item's key (empty for a custom participant).
    pub key: Key,
    /// What to do to the item (absent for a custom participant).
    #[serde(default, skip_serializing_if = "Operation::is_empty")]
    pub op: Operation,
    /// A custom participant's payload, as the request gave it (absent for a table's). Stored as
    /// its JSON text: opaque to the coordinator, so kept byte for byte, never subject to what a
    /// DynamoDB attribute can hold (numbers of at most 38 digits, for one).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "payload_text"
    )]
    pub payload: Option<serde_json::Value>,
}

/// A payload as its JSON text.
mod payload_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(v: &Option<Value>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&v.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(D::Error::custom),
            None => Ok(None),
        }
    }
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
    /// When a participant asked for this `STAGING` record's recovery (epoch ms; see
    /// [`crate::ports::TxLog::ask_recovery`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_asked: Option<u64>,
    /// When it was decided (epoch ms): the swap to `COMMITTING` or `ABORTING` sets it; a record
    /// written decided (native, or a stager's abandon) was decided when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<u64>,
    /// Operators' actions on it, oldest first ([`ActionNote`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operator_actions: Vec<ActionNote>,
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
            recovery_asked: None,
            decided_at: None,
            operator_actions: vec![],
        }
    }

    /// The same record, created at `began`: a never-begun transaction's record names the
    /// hold it was written for by its `began` (`rules::OwnerRecord`).
    pub fn created(self, began: u64) -> TxRecord {
        TxRecord {
            created_at: began,
            ..self
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
        if TxStatus::decides(self.status, to) {
            r.decided_at = Some(now);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_reaches_one_thing_however_it_is_spelled() {
        let table = |t: &str| Target::Direct { table: t.into() }.reaches();
        let function = |f: &str| Target::Lambda { function: f.into() }.reaches();
        assert_eq!(
            table("arn:aws:dynamodb:us-east-1:123456789012:table/accounts"),
            table("accounts")
        );
        assert_ne!(table("accounts"), table("accounts-2"));
        let arn = "arn:aws:lambda:us-east-1:123456789012:function:accounts";
        assert_eq!(function(arn), function("accounts"));
        assert_eq!(function(&format!("{arn}:live")), function("accounts"));
        assert_ne!(function("accounts"), table("accounts"));
        let url = |u: &str| Target::Http { url: u.into() }.reaches();
        assert_eq!(url("https://pay.example/"), url("https://pay.example"));
    }

    #[test]
    fn each_reason_is_spelled_as_its_abort_code() {
        for reason in VoteReason::ALL {
            let spelled = serde_json::to_value(reason).expect("serialize");
            assert_eq!(spelled, reason.code(), "{reason:?}");
            let back: VoteReason = serde_json::from_value(spelled).expect("deserialize");
            assert_eq!(back, reason);
        }
        let codes: Vec<Code> = VoteReason::ALL.map(VoteReason::abort_code).into();
        assert_eq!(
            codes,
            codes::ABORTS[..VoteReason::ALL.len()],
            "the reasons, in order, then `aborted`"
        );
        assert_eq!(codes::ABORTS.len(), VoteReason::ALL.len() + 1);
    }
}

/// What an operator asks for one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperatorAction {
    /// Run the sweeper's recovery for it now (`Coordinator::recover`).
    Recover,
    /// Abort it where recovery would: undecided and past its deadline.
    Abort,
}

impl OperatorAction {
    /// The name in paths, logs, metrics and the lake.
    pub fn as_str(self) -> &'static str {
        match self {
            OperatorAction::Recover => "recover",
            OperatorAction::Abort => "abort",
        }
    }
}

/// The note an operator's action leaves on its record (`operatorActions`), which the stream
/// turns into a data-lake row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionNote {
    /// What was asked.
    pub action: OperatorAction,
    /// Who asked: the caller's IAM ARN in AWS, `token:<sub>` locally.
    pub by: String,
    /// When (epoch ms).
    pub at: u64,
    /// `done` when it ran, else the refusal's or the failure's code.
    pub result: String,
    /// The record's status after it.
    pub status: TxStatus,
}
