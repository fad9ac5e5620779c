//! What an operator reads and does (`docs/operations.md`, "The console"): the listing's query and
//! page, the counts, the note an action leaves on its record, and [`verdict`], whether an action
//! may run, read off the recovery rule ([`rules::recovery`]): an operator runs for one
//! transaction what the sweeper would, never a rule of its own.

use serde::Serialize;

use crate::codes::{self, Code};
use crate::ids::TxId;
use crate::item::{FenceOutcome, ItemState, Key, canonical_key};
use crate::message::Inquiry;
use crate::record::TxRecord;
pub use crate::record::{ActionNote, OperatorAction};
use crate::rules::{self, Recovery};
use crate::status::TxStatus;

/// Whether an action runs, or the refusal's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Run the recovery.
    Run,
    /// Refused, with this code; nothing is written but the note.
    Refuse(Code),
}

/// Whether `action` may run on a record in `status`, its deadline passed or not: where the
/// sweeper would act on it. *Recover* runs the recovery wherever it does something (a decided
/// record is completed; an undecided one past its deadline is aborted, or, `STAGING`, decided
/// by what its participants say); *abort* only where that recovery may abort: undecided and past
/// the deadline. Before the deadline its coordinator may still decide (`not_overdue`); a decided
/// transaction's outcome stands (`already_decided`); an ended one has nothing left to recover
/// (`already_ended`).
pub fn verdict(action: OperatorAction, status: TxStatus, deadline_passed: bool) -> Verdict {
    match (action, rules::recovery(status, deadline_passed)) {
        (_, Recovery::Leave) => Verdict::Refuse(codes::NOT_OVERDUE),
        (OperatorAction::Recover, Recovery::Ended) => Verdict::Refuse(codes::ALREADY_ENDED),
        (OperatorAction::Recover, _) => Verdict::Run,
        (OperatorAction::Abort, Recovery::DecideAbort | Recovery::Inquire) => Verdict::Run,
        (OperatorAction::Abort, Recovery::Complete(_) | Recovery::Ended) => {
            Verdict::Refuse(codes::ALREADY_DECIDED)
        }
    }
}

/// The result of an action that ran.
pub const DONE: &str = "done";

/// Which transactions a listing asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// One status, or (`None`) every unfinished one.
    pub status: Option<TxStatus>,
    /// Unfinished ones only: those whose deadline is before this (epoch ms).
    pub overdue_at: Option<u64>,
    /// Ended ones only: ended at or after this (epoch ms).
    pub since: Option<u64>,
    /// Ended ones only: ended before this (epoch ms).
    pub until: Option<u64>,
    /// Only those with a participant of this service.
    pub participant: Option<String>,
    /// Only those on this item (with `participant`).
    pub key: Option<Key>,
    /// After this entry (the previous page's `next`).
    pub after: Option<ListCursor>,
    /// At most this many index entries read (a page may hold fewer once filtered).
    pub limit: usize,
}

impl ListQuery {
    /// Whether `record` passes the query's filters (status, participant, item).
    pub fn admits(&self, record: &TxRecord) -> bool {
        let status = match self.status {
            Some(s) => record.status == s,
            None => !record.status.is_terminal(),
        };
        let key = self.key.as_ref().map(canonical_key);
        let on = |p: &crate::record::ParticipantEntry| {
            self.participant
                .as_ref()
                .is_none_or(|s| &p.participant == s)
                && key.as_ref().is_none_or(|k| &canonical_key(&p.key) == k)
        };
        status
            && (self.participant.is_none() && key.is_none() || record.participants.iter().any(on))
    }

    /// Whether the query reads ended transactions (the ended index) rather than unfinished ones
    /// (the pending index).
    pub fn ended(&self) -> bool {
        self.status.is_some_and(TxStatus::is_terminal)
    }
}

/// Where a page of a listing ends: its last index entry, as (time, id): the deadline of an
/// unfinished transaction, the end of an ended one. Its text form `<ms>.<txId>` is the API's
/// `next`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListCursor {
    /// The entry's time (epoch ms).
    pub at: u64,
    /// The entry's transaction.
    pub tx_id: TxId,
}

impl ListCursor {
    /// The text form, `<ms>.<txId>`.
    pub fn token(&self) -> String {
        format!("{}.{}", self.at, self.tx_id)
    }

