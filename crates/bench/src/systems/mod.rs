//! The systems compared, each doing the same transfer with the same conditions:
//!
//! - [`System::Coordinator`]: this project's coordinator over the `direct` transport (the
//!   participant logic runs in-process: the protocol's own cost, no Lambda hop);
//! - [`System::Native`]: one `TransactWriteItems` with the same updates and conditions — what a
//!   user whose items all live in one account and region would pick instead;
//! - [`System::Serial`]: the seed's shape — prepare one participant after another, then commit
//!   one after another — built from the same participant and log code, driven serially here
//!   (not a change to the core);
//! - [`System::Unit`]: one plain conditional `UpdateItem`, the engine's unit of work.
//!
//! Each transfer notes when its client had the answer apart from when it ended (applied): the
//! same moment for every system today. [`System::INJECTED`] lists the systems of the
//! injected-latency cells ([`crate::inject`]), under the names issue 22 gives them.
//!
//! A transfer that aborts because an item was busy (`conflict` vote, `TransactionConflict`
//! cancellation) is retried as a new transaction after a short random backoff, up to
//! [`crate::config::BenchConfig::max_attempts`] attempts, the same for every system.
//!
//! Here: the systems and the reasons an attempt aborts, and the [`Driver`] that runs a
//! system's transfers (`driver`: wiring, retries, one attempt); `native`: native's
//! `TransactWriteItems` and the unit's `UpdateItem`; `serial`: the seed's serial driver;
//! `outcome`: how a transfer ended.

mod driver;
mod native;
mod outcome;
mod serial;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use twopc_core::coordinator::Coordinator;
use twopc_core::direct::DirectTransport;
use twopc_core::participant::Participant;
use twopc_core::ports::SystemClock;
use twopc_core::record::Target;
use twopc_core::service::{KeySchema, ServiceConfig};
use twopc_dynamo::{DynamoItems, DynamoTxLog};

use crate::counter::RequestCounter;
use crate::tables::Tables;
use crate::timing::{Holds, HopTransport, TimedLog, TimedTransport};
use serial::Serial;

pub use outcome::{Answer, Done, Outcome, Votes};

/// The participant logic as the bench wires it.
pub(crate) type BenchParticipant = Participant<DynamoItems, DynamoTxLog, SystemClock>;
/// The coordinator as the bench wires it: `direct` transport (behind a Lambda hop in the
/// injected cells, zero by default), its ports timed.
pub(crate) type BenchCoordinator = Coordinator<
    TimedLog<DynamoTxLog>,
    TimedTransport<HopTransport<DirectTransport<DynamoItems, DynamoTxLog, SystemClock>>>,
    SystemClock,
>;

/// A system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum System {
    /// `TransactWriteItems`.
    Native,
    /// This coordinator, `direct` transport.
    Coordinator,
    /// Sequential prepare, then sequential commit.
    Serial,
    /// One conditional `UpdateItem`.
    Unit,
    /// This coordinator committing staged (`direct` transport): answered after the record put
    /// and the prepares, one round; finished after the answer.
    Staged,
    /// The staged commit asked to `"wait": "applied"`: answered after the finish.
    StagedApplied,
    /// The default mode: a transfer of plain tables as one native `TransactWriteItems` (with
    /// the record); a hot set's (its services marked hot, as an operator would) staged.
    Auto,
}

impl System {
    /// The transfer systems, in the order each workload runs them.
    pub const TRANSFER: [System; 5] = [
        System::Native,
        System::Auto,
        System::Coordinator,
        System::Staged,
        System::Serial,
    ];

    /// The systems of the injected-latency cells, in the order each cell group runs them.
    pub const INJECTED: &'static [System] = &[
        System::Native,
        System::Coordinator,
        System::Staged,
        System::StagedApplied,
    ];

    /// The system of a short name.
    pub fn from_name(name: &str) -> Option<System> {
        [
            System::Native,
            System::Coordinator,
            System::Serial,
            System::Unit,
            System::Staged,
            System::StagedApplied,
            System::Auto,
        ]
        .into_iter()
        .find(|s| s.name().eq_ignore_ascii_case(name) || (name == "unit" && *s == System::Unit))
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            System::Native => "native",
            System::Coordinator => "coordinator",
            System::Serial => "serial",
            System::Unit => "UpdateItem",
            System::Staged => "staged",
            System::StagedApplied => "staged-applied",
            System::Auto => "auto",
        }
    }

    /// The name of the injected cells (`latest.json`'s `injected[].system`): the coordinator's
    /// five-round path is `classic` there, beside the staged commit of issue 22.
    pub fn injected_name(self) -> &'static str {
        match self {
            System::Coordinator => "classic",
            other => other.name(),
        }
    }

    /// Whether the system keeps transaction records (the coordinator's request body, and an
    /// audit of records left open).
    pub fn keeps_records(self) -> bool {
        matches!(
            self,
            System::Coordinator
                | System::Serial
                | System::Staged
                | System::StagedApplied
                | System::Auto
        )
    }

    /// Sequential round trips before the client's answer for an N-participant transaction
    /// that commits, derived from the protocol: native and unit 1; the coordinator begin,
    /// prepare (all at once), decide, complete (all at once), finalize = 5; the serial driver
    /// begin, N prepares, decide, N commits, finalize = 2N + 3.
    pub fn critical_path(self, participants: usize) -> usize {
        match self {
            System::Native | System::Unit | System::Staged | System::Auto => 1,
            // Stage, make explicit, complete (all at once), finalize.
            System::StagedApplied => 4,
            System::Coordinator => 5,
            System::Serial => 2 * participants + 3,
        }
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
    pub const ALL: [Reason; 4] = [
        Reason::Conflict,
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
            Reason::Condition => "condition",
            Reason::Fenced => "fenced",
            Reason::Other => "other",
        }
    }

    /// The reason of a vote's code, or of native's cancellation codes (comma-separated; the
    /// first of conflict, condition, fenced found wins).
    fn of_code(codes: &str) -> Reason {
        let has = |names: &[&str]| codes.split(',').any(|c| names.contains(&c.trim()));
        if has(&["conflict", "TransactionConflict"]) {
            Reason::Conflict
        } else if has(&["condition", "ConditionalCheckFailed"]) {
            Reason::Condition
        } else if has(&["fenced"]) {
            Reason::Fenced
        } else {
            Reason::Other
        }
    }
}

/// What a [`Driver`] is wired with beyond its tables: nothing for the measured cells; the
/// injected cells add a Lambda hop before every participant call and record lock holds.
#[derive(Clone, Debug, Default)]
pub struct Wiring {
    /// Waited before each prepare, commit and abort of the coordinator.
    pub hop: Duration,
    /// Where prepare → release times per item go.
    pub holds: Option<Holds>,
    /// The set's services are marked hot (`ServiceConfig::hot`): its items take concurrent
    /// reservations, so `auto` stages their transfers.
    pub hot: bool,
}

/// Runs transfers of one system against one cell's tables.
pub struct Driver {
    system: System,
    client: Client,
    tables: Tables,
    coordinator: BenchCoordinator,
    serial: Serial,
    counter: RequestCounter,
    timeout_ms: u64,
    max_attempts: u32,
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
