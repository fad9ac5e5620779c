//! The systems compared, each doing the same transfer with the same conditions:
//!
//! - [`System::Native`]: one `TransactWriteItems` with the same updates and conditions — what a
//!   user whose items all live in one account and region would pick instead;
//! - [`System::Auto`]: this project's default mode (`direct` transport): a transfer of plain
//!   tables as one native `TransactWriteItems` with its record, taking the protocol's staged
//!   path when DynamoDB cancels it for a conflict;
//! - [`System::Staged`]: the staged commit (the mode an operator sets for hot items): answered
//!   after the record put and the prepares, one round; finished after the answer;
//! - [`System::Classic`]: the five-round path, the baseline the staged commit improves on.
//!
//! Each transfer notes when its client had the answer apart from when it ended (applied). A
//! transfer whose attempt aborted for a transient reason (an item busy: a `conflict` vote,
//! `TransactionConflict`; a throttle; a `fenced` vote, which the API says to retry) is retried as a new transaction after a jittered backoff,
//! until its deadline ([`crate::config::Retry`]), the same for every system.
//!
//! Here: the systems and the reasons an attempt aborts; `driver`: the [`Driver`] that runs a
//! system's transfers (wiring, retries, one attempt) and, after a cell, the product's sweeper;
//! `native`: native's `TransactWriteItems`; `outcome`: how a transfer ended.

mod driver;
mod native;
mod outcome;

use std::collections::BTreeMap;
use std::fmt;

use aws_sdk_dynamodb::Client;
use twopc_core::coordinator::Coordinator;
use twopc_core::direct::DirectTransport;
use twopc_core::record::Target;
use twopc_core::service::{KeySchema, ServiceConfig};
use twopc_core::sweeper::Sweeper;
use twopc_dynamo::{DynamoItems, DynamoTxLog};

use crate::clock::ModelClock;
use crate::config::Retry;
use crate::counter::RequestCounter;
use crate::tables::Tables;

pub use driver::Swept;
pub use outcome::{AnswerMark, Done, TransferEnd, Votes};

/// The `direct` transport on model time.
type BenchTransport = DirectTransport<DynamoItems, DynamoTxLog, ModelClock>;

/// The coordinator as the bench wires it: the `direct` transport, on model time.
pub(crate) type BenchCoordinator = Coordinator<DynamoTxLog, BenchTransport, ModelClock>;

/// The product's sweeper, as production wires it, on model time.
type BenchSweeper = Sweeper<DynamoTxLog, BenchTransport, ModelClock, DynamoItems>;

/// A system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum System {
    /// `TransactWriteItems`.
    Native,
    /// The default mode.
    Auto,
    /// The staged commit.
    Staged,
    /// The five-round path.
    Classic,
}

impl System {
    /// Every system, in the order a cell group runs them.
    pub const ALL: [System; 4] = [
        System::Native,
        System::Auto,
        System::Staged,
        System::Classic,
    ];

    /// The system of a short name.
    pub fn from_name(name: &str) -> Option<System> {
        System::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }

    /// Short name (`latest.json`'s `system`).
    pub fn name(self) -> &'static str {
        match self {
            System::Native => "native",
            System::Auto => "auto",
            System::Staged => "staged",
            System::Classic => "classic",
        }
    }

    /// Whether the system keeps transaction records.
    pub fn keeps_records(self) -> bool {
        self != System::Native
    }
}

impl fmt::Display for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an attempt aborted, as the report tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// An item was busy (a `conflict` vote; `TransactionConflict`).
    Conflict,
    /// Over a partition's rate past the SDK's retries (`ThrottlingError`; a participant
    /// `unreachable`, its write throttled).
    Throttled,
    /// A `require` did not hold (`condition`; `ConditionalCheckFailed`): insufficient funds.
    Condition,
    /// The transaction had already ended on an item, or its horizon covered it (`fenced`): a
    /// live transaction refused by the fence.
    Fenced,
    /// Anything else (`expired`, `notFound`, `unreachable`, ...).
    Other,
}

impl Reason {
    /// Every reason, in [`Reason::index`] order.
    pub const ALL: [Reason; 5] = [
        Reason::Conflict,
        Reason::Throttled,
        Reason::Condition,
        Reason::Fenced,
        Reason::Other,
    ];

    /// Its slot in per-reason counts.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Conflict => "conflict",
            Reason::Throttled => "throttled",
            Reason::Condition => "condition",
            Reason::Fenced => "fenced",
            Reason::Other => "other",
        }
    }

    /// Whether a new attempt may succeed where this one did not: an item busy, throttled, or
    /// fenced (on a hot item a slow prepare is overtaken by more transactions than the fence
    /// keeps; the API's `fenced` says to retry as a new transaction, as a careful client does).
    pub fn transient(self) -> bool {
        matches!(self, Reason::Conflict | Reason::Throttled | Reason::Fenced)
    }

    /// The reason of a vote's code, or of native's cancellation codes (the first of conflict,
    /// throttled, condition, fenced found wins).
    fn of_codes<'a>(codes: impl IntoIterator<Item = &'a str> + Clone) -> Reason {
        let has = |names: &[&str]| codes.clone().into_iter().any(|c| names.contains(&c));
        if has(&["conflict", "TransactionConflict"]) {
            Reason::Conflict
        } else if has(&["unreachable", "ThrottlingError"]) {
            Reason::Throttled
        } else if has(&["condition", "ConditionalCheckFailed"]) {
            Reason::Condition
        } else if has(&["fenced"]) {
            Reason::Fenced
        } else {
            Reason::Other
        }
    }
}

/// Runs transfers of one system against one cell's tables.
pub struct Driver {
    system: System,
    /// Through the production model (native's calls).
    client: Client,
    /// Straight to the engine, for the sweeper and the reads after a cell.
    admin: Client,
    tables: Tables,
    /// One per worker: each transfer in flight is served by a coordinator of its own, sharing
    /// no memory with the others (as Lambda instances share none).
    coordinators: Vec<BenchCoordinator>,
    sweeper: BenchSweeper,
    log: DynamoTxLog,
    counter: RequestCounter,
    clock: ModelClock,
    retry: Retry,
}

/// The services named in transfer requests: `accounts` and `wallets`, reached `direct`.
pub(crate) fn services(tables: &Tables) -> BTreeMap<String, ServiceConfig> {
    [("accounts", &tables.accounts), ("wallets", &tables.wallets)]
        .into_iter()
        .map(|(name, table)| {
            (
                name.to_owned(),
                ServiceConfig::table(
                    Target::Direct {
                        table: table.clone(),
                    },
                    KeySchema::string_hash("id"),
                ),
            )
        })
        .collect()
}
