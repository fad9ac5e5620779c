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

use std::collections::{BTreeMap, HashMap};
use std::error::Error as StdError;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use rand::Rng;
use serde_json::Value;
use twopc_core::coordinator::{CommitMode, Coordinator, CoordinatorConfig};
use twopc_core::direct::DirectTransport;
use twopc_core::ids::TxId;
use twopc_core::layout;
use twopc_core::message::{CompleteRequest, PrepareReply, PrepareRequest};
use twopc_core::op::Mode;
use twopc_core::participant::Participant;
use twopc_core::ports::{Clock, Created, Swapped, SystemClock, TxLog};
use twopc_core::record::{Target, TxRecord, Vote, VoteReason};
use twopc_core::request::{KeySchema, Limits, ServiceConfig, TxRequest};
use twopc_core::status::{Decision, TxStatus};
use twopc_dynamo::{DynamoItems, DynamoNative, DynamoTxLog};

use crate::BenchError;
use crate::capacity::in_step;
use crate::config::BenchConfig;
use crate::counter::RequestCounter;
use crate::tables::Tables;
use crate::timing::{Holds, HopTransport, StepTimes, TimedLog, TimedTransport};
use crate::workload::{MEMO, Transfer, account_id};

/// The participant logic as the bench wires it.
pub type BenchParticipant = Participant<DynamoItems, DynamoTxLog, SystemClock>;
/// The coordinator as the bench wires it: `direct` transport (behind a Lambda hop in the
/// injected cells, zero by default), its ports timed.
pub type BenchCoordinator = Coordinator<
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

/// How one transfer ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Applied.
    Committed,
    /// Aborted because an item was busy, on every attempt.
    Conflict,
    /// Aborted for another reason (a condition failed: not expected with the seeded balances).
    Refused(String),
    /// Decided but not finished (a record left `COMMITTING`/`ABORTING`): counts as a failure.
    Unfinished(String),
    /// An error.
    Failed(String),
}

impl Outcome {
    /// Why it aborted (`None`: committed, or a failure rather than an abort).
    pub fn reason(&self) -> Option<Reason> {
        match self {
            Outcome::Conflict => Some(Reason::Conflict),
            Outcome::Refused(code) => Some(Reason::of_code(code)),
            Outcome::Committed | Outcome::Unfinished(_) | Outcome::Failed(_) => None,
        }
    }
}

/// The votes of a transfer's attempts (coordinator and serial driver; zero for the others).
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
    fn of(record: &TxRecord) -> Votes {
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
    pub outcome: Outcome,
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
    pub rounds_to_answer: u64,
}

/// The moment an attempt's client had its answer, and the rounds counted by then: marked once,
/// by whoever gives the answer (for every system today, the end of the attempt). Clones share
/// the mark, so one can move into a callback or a task.
#[derive(Clone, Debug)]
pub struct Answer {
    counter: RequestCounter,
    at: Arc<OnceLock<(Instant, u64)>>,
}

impl Answer {
    fn new(counter: &RequestCounter) -> Answer {
        Answer {
            counter: counter.clone(),
            at: Arc::default(),
        }
    }

    /// Notes that the answer was given now (later calls change nothing).
    pub fn mark(&self) {
        self.get();
    }

