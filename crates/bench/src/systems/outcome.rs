//! How a transfer ended: its [`TransferEnd`], the [`Votes`] of its attempts, the [`Done`] record
//! of attempts and aborts, and the [`AnswerMark`] mark of when its client had the answer.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use twopc_core::ids::TxId;
use twopc_core::op::Mode;
use twopc_core::record::{TxRecord, Vote, VoteReason};

use super::Reason;
use crate::counter::RequestCounter;

/// How one attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptEnd {
    /// Committed (answered so; the finish may have left the rest to the sweeper).
    Committed,
    /// Aborted, and why (with the codes it was refused with).
    Aborted(Reason, String),
    /// An error: the client does not know the outcome (the transaction, if it may exist).
    Failed(String, Option<TxId>),
}

/// How one transfer ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransferEnd {
    /// Applied (or decided committed: what is left is the sweeper's).
    Committed,
    /// Every attempt until the deadline aborted for a transient reason (busy, throttled).
    Busy,
    /// Aborted for another reason (a condition failed: not expected with the seeded balances).
    Refused(String),
    /// An error: the outcome is unknown to the client; `tx` is read back after the sweeper.
    Failed {
        /// What happened.
        why: String,
        /// The transaction, if its record may exist.
        tx: Option<TxId>,
    },
}

impl TransferEnd {
    /// What went wrong, if it failed rather than committed or aborted.
    pub fn failure(&self) -> Option<String> {
        match self {
            TransferEnd::Failed { why, .. } => Some(why.clone()),
            _ => None,
        }
    }
}

/// The votes of a transfer's attempts (zero for native).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Votes {
    /// `yes` votes of participants that reserved their item (commuting operations).
    pub reserved: u32,
    /// `yes` votes of participants that locked their item.
    pub exclusive: u32,
    /// `no` votes for `fenced`: a live transaction refused by an item's fence or horizon.
    pub fenced: u32,
}

impl Votes {
    /// The votes of an attempt's record.
    pub(super) fn of(record: &TxRecord) -> Votes {
        let mut v = Votes::default();
        for vote in &record.votes {
            match vote {
                Vote::Yes {
                    mode: Mode::Reserved,
                } => v.reserved += 1,
                Vote::Yes {
                    mode: Mode::Exclusive,
                } => v.exclusive += 1,
                Vote::No {
                    reason: VoteReason::Fenced,
                    ..
                } => v.fenced += 1,
                Vote::No { .. } => {}
            }
        }
        v
    }

    pub(crate) fn add(&mut self, o: Votes) {
        self.reserved += o.reserved;
        self.exclusive += o.exclusive;
        self.fenced += o.fenced;
    }
}

/// A transfer's end, how many attempts it took, and why the others aborted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Done {
    /// The end.
    pub end: TransferEnd,
    /// Attempts (transactions) used.
    pub attempts: u32,
    /// Attempts that aborted, by [`Reason::index`] (the last one included if it aborted).
    pub aborted: [u32; Reason::ALL.len()],
    /// The votes of every attempt.
    pub votes: Votes,
    /// When the client had its answer (the last attempt's): at or before the transfer's end.
    pub answered: Instant,
    /// Sequential rounds of DynamoDB requests from the transfer's start to its answer, as the
    /// [`RequestCounter`] counts them (meaningful with one transfer in flight).
    pub rounds: u64,
    /// Wall time spent in the coordinator (its answer and the work after it), every attempt.
    pub coordinator: Duration,
    /// Attempts whose finish left the record open for the sweeper.
    pub left_open: u32,
}

/// A vote's reason as the report counts it.
pub(super) fn reason_of(reason: VoteReason) -> Reason {
    Reason::of_codes([reason.code()])
}

/// The moment an attempt's client had its answer, and the rounds counted by then: marked once,
/// by whoever gives the answer (for every system today, the end of the attempt). Clones share
/// the mark, so one can move into a callback or a task.
#[derive(Clone, Debug)]
pub struct AnswerMark {
    counter: RequestCounter,
    at: Arc<OnceLock<(Instant, u64)>>,
}

impl AnswerMark {
    /// Not marked yet; rounds counted by `counter`.
    pub(super) fn new(counter: &RequestCounter) -> AnswerMark {
        AnswerMark {
            counter: counter.clone(),
            at: Arc::default(),
        }
    }

    /// Notes that the answer was given now (later calls change nothing).
    pub fn mark(&self) {
        self.get();
    }

    /// When the answer was given and the rounds counted by then (now, if not marked yet).
    pub(super) fn get(&self) -> (Instant, u64) {
        *self
            .at
            .get_or_init(|| (Instant::now(), self.counter.snapshot().rounds))
    }
}
