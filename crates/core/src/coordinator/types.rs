//! The coordinator's configuration ([`CoordinatorConfig`], [`CommitMode`]) and what it answers:
//! [`Outcome`], [`Submitted`], [`Answered`], [`Finish`], [`SubmitError`].

use std::collections::BTreeMap;

pub use crate::rules::CommitMode;

use crate::ids::TxId;
use crate::message::Prune;
use crate::ports::PortError;
use crate::record::{TxRecord, Vote};
use crate::request::{Limits, RequestError};
use crate::service::ServiceConfig;
use crate::status::{Decision, TxStatus};

/// The coordinator's configuration.
#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    /// Who this coordinator is (logged, written into locks).
    pub id: String,
    /// Services by name.
    pub services: BTreeMap<String, ServiceConfig>,
    /// Limits and defaults.
    pub limits: Limits,
    /// How transactions are committed.
    pub mode: CommitMode,
    /// How long an item found contended stays marked hot (ms, `TWOPC_HEAT_WINDOW_MS`): native
    /// attempts avoid it until a window after the last contention seen there
    /// ([`rules::heat`](crate::rules::heat)).
    pub heat_window_ms: u64,
}

impl CoordinatorConfig {
    /// The default [`CoordinatorConfig::heat_window_ms`]: long enough that a coordinator pays
    /// one refused native attempt per hot item every few seconds, short enough that an item
    /// that cools goes back to one `TransactWriteItems` within seconds.
    pub const DEFAULT_HEAT_WINDOW_MS: u64 = 10_000;
}

/// What the client is told about a transaction: its outcome as far as the answering
/// coordinator may tell. A 200 means *decided*; whether every participant applied it is
/// [`Submitted::applied`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Committed: decided (`COMMITTING`, `COMMITTED`), or implicitly committed and answered by
    /// its stager.
    Committed,
    /// Aborted.
    Aborted,
    /// Not decided yet (its coordinator may still be at work, or recovery will end it).
    Pending,
}

impl Outcome {
    /// What a record alone says (anyone but the stager).
    pub fn of(record: &TxRecord) -> Outcome {
        Outcome::of_status(record.status)
    }

    /// What a status alone says.
    pub fn of_status(status: TxStatus) -> Outcome {
        match status.decision() {
            Some(Decision::Commit) => Outcome::Committed,
            Some(Decision::Abort) => Outcome::Aborted,
            None => Outcome::Pending,
        }
    }

    /// The name in the API's `outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Committed => "committed",
            Outcome::Aborted => "aborted",
            Outcome::Pending => "pending",
        }
    }
}

/// A transaction as answered: the record as it stood, and the outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The record as the answer saw it (the stager's with its votes, before it is written).
    pub record: TxRecord,
    /// What the client is told.
    pub outcome: Outcome,
}

impl Submitted {
    /// From a record, by what it says.
    pub fn of(record: TxRecord) -> Submitted {
        Submitted {
            outcome: Outcome::of(&record),
            record,
        }
    }

    /// Whether every participant applied the outcome (the record is terminal).
    pub fn applied(&self) -> bool {
        self.record.status.is_terminal()
    }
}

/// What is left to do after an answer: make the commit explicit (or complete the abort),
/// complete every participant, finalize. Run by [`Coordinator::finish`](super::Coordinator::finish).
#[derive(Debug)]
#[must_use = "a staged transaction is finished by Coordinator::finish (or, if dropped, by recovery)"]
pub struct Finish {
    pub(super) record: TxRecord,
    pub(super) votes: Vec<Vote>,
    pub(super) prunes: Vec<Option<Prune>>,
    pub(super) planned: Decision,
}

impl Finish {
    /// The transaction.
    pub fn tx_id(&self) -> &TxId {
        &self.record.tx_id
    }
}

/// A transaction as answered, and the work left after the answer
/// ([`Coordinator::submit`](super::Coordinator::submit)).
#[derive(Debug)]
pub struct Answered {
    /// What to answer now.
    pub answer: Submitted,
    /// What to run after answering, by [`Coordinator::finish`](super::Coordinator::finish)
    /// (`None`: nothing left, or left to recovery). A caller with no client to answer first
    /// (a test, a benchmark) runs it at once.
    pub finish: Option<Finish>,
}

impl Answered {
    /// An answer with nothing left to do after it.
    pub(super) fn done(answer: Submitted) -> Answered {
        Answered {
            answer,
            finish: None,
        }
    }
}

/// Why `submit` did not produce an outcome.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The request is wrong; nothing was written.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A store could not be reached; the transaction (if `tx_id` is set) is left for recovery.
    #[error("transaction store unavailable")]
    Unavailable {
        /// The transaction, if its record may exist.
        tx_id: Option<TxId>,
        /// Cause.
        #[source]
        source: PortError,
    },
}

impl From<PortError> for SubmitError {
    fn from(source: PortError) -> Self {
        SubmitError::Unavailable {
            tx_id: None,
            source,
        }
    }
}