    fn get(&self) -> (Instant, u64) {
        *self
            .at
            .get_or_init(|| (Instant::now(), self.counter.snapshot().rounds))
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
pub fn services(tables: &Tables) -> BTreeMap<String, ServiceConfig> {
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

impl Driver {
    /// Wires `system` over `tables`; `counter` is the one `client` reports to.
    pub fn new(
        system: System,
        (client, counter): (Client, RequestCounter),
        tables: Tables,
        config: &BenchConfig,
        (times, wiring): (StepTimes, Wiring),
    ) -> Driver {
        let (timeout_ms, max_attempts) = (config.timeout_ms, config.max_attempts);
        let log = DynamoTxLog::new(client.clone(), &tables.tx);
        let participant = Participant::new(
            DynamoItems::new(client.clone()),
            log.clone(),
            SystemClock,
            config.participant(),
        );
        let config = CoordinatorConfig {
            id: "twopc-bench".into(),
            services: services(&tables)
                .into_iter()
                .map(|(name, mut s)| {
                    s.hot = wiring.hot;
                    (name, s)
                })
                .collect(),
            limits: Limits::default(),
            mode: match system {
                System::Staged | System::StagedApplied => CommitMode::Staged,
                System::Auto => CommitMode::Auto,
                _ => CommitMode::Classic,
            },
        };
        let serial = Serial {
            log: log.clone(),
            participant: participant.clone(),
            config: config.clone(),
        };
        let transport = HopTransport::new(DirectTransport::new(participant), wiring.hop);
        let native = Arc::new(DynamoNative::new(client.clone(), log.clone()));
        let coordinator = Coordinator::new(
            TimedLog::new(log, times.clone()),
            TimedTransport::new(transport, times).with_holds(wiring.holds),
            SystemClock,
            config,
        )
        .with_native(native);
        Driver {
            system,
            client,
            tables,
            coordinator,
            serial,
            counter,
            timeout_ms,
            max_attempts: max_attempts.max(1),
        }
    }

    /// The system.
    pub fn system(&self) -> System {
        self.system
    }

    /// The transaction log (for the audit of unfinished records).
    pub fn log(&self) -> &DynamoTxLog {
        &self.serial.log
    }

    /// Runs one transfer to its end, retrying conflicts.
    pub async fn transfer(&self, t: &Transfer) -> Done {
        let body = self
            .system
            .keeps_records()
            .then(|| t.request(self.timeout_ms));
        let rounds_at_start = self.counter.snapshot().rounds;
        let mut attempts = 0;
        let mut aborted = [0; Reason::ALL.len()];
        let mut votes = Votes::default();
        loop {
            attempts += 1;
            let answer = Answer::new(&self.counter);
            let (outcome, v) = self.attempt(t, body.as_ref(), &answer).await;
            votes.add(v);
            if let Some(r) = outcome.reason() {
                aborted[r.index()] += 1;
            }
            if outcome != Outcome::Conflict || attempts >= self.max_attempts {
                let (answered, rounds) = answer.get();
                return Done {
                    outcome,
                    attempts,
                    aborted,
                    votes,
                    answered,
                    rounds_to_answer: rounds.saturating_sub(rounds_at_start),
                };
            }
            // Jittered exponential backoff: 0..2^attempts ms.
            let ms = rand::rng().random_range(0..=1u64 << attempts);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    /// One attempt. Whoever gives the client its answer marks `answer` (every system today
    /// when its call returns: answered once applied).
    async fn attempt(
        &self,
        t: &Transfer,
        body: Option<&Value>,
        answer: &Answer,
    ) -> (Outcome, Votes) {
        let record = match (self.system, body) {
            (System::Coordinator, Some(body)) => self
                .coordinator
                .submit(body, None)
                .await
                .map_err(|e| chain(&e)),
            (System::Serial, Some(body)) => self.serial.run(body).await.map_err(|e| chain(&e)),
            // The answer when the client would get it; the transfer ends once it is applied
            // (in Lambda the extension finishes it before the environment takes the next
            // request).
            (System::Staged | System::StagedApplied | System::Auto, Some(body)) => {
                match self.coordinator.stage(body, None).await {
                    Ok(staged) => {
                        if self.system != System::StagedApplied {
                            answer.mark();
                        }
                        match staged.finish {
                            Some(finish) => {
                                self.coordinator.finish(finish).await.map_err(|e| chain(&e))
                            }
                            None => Ok(staged.answer.record),
                        }
                    }
                    Err(e) => Err(chain(&e)),
                }
            }
            (System::Native, _) => {
                let outcome = self.native(t).await;
                answer.mark();
                return (outcome, Votes::default());
            }
            (System::Unit, _) => {
                let outcome = self.unit(t).await;
                answer.mark();
                return (outcome, Votes::default());
            }
            (_, None) => Err("no request body".into()),
        };
        answer.mark();
        match record {
            Ok(record) => (classify(&record), Votes::of(&record)),
            Err(e) => (Outcome::Failed(e), Votes::default()),
        }
    }

    async fn native(&self, t: &Transfer) -> Outcome {
        let tx = TxId::random().to_string();
        let legs = t
            .debits
            .iter()
            .map(|k| (&self.tables.accounts, *k, true))
            .chain(t.credits.iter().map(|k| (&self.tables.wallets, *k, false)));
        let mut request = self.client.transact_write_items();
        for (table, k, debit) in legs {
            let update = match leg(table, k, (t.amount, debit, t.exclusive), &tx) {
                Ok(u) => u,
                Err(e) => return Outcome::Failed(e),
            };
            request = request.transact_items(TransactWriteItem::builder().update(update).build());
        }
        match request.send().await {
            Ok(_) => Outcome::Committed,
            Err(e) => match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
                    let codes: Vec<&str> = c
                        .cancellation_reasons()
                        .iter()
                        .filter_map(|r| r.code())
                        .filter(|c| *c != "None")
                        .collect();
                    if codes.contains(&"TransactionConflict") {
                        Outcome::Conflict
                    } else {
                        Outcome::Refused(codes.join(","))
                    }
                }
                Some(TransactWriteItemsError::TransactionInProgressException(_)) => {
                    Outcome::Conflict
                }
                _ => Outcome::Failed(DisplayErrorContext(&e).to_string()),
            },
        }
    }

    async fn unit(&self, t: &Transfer) -> Outcome {
        let Some(k) = t.credits.first() else {
            return Outcome::Failed("a unit write needs one key".into());
        };
        let (names, values) = expression(i128::from(t.amount), None, None);
        let r = self
            .client
            .update_item()
            .table_name(&self.tables.accounts)
            .key("id", AttributeValue::S(account_id(*k)))
            .update_expression("SET #b = #b + :d, #v = if_not_exists(#v, :z) + :one")
            .condition_expression("attribute_exists(#id)")
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .send()
            .await;
        match r {
            Ok(_) => Outcome::Committed,
            Err(e) => match e.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(_)) => {
                    Outcome::Refused("ConditionalCheckFailed".into())
                }
                _ => Outcome::Failed(DisplayErrorContext(&e).to_string()),
            },
        }
    }
}

/// Names and values of a native update: `#b` balance, `#v` txVersion, `#l` lastTx, `#id`.
fn expression(
    delta: i128,
    require: Option<u64>,
    tx: Option<&str>,
) -> (HashMap<String, String>, HashMap<String, AttributeValue>) {
    let mut names = HashMap::from([
        ("#id".to_owned(), "id".to_owned()),
        ("#b".to_owned(), "balance".to_owned()),
        ("#v".to_owned(), layout::VERSION.to_owned()),
    ]);
    let mut values = HashMap::from([
        (":d".to_owned(), AttributeValue::N(delta.to_string())),
        (":z".to_owned(), AttributeValue::N("0".into())),
        (":one".to_owned(), AttributeValue::N("1".into())),
    ]);
    if let Some(a) = require {
        values.insert(":a".into(), AttributeValue::N(a.to_string()));
    }
    if let Some(tx) = tx {
        names.insert("#l".into(), layout::LAST_TX.into());
        values.insert(":tx".into(), AttributeValue::S(tx.into()));
    }
    (names, values)
}

/// One leg of the native transaction: the coordinator's commit writes (balance, txVersion,
/// lastTx, and the exclusive workload's memo) under the coordinator's prepare conditions (item
/// exists; a debit keeps the balance non-negative).
fn leg(
    table: &str,
    k: u32,
    (amount, debit, exclusive): (u64, bool, bool),
    tx: &str,
) -> Result<Update, String> {
    let delta = if debit {
        -i128::from(amount)
    } else {
        i128::from(amount)
    };
    let (mut names, mut values) = expression(delta, debit.then_some(amount), Some(tx));
    let condition = if debit {
        "attribute_exists(#id) AND #b >= :a"
    } else {
        "attribute_exists(#id)"
    };
    let mut set = "SET #b = #b + :d, #v = if_not_exists(#v, :z) + :one, #l = :tx".to_owned();
    if exclusive {
        names.insert("#m".into(), MEMO.into());
        values.insert(":m".into(), AttributeValue::S("bench".into()));
        set.push_str(", #m = :m");
    }
    Update::builder()
        .table_name(table)
        .key("id", AttributeValue::S(account_id(k)))
        .update_expression(set)
        .condition_expression(condition)
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values(Some(values))
        .build()
        .map_err(|e| e.to_string())
}

/// Reads a transfer's end off its record.
fn classify(record: &TxRecord) -> Outcome {
    match record.status {
        TxStatus::Committed => Outcome::Committed,
        TxStatus::Aborted => {
            let mut reasons = record.votes.iter().filter_map(|v| match v {
                Vote::No { reason, .. } => Some(*reason),
                Vote::Yes { .. } => None,
            });
            if reasons.clone().any(|r| r == VoteReason::Conflict) {
                Outcome::Conflict
            } else {
                Outcome::Refused(reasons.next().map_or("none", |r| r.code()).to_owned())
            }
        }
        other => Outcome::Unfinished(format!("transaction {} left {other}", record.tx_id)),
    }
}

/// An error and its sources, on one line.
fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The seed's driver: the same records, participant logic and conditional writes as the
/// coordinator, one request at a time (each charged to its step's capacity units, as the
/// coordinator's timed ports are). A `no` vote stops the prepares; the participants asked so
/// far are then aborted, one after another.
struct Serial {
    log: DynamoTxLog,
    participant: BenchParticipant,
    config: CoordinatorConfig,
}

impl Serial {
    async fn run(&self, body: &Value) -> Result<TxRecord, BenchError> {
        let request = TxRequest::parse(body, &self.config.services, &self.config.limits)
            .map_err(|e| BenchError::Check(format!("serial driver: {e}")))?;
        let now = SystemClock.now_ms();
        let tx_id = TxId::random();
        let record = request.begin(
            tx_id.clone(),
            None,
            format!("{}/{}", self.config.id, TxId::random()),
            now,
        );
        if let Created::Exists(_) = in_step(0, self.log.create(&record)).await? {
            return Err(BenchError::Check(format!("transaction id {tx_id} taken")));
        }
        let mut votes = vec![];
        let mut prunes = vec![];
        for p in &record.participants {
            let req = PrepareRequest {
                tx_id: tx_id.clone(),
                deadline: record.deadline,
                began: record.created_at,
                key: p.key.clone(),
                op: p.op.clone(),
                coordinator: self.config.id.clone(),
                payload: None,
            };
            let reply = match in_step(1, self.participant.prepare(table(&p.target)?, &req)).await {
                Ok(reply) => reply,
                Err(e) => PrepareReply::no(VoteReason::Unreachable, e.to_string()),
            };
            let yes = reply.vote.is_yes();
            votes.push(reply.vote);
            prunes.push(reply.prune);
            if !yes {
                break;
            }
        }
        let ours = if votes.len() == record.participants.len() && votes.iter().all(Vote::is_yes) {
            Decision::Commit
        } else {
            Decision::Abort
        };
        let deciding = self.log.transition(
            &record,
            TxStatus::deciding(ours),
            Some(&votes),
            SystemClock.now_ms(),
        );
        let decided = match in_step(2, deciding).await? {
            Swapped::Done(r) | Swapped::Lost(Some(r)) => *r,
            Swapped::Lost(None) => {
                return Err(BenchError::Check(format!("record {tx_id} vanished")));
            }
        };
        let Some(decision) = decided.status.decision() else {
            return Err(BenchError::Check(format!("record {tx_id} still undecided")));
        };
        if decided.status.is_terminal() {
            return Ok(decided);
        }
        // Someone else's decision (a resolver's abort) reaches every participant. Each
        // completion carries the prune its prepare's reply planned, as the coordinator's do.
        let (asked, prunes) = if decision == ours {
            (votes.len(), prunes)
        } else {
            (record.participants.len(), vec![])
        };
        for (i, p) in record.participants.iter().take(asked).enumerate() {
            let req = CompleteRequest {
                tx_id: tx_id.clone(),
                deadline: record.deadline,
                began: record.created_at,
                key: p.key.clone(),
                op: p.op.clone(),
                prune: prunes.get(i).cloned().flatten(),
                refused: decision == ours && votes.get(i).is_some_and(Vote::refused),
            };
            let t = table(&p.target)?;
            let reply = match decision {
                Decision::Commit => in_step(3, self.participant.commit(t, &req)).await,
                Decision::Abort => in_step(4, self.participant.abort(t, &req)).await,
            };
            if !reply.is_ok_and(|r| r.acknowledged()) {
                return Ok(decided); // left for the sweeper, as the coordinator does
            }
        }
        let finishing = self.log.transition(
            &decided,
            TxStatus::finishing(decision),
            None,
            SystemClock.now_ms(),
        );
        match in_step(5, finishing).await? {
            Swapped::Done(r) | Swapped::Lost(Some(r)) => Ok(*r),
            Swapped::Lost(None) => Err(BenchError::Check(format!("record {tx_id} vanished"))),
        }
    }
}

fn table(target: &Target) -> Result<&str, BenchError> {
    match target {
        Target::Direct { table } => Ok(table),
        other => Err(BenchError::Check(format!("not a direct target: {other:?}"))),
    }
}
