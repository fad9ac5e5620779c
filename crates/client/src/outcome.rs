//! A transaction as the API answers it: [`TxAnswer`] (its status, each participant's vote, why it
//! aborted), read from `POST /transactions` (200, 202, 409) and `GET /transactions/{txId}`.

use serde_json::Value;
use twopc_core::ids::TxId;
use twopc_core::item::Key;
use twopc_core::record::Vote;
use twopc_core::status::TxStatus;

use crate::error::{Error, codes};

/// Where a transaction stands, as the API answered.
#[derive(Clone, Debug, PartialEq)]
pub struct TxAnswer {
    /// The transaction.
    pub tx_id: TxId,
    /// `COMMITTED` or `ABORTED` (final); `COMMITTING` or `ABORTING` (decided, not finished:
    /// the sweeper finishes it, [`Client::wait`](crate::Client::wait) waits for it);
    /// `PREPARING` (a replay that found its first attempt still running).
    pub status: TxStatus,
    /// What the answer says was decided (`outcome`): committed (also a staged commit still
    /// `STAGING`, answered by its coordinator), aborted, or pending. From the status when the
    /// answer has none.
    pub outcome: Outcome,
    /// Whether every participant applied it (`applied`; from the status when absent).
    pub applied: bool,
    /// Each participant, in request order.
    pub participants: Vec<ParticipantOutcome>,
    /// Why it aborted (an aborting or aborted transaction's only).
    pub abort: Option<Abort>,
    /// The answer's JSON as received.
    pub body: Value,
}

/// One participant of a [`TxAnswer`].
#[derive(Clone, Debug, PartialEq)]
pub struct ParticipantOutcome {
    /// The service.
    pub participant: String,
    /// The item (a table's participant; a custom participant has none).
    pub key: Option<Key>,
    /// Its vote, once recorded: yes with the mode it holds its item in, or no with a reason.
    pub vote: Option<Vote>,
}

/// Why a transaction aborted: the first no vote's reason, or `aborted` when its deadline passed
/// before it was decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Abort {
    /// The stable code.
    pub code: AbortCode,
    /// For people.
    pub message: String,
}

codes! {
    /// The stable `code` of an aborted transaction (409 `ABORTED`): a participant's no vote, or
    /// the deadline.
    AbortCode {
    /// An item is held by another live transaction: a new transaction may succeed.
    Conflict = "conflict",
    /// A `require` does not hold (or `put` found the item): the business said no.
    Condition = "condition",
    /// The item does not exist.
    NotFound = "notFound",
    /// The operation or payload cannot apply to this item or service.
    Invalid = "invalid",
    /// The deadline passed before the participant prepared: a new transaction may succeed.
    Expired = "expired",
    /// The transaction already ended on that item (a late prepare): a new one may succeed.
    Fenced = "fenced",
    /// A participant did not answer: a new transaction may succeed.
    Unreachable = "unreachable",
    /// The coordinator's clock ran ahead of a participant's by more than the margin: a new
    /// transaction (maybe on another coordinator) may succeed.
    ClockSkew = "clockSkew",
    /// The deadline passed before the transaction was decided: a new one may succeed.
    Aborted = "aborted",
    }
}

impl AbortCode {
    /// Whether a new transaction (with a new idempotency key) with the same body may commit:
    /// the abort came from timing or contention, not from the data.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            AbortCode::Conflict
                | AbortCode::Expired
                | AbortCode::Fenced
                | AbortCode::Unreachable
                | AbortCode::ClockSkew
                | AbortCode::Aborted
        )
    }
}

pub use twopc_core::coordinator::Outcome;

impl TxAnswer {
    /// Whether the transaction is finished (`COMMITTED` or `ABORTED`).
    pub fn is_finished(&self) -> bool {
        self.status.is_terminal()
    }

    /// Whether it commits: the answer says `committed` (decided; nothing can abort it now),
    /// applied everywhere yet or not ([`TxAnswer::applied`]).
    pub fn is_committed(&self) -> bool {
        self.outcome == Outcome::Committed
    }

    /// Reads a transaction answer: `txId`, `status`, `participants`, and for an abort `code` and
    /// `message` (a `GET` has none: the first no vote's, then).
    pub(crate) fn from_answer(status: u16, body: Value) -> Result<TxAnswer, Error> {
        let bad = |message: String| Error::Protocol { status, message };
        let tx_id = body
            .get("txId")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("no txId in {}", short(&body))))?;
        let tx_id = TxId::parse(tx_id).map_err(|e| bad(e.to_string()))?;
        let tx_status = body
            .get("status")
            .and_then(Value::as_str)
            .and_then(TxStatus::parse)
            .ok_or_else(|| bad(format!("no transaction status in {}", short(&body))))?;
        let participants: Vec<ParticipantOutcome> = body
            .get("participants")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(ParticipantOutcome::from_json)
            .collect();
        let outcome = match body.get("outcome").and_then(Value::as_str) {
            Some("committed") => Outcome::Committed,
            Some("aborted") => Outcome::Aborted,
            Some("pending") => Outcome::Pending,
            Some(other) => return Err(bad(format!("unknown outcome {other:?}"))),
            None => Outcome::of_status(tx_status),
        };
        let applied = body
            .get("applied")
            .and_then(Value::as_bool)
            .unwrap_or_else(|| tx_status.is_terminal());
        let aborting = matches!(tx_status, TxStatus::Aborting | TxStatus::Aborted);
        let abort = aborting.then(|| match body.get("code").and_then(Value::as_str) {
            Some(code) => Abort {
                code: AbortCode::parse(code),
                message: text(&body, "message"),
            },
            None => first_no(&participants).unwrap_or_else(|| Abort {
                code: AbortCode::Aborted,
                message: "the transaction was aborted (its deadline passed before it was decided)"
                    .into(),
            }),
        });
        Ok(TxAnswer {
            tx_id,
            status: tx_status,
            outcome,
            applied,
            participants,
            abort,
            body,
        })
    }
}