    /// Reads a text form; `None` if it is not one.
    pub fn parse(token: &str) -> Option<ListCursor> {
        let (at, tx) = token.split_once('.')?;
        Some(ListCursor {
            at: at.parse().ok()?,
            tx_id: TxId::parse(tx).ok()?,
        })
    }
}

/// A page of a listing.
#[derive(Clone, Debug, Default)]
pub struct ListPage {
    /// The records: unfinished ones by deadline, oldest first; ended ones by end, newest first.
    pub records: Vec<TxRecord>,
    /// Where the next page starts; `None` on the last.
    pub next: Option<ListCursor>,
}

/// How many transactions are in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Unfinished (every status but `COMMITTED` and `ABORTED`).
    pub pending: u64,
    /// Of those, past their deadline.
    pub overdue: u64,
    /// Committed since `since`.
    pub committed: u64,
    /// Aborted since `since`.
    pub aborted: u64,
    /// The window's start (epoch ms).
    pub since: u64,
}

/// What a transaction holds on one item now, as an operator is shown it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Hold {
    /// Its lock (exclusive).
    Lock {
        /// The lock's expiry: the transaction's deadline (epoch ms).
        expires_at: u64,
        /// Who prepared it.
        coordinator: String,
    },
    /// Its reservation (a commuting operation).
    Reservation {
        /// The reservation's expiry (epoch ms).
        expires_at: u64,
    },
    /// Its fence entry: it ended here so.
    Ended {
        /// `committed` or `aborted`.
        outcome: &'static str,
    },
    /// Nothing of it, and the fence horizon covers it: it can never take the item.
    Covered,
    /// Nothing of it: a prepare could still land (before its deadline).
    Nothing,
    /// The item does not exist (or is a tombstone without its entry).
    NoItem,
    /// A participant's own answer to a read-only inquiry (its table is not read here).
    Inquired {
        /// What it said.
        inquiry: Inquiry,
    },
    /// Not read: why (a custom participant of an ended transaction, an unreachable one).
    Unknown {
        /// Why.
        why: String,
    },
}

/// What `state` (the item, `None` when absent) holds for `tx`, which began at `began`.
pub fn hold(state: Option<&ItemState>, tx: &TxId, began: u64) -> Hold {
    let Some(state) = state else {
        return Hold::NoItem;
    };
    if let Some(lock) = state.lock.as_ref().filter(|l| &l.tx_id == tx) {
        return Hold::Lock {
            expires_at: lock.expires_at,
            coordinator: lock.coordinator.clone(),
        };
    }
    if let Some(r) = state.reservations.get(tx) {
        return Hold::Reservation {
            expires_at: r.expires_at,
        };
    }
    if let Some(entry) = state.fence.get(tx) {
        let outcome = match entry.outcome {
            FenceOutcome::Committed => "committed",
            FenceOutcome::Aborted => "aborted",
        };
        return Hold::Ended { outcome };
    }
    if began <= state.horizon {
        return Hold::Covered;
    }
    if state.tombstone || state.placeholder {
        return Hold::NoItem;
    }
    Hold::Nothing
}