impl ParticipantOutcome {
    fn from_json(v: &Value) -> ParticipantOutcome {
        // The vote's fields sit beside the participant's (`"vote", "mode"` or `"vote",
        // "reason", "message"`): gathered, they are the core's `Vote`. Only strings: no number
        // passes through serde here.
        let vote_fields: serde_json::Map<String, Value> = ["vote", "mode", "reason", "message"]
            .into_iter()
            .filter_map(|k| v.get(k).map(|x| (k.to_owned(), x.clone())))
            .collect();
        let vote = v
            .get("vote")
            .and_then(|_| serde_json::from_value(Value::Object(vote_fields)).ok());
        ParticipantOutcome {
            participant: text(v, "participant"),
            key: v
                .get("key")
                .and_then(Value::as_object)
                .map(|k| k.clone().into_iter().collect()),
            vote,
        }
    }
}

fn first_no(participants: &[ParticipantOutcome]) -> Option<Abort> {
    participants.iter().find_map(|p| match &p.vote {
        Some(Vote::No { reason, message }) => Some(Abort {
            code: AbortCode::parse(reason.code()),
            message: message.clone(),
        }),
        _ => None,
    })
}

fn text(v: &Value, field: &str) -> String {
    v.get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn short(v: &Value) -> String {
    v.to_string().chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use twopc_core::op::Mode;
    use twopc_core::record::VoteReason;

    const TX: &str = "1c8fb081-2300-58c5-8504-1a636c82a882";

    #[test]
    fn every_abort_code_is_listed_and_matches_the_cores_vote_reasons() {
        let spelled: Vec<&str> = AbortCode::KNOWN.iter().map(AbortCode::as_str).collect();
        assert_eq!(
            spelled,
            [
                "conflict",
                "condition",
                "notFound",
                "invalid",
                "expired",
                "fenced",
                "unreachable",
                "clockSkew",
                "aborted"
            ]
        );
        for reason in VoteReason::ALL {
            assert!(
                !matches!(AbortCode::parse(reason.code()), AbortCode::Other(_)),
                "{reason:?}"
            );
        }
    }

    #[test]
    fn an_aborted_answer_carries_its_typed_code_and_each_vote() {
        let body = json!({"txId": TX, "status": "ABORTED", "code": "condition",
            "message": "balance gte 1000 (is 25.50)",
            "participants": [
                {"participant": "accounts", "key": {"id": "carol"}, "vote": "no", "reason": "condition", "message": "balance gte 1000 (is 25.50)"},
                {"participant": "accounts", "key": {"id": "bob"}, "vote": "yes", "mode": "reserved"},
                {"participant": "payments"}]});
        let o = TxAnswer::from_answer(409, body).expect("an outcome");
        assert_eq!(o.status, TxStatus::Aborted);
        let abort = o.abort.as_ref().expect("why");
        assert_eq!(abort.code, AbortCode::Condition);
        assert!(!abort.code.is_transient());
        assert_eq!(o.participants[1].vote, Some(Vote::yes(Mode::Reserved)));
        assert_eq!(
            o.participants[1].key,
            Some([("id".into(), json!("bob"))].into())
        );
        assert_eq!(o.participants[2].key, None);
        assert_eq!(o.participants[2].vote, None, "not recorded yet");
        assert!(o.is_finished() && !o.is_committed());
    }

    #[test]
    fn a_read_back_abort_is_explained_by_its_first_no_vote() {
        let body = json!({"txId": TX, "status": "ABORTED", "participants": [
            {"participant": "accounts", "key": {"id": "a"}, "vote": "no", "reason": "conflict", "message": "locked"}]});
        let o = TxAnswer::from_answer(200, body).expect("an outcome");
        assert_eq!(o.abort.map(|a| a.code), Some(AbortCode::Conflict));
        let body = json!({"txId": TX, "status": "COMMITTING", "participants": []});
        let o = TxAnswer::from_answer(202, body).expect("an outcome");
        assert!(o.is_committed() && !o.is_finished() && o.abort.is_none());
    }

    #[test]
    fn a_staged_commit_answered_before_it_is_applied_is_committed() {
        let body = json!({"txId": TX, "status": "STAGING", "outcome": "committed",
            "applied": false, "participants": []});
        let o = TxAnswer::from_answer(200, body).expect("an outcome");
        assert!(o.is_committed() && !o.applied && !o.is_finished());
        let body = json!({"txId": TX, "status": "STAGING", "outcome": "pending",
            "applied": false, "participants": []});
        let o = TxAnswer::from_answer(202, body).expect("an outcome");
        assert!(!o.is_committed() && o.outcome == Outcome::Pending);
        let body = json!({"txId": TX, "status": "STAGING", "outcome": "maybe", "participants": []});
        assert!(TxAnswer::from_answer(200, body).is_err());
    }

    #[test]
    fn an_answer_without_a_transaction_is_a_protocol_error() {
        let e = TxAnswer::from_answer(200, json!({"hello": 1})).unwrap_err();
        assert!(matches!(e, Error::Protocol { status: 200, .. }), "{e}");
    }
}