/// In a few words, what a transaction waits for, from its record, the time and, when known,
/// what each participant holds (in participant order).
pub fn waiting_for(record: &TxRecord, now: u64, holds: Option<&[Hold]>) -> String {
    let names = |f: &dyn Fn(&Hold) -> bool| -> String {
        let Some(holds) = holds else {
            return "(see the transaction)".into();
        };
        let found: Vec<&str> = record
            .participants
            .iter()
            .zip(holds)
            .filter(|(_, h)| f(h))
            .map(|(p, _)| p.participant.as_str())
            .collect();
        if found.is_empty() {
            "none".into()
        } else {
            found.join(", ")
        }
    };
    let held = |h: &Hold| {
        matches!(
            h,
            Hold::Lock { .. }
                | Hold::Reservation { .. }
                | Hold::Inquired {
                    inquiry: Inquiry::Held
                }
        )
    };
    let past = now > record.deadline;
    match (record.status, past) {
        (s, _) if s.is_terminal() => "nothing: it ended".into(),
        (TxStatus::Preparing, false) => format!(
            "its coordinator's decision (by the deadline); not holding yet: {}",
            names(&|h| !held(h))
        ),
        (TxStatus::Preparing, true) => {
            "recovery: past its deadline undecided, the sweeper aborts it (or recover now)".into()
        }
        (TxStatus::Staging, false) => {
            "its stager's explicit commit or abort (the deadline has not passed)".into()
        }
        (TxStatus::Staging, true) => format!(
            "recovery: every participant's answer to an inquiry decides it; holding: {}",
            names(&held)
        ),
        (_, _) => format!(
            "completion: the decision reaches the participants still holding: {}",
            names(&held)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TxStatus::*;

    #[test]
    fn an_abort_runs_only_where_recovery_would_abort() {
        use OperatorAction::Abort;
        assert_eq!(verdict(Abort, Preparing, true), Verdict::Run);
        assert_eq!(verdict(Abort, Staging, true), Verdict::Run);
        assert_eq!(
            verdict(Abort, Preparing, false),
            Verdict::Refuse(codes::NOT_OVERDUE)
        );
        assert_eq!(
            verdict(Abort, Staging, false),
            Verdict::Refuse(codes::NOT_OVERDUE)
        );
        for s in [Committing, Aborting, Committed, Aborted] {
            for past in [false, true] {
                assert_eq!(
                    verdict(Abort, s, past),
                    Verdict::Refuse(codes::ALREADY_DECIDED),
                    "{s}"
                );
            }
        }
    }

    #[test]
    fn a_recovery_runs_wherever_the_sweeper_would_act() {
        use OperatorAction::Recover;
        for s in [Committing, Aborting] {
            assert_eq!(verdict(Recover, s, false), Verdict::Run, "{s}");
        }
        assert_eq!(verdict(Recover, Preparing, true), Verdict::Run);
        assert_eq!(
            verdict(Recover, Staging, false),
            Verdict::Refuse(codes::NOT_OVERDUE)
        );
        assert_eq!(
            verdict(Recover, Committed, true),
            Verdict::Refuse(codes::ALREADY_ENDED)
        );
    }

    #[test]
    fn cursors_read_back_their_text() {
        let c = ListCursor {
            at: 42,
            tx_id: TxId::random(),
        };
        assert_eq!(ListCursor::parse(&c.token()), Some(c));
        assert_eq!(ListCursor::parse("x.y"), None);
    }
}

/// One step of a transaction's timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// When (epoch ms).
    pub at: u64,
    /// What: `began`, `deadline`, `recoveryAsked`, `decided`, `retryAfter`, `ended`, or an
    /// operator's action (`recover`, `abort`).
    pub step: String,
    /// In words.
    pub detail: String,
}

/// A transaction's timeline, from what its record keeps, in time order: when it began, its
/// deadline, a participant's ask for recovery, the decision, the sweeper's backoff, the end,
/// and every operator's action. The items keep no times of their own (their fence entries say
/// only how it ended there).
pub fn timeline(record: &TxRecord) -> Vec<Step> {
    let step = |at: u64, step: &str, detail: String| Step {
        at,
        step: step.to_owned(),
        detail,
    };
    let decision = record.status.decision();
    let mut steps = vec![
        step(
            record.created_at,
            "began",
            format!("record written by {}", record.begun_by),
        ),
        step(
            record.deadline,
            "deadline",
            "undecided past it, recovery aborts it".into(),
        ),
    ];
    if let Some(at) = record.recovery_asked {
        steps.push(step(
            at,
            "recoveryAsked",
            "a participant met its holds past the deadline".into(),
        ));
    }
    match (decision, record.decided_at) {
        (Some(d), Some(at)) => steps.push(step(at, "decided", format!("{d:?}").to_lowercase())),
        (Some(d), None) => steps.push(step(
            record.updated_at,
            "decided",
            format!("{d:?} (at or before this; the time was not recorded)").to_lowercase(),
        )),
        (None, _) => {}
    }
    if let Some(at) = record.retry_after {
        steps.push(step(
            at,
            "retryAfter",
            format!(
                "{} recovery attempt(s) failed; the sweeper retries then",
                record.attempts
            ),
        ));
    }
    if record.status.is_terminal() {
        steps.push(step(record.updated_at, "ended", record.status.to_string()));
    }
    for a in &record.operator_actions {
        steps.push(step(
            a.at,
            a.action.as_str(),
            format!("by {}: {} ({})", a.by, a.result, a.status),
        ));
    }
    steps.sort_by_key(|s| s.at);
    steps
}
