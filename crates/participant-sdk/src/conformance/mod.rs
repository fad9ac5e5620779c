//! The conformance kit: the messages a participant meets in production, played against it
//! in-process, with what each transaction left there read back after every step. Each check
//! is public, and [`conformance_tests!`](crate::conformance_tests) names every one as a test.
//!
//! The kit plays the coordinator: it writes the transaction's record in the participant's log,
//! sends prepare, commit and abort (duplicated, reordered, late, concurrent, failed,
//! interrupted), asks the staged commit's inquiry, and moves a [`ManualClock`]. A check panics with what it expected.
//!
//! - [`UnderTest`]: a participant as the kit reaches it. Two kinds pass the same checks:
//!   [`Sdk`] (a service's [`Hooks`], every call counted, from a [`Subject`]) and,
//!   in `tests/tests/conformance.rs`, the generic participant on DynamoDB Local
//!   (`tests/conformance.rs` here also runs an SDK participant through its HTTP router).
//! - [`Kit`]: one check's world; the checks themselves follow it, one function each (the
//!   staged commit's inquiry's in `inquiry.rs`; the wire's, which send raw requests over HTTP,
//!   in `wire.rs`).
//! - [`CHECKS`]: the one list of checks, each with what it guards against and what it needs
//!   ([`Needs`]); the tests, [`check_all`] and the black-box runner ([`play`], `twopc
//!   conformance`) all read it.

mod checks;
mod faults;
mod inquiry;
mod list;
mod sdk;
mod wire;

use serde_json::{Value, json};
use std::future::Future;
use twopc_core::ids::TxId;
use twopc_core::item::Key;
use twopc_core::memory::MemoryTxLog;
use twopc_core::op::Operation;
use twopc_core::ports::{Clock, TxLog};
use twopc_core::record::TxRecord;
use twopc_core::rules::Inquiry;

// What a service's own tests name beside the kit, so that they need no other crate of the
// project: the messages the kit sends and the replies it reads, the status a transaction is
// decided to ([`Kit::decide`]) and the clock the kit moves.
pub use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
pub use twopc_core::ports::ManualClock;
pub use twopc_core::status::TxStatus;

pub use self::checks::*;
pub use self::faults::{Fail, Faults, Step};
pub use self::inquiry::*;
pub use self::list::{CHECKS, Check, Needs, check_all, play};
pub use self::sdk::{Counted, Hook, Sdk, Subject};
pub use self::wire::*;
use crate::hooks::Hooks;
pub use crate::participant::Resolved;
use crate::participant::SdkParticipant;
use crate::store::StateStore;

/// How long the kit's transactions have to prepare (ms).
pub const TIMEOUT_MS: u64 = 5_000;

/// A participant under test: how the kit reaches it, and what each transaction left there.
pub trait UnderTest: Send + Sync {
    /// The transaction log the participant resolves by; the kit writes its records there.
    type Log: TxLog;

    /// That log.
    fn log(&self) -> &Self::Log;

    /// The clock the participant reads; the kit moves it.
    fn clock(&self) -> &ManualClock;

    /// How a message's work is kept whole against copies and crashes.
    fn atomicity(&self) -> Atomicity;

    /// Where the kit arms failures: the participant runs each message's work through it.
    fn faults(&self) -> &Faults;

    /// What transaction `tx` asks of this participant, and it holds (anything that needs, such
    /// as the item, is made here).
    fn valid(&self, tx: &TxId) -> impl Future<Output = Entry> + Send;

    /// What it refuses as `invalid` once it has looked (not merely for lack of a payload or
    /// an operation: the kit sends that too).
    fn invalid(&self, tx: &TxId) -> impl Future<Output = Entry> + Send;

    /// Prepare.
    fn prepare(
        &self,
        req: &PrepareRequest,
    ) -> impl Future<Output = Result<PrepareReply, Failure>> + Send;

    /// Commit.
    fn commit(
        &self,
        req: &CompleteRequest,
    ) -> impl Future<Output = Result<CompleteReply, Failure>> + Send;

    /// Abort.
    fn abort(
        &self,
        req: &CompleteRequest,
    ) -> impl Future<Output = Result<CompleteReply, Failure>> + Send;

    /// Inquiry (the staged commit's recovery): held, prevented, committed or open.
    fn inquire(
        &self,
        req: &InquireRequest,
    ) -> impl Future<Output = Result<InquireReply, Failure>> + Send;

    /// Settles the transaction's hold here as if its coordinator went silent, by its record.
    fn resolve(&self, tx: &Tx) -> impl Future<Output = Result<Resolved, Failure>> + Send;

    /// One pass over the holds past their deadline, each settled by its record.
    fn sweep(&self) -> impl Future<Output = Result<Vec<(TxId, Resolved)>, Failure>> + Send;

    /// What the transaction left here now; `None` when the participant does not show it
    /// (reached only over HTTP: then a check infers "nothing held" from the answers alone).
    fn effects(&self, tx: &Tx) -> impl Future<Output = Option<Effects>> + Send;

    /// For a participant reached over the `http` transport: posts `body` to its `action` path
    /// with exactly these headers (none added) and returns the status and the JSON answer
    /// (`Null` if it is not JSON); `what` describes the request, for a runner's report. `None`
    /// in process: the wire's checks need it.
    fn post_raw(
        &self,
        what: &str,
        action: &str,
        headers: &[(&'static str, String)],
        body: &[u8],
    ) -> impl Future<Output = Option<(u16, Value)>> + Send {
        let _ = (what, action, headers, body);
        async { None }
    }

    /// The secret it checks signatures with, for the wire's checks to sign their own requests.
    fn secret(&self) -> Option<&[u8]> {
        None
    }
}

/// How a participant keeps one message's work whole; where the two differ, a check expects
/// what each promises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Atomicity {
    /// Each message's work is one conditional write (the generic participant): a copy arriving
    /// meanwhile does the work itself and the first then finds it done; a call cut off either
    /// wrote or did not, and the next message finds which.
    OneWrite,
    /// Each message brackets work outside the participant's state (a hook) between a claim and
    /// its result: a copy arriving meanwhile is told the work is under way; a call cut off is
    /// taken over once its claim ended (`claim_ms` after it began).
    Claimed {
        /// How long a claim lasts (ms).
        claim_ms: u64,
    },
}

/// What a transaction asks of one participant: a table's item and operation, or a custom
/// participant's payload.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Entry {
    /// The item's key.
    pub key: Key,
    /// The operation.
    pub op: Operation,
    /// The payload.
    pub payload: Option<Value>,
}

/// What a transaction left on the participant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Effects {
    /// How many holds stand for it (a hook's reservation; an item's lock or reservation).
    pub held: u32,
    /// How many times its commit took effect (`confirm` calls that returned; the `add` of 1
    /// the item's counter received).
    pub applied: u32,
    /// Hook calls, for a participant with hooks: `[reserve, confirm, cancel]`.
    pub calls: Option<[u32; 3]>,
}

/// A message that was not answered.
#[derive(Debug)]
pub enum Failure {
    /// A copy's work is under way: retry later.
    Busy(String),
    /// The work failed (or its answer was lost): the next message, or the sweep, carries it out.
    Failed(String),
    /// Anything else; no check expects it.
    Other(String),
}

/// A transaction the kit plays.
#[derive(Clone, Debug)]
pub struct Tx {
    /// Its id.
    pub id: TxId,
    /// When it began (epoch ms).
    pub began: u64,
    /// Its deadline (epoch ms).
    pub deadline: u64,
    /// What it asks of the participant.
    pub entry: Entry,
}

/// One check's world: the participant under test, and the coordinator the kit plays.
pub struct Kit<P> {
    subject: P,
}

impl<H: Hooks, S: StateStore> Kit<Sdk<H, S>> {
    /// Wires an SDK participant made of the subject.
    pub fn new(subject: Subject<H, S>) -> Self {
        Kit::over(Sdk::from(subject))
    }

    /// The SDK participant under test.
    pub fn participant(&self) -> &SdkParticipant<Counted<H>, S, MemoryTxLog, ManualClock> {
        self.subject.participant()
    }

    /// The calls of each hook for the transaction: `[reserve, confirm, cancel]`.
    pub fn counts(&self, tx: &Tx) -> [u32; 3] {
        self.subject.counts(&tx.id)
    }
}

impl<P: UnderTest> Kit<P> {
    /// The kit over any participant.
    pub fn over(subject: P) -> Self {
        Kit { subject }
    }

    /// The participant under test.
    pub fn subject(&self) -> &P {
        &self.subject
    }

    /// A transaction begun now, its record `PREPARING` in the log, asking what the participant
    /// holds.
    pub async fn begin(&self) -> Tx {
        let tx = self.unrecorded().await;
        self.record(&tx).await;
        tx
    }

    /// The same, asking what the participant refuses as invalid.
    pub async fn begin_invalid(&self) -> Tx {
        let mut tx = self.unrecorded().await;
        tx.entry = self.subject.invalid(&tx.id).await;
        self.record(&tx).await;
        tx
    }

    async fn record(&self, tx: &Tx) {
        let mut record = TxRecord::never_began(&tx.id, tx.began);
        record.status = TxStatus::Preparing;
        record.deadline = tx.deadline;
        record.begun_by = "conformance kit".into();
        self.subject
            .log()
            .create(&record)
            .await
            .expect("the kit's log");
    }

    /// A transaction begun longer ago than its timeout, its record `PREPARING`: its deadline
    /// has passed by the participant's clock, without moving that clock.
    pub async fn begin_overdue(&self) -> Tx {
        let mut tx = self.unrecorded().await;
        tx.began -= TIMEOUT_MS + 1;
        tx.deadline -= TIMEOUT_MS + 1;
        self.record(&tx).await;
        tx
    }

    /// A transaction begun now whose record was never written (its coordinator died first).
    pub async fn unrecorded(&self) -> Tx {
        let began = self.subject.clock().now_ms();
        let id = TxId::random();
        let entry = self.subject.valid(&id).await;
        Tx {
            id,
            began,
            deadline: began + TIMEOUT_MS,
            entry,
        }
    }

    /// Moves the transaction's record as a coordinator deciding would.
    pub async fn decide(&self, tx: &Tx, to: TxStatus) {
        let log = self.subject.log();
        let record = log.get(&tx.id).await.expect("log").expect("a record");
        let now = self.subject.clock().now_ms();
        log.transition(&record, to, None, now)
            .await
            .expect("the kit's log");
    }

    /// The transaction's record's status.
    pub async fn status(&self, tx: &Tx) -> Option<TxStatus> {
        let record = self.subject.log().get(&tx.id).await.expect("log");
        record.map(|r| r.status)
    }

    /// The transaction's prepare.
    pub fn prepare(&self, tx: &Tx) -> PrepareRequest {
        PrepareRequest {
            tx_id: tx.id.clone(),
            deadline: tx.deadline,
            began: tx.began,
            key: tx.entry.key.clone(),
            op: tx.entry.op.clone(),
            coordinator: "conformance kit".into(),
            payload: tx.entry.payload.clone(),
            hot_until: None,
        }
    }

    /// Its commit or abort.
    pub fn complete(&self, tx: &Tx) -> CompleteRequest {
        CompleteRequest {
            tx_id: tx.id.clone(),
            deadline: tx.deadline,
            began: tx.began,
            key: tx.entry.key.clone(),
            op: tx.entry.op.clone(),
            prune: None,
            refused: false,
        }
    }

    /// Sends its prepare.
    pub async fn send_prepare(&self, tx: &Tx) -> PrepareReply {
        let reply = self.subject.prepare(&self.prepare(tx)).await;
        reply.expect("prepare answered")
    }

    /// Sends its commit.
    pub async fn send_commit(&self, tx: &Tx) -> CompleteReply {
        let reply = self.subject.commit(&self.complete(tx)).await;
        reply.expect("commit answered")
    }

    /// Sends its abort.
    pub async fn send_abort(&self, tx: &Tx) -> CompleteReply {
        let reply = self.subject.abort(&self.complete(tx)).await;
        reply.expect("abort answered")
    }

    /// Its inquiry (`prevent`: a recoverer's, past the deadline; else a helper's, read-only).
    pub fn inquiry(&self, tx: &Tx, prevent: bool) -> InquireRequest {
        InquireRequest {
            tx_id: tx.id.clone(),
            deadline: tx.deadline,
            began: tx.began,
            key: tx.entry.key.clone(),
            op: None,
            payload: None,
            prevent,
        }
    }

    /// Sends its inquiry; the answer.
    pub async fn send_inquire(&self, tx: &Tx, prevent: bool) -> Inquiry {
        let reply = self.subject.inquire(&self.inquiry(tx, prevent)).await;
        reply.expect("inquire answered").inquiry
    }

    /// Asserts what the transaction left: `held` holds, `applied` commits, and, for a
    /// participant with hooks, these `[reserve, confirm, cancel]` calls. Of a participant that
    /// does not show what it holds, the answers the check asserted are all that is known.
    pub async fn expect(&self, tx: &Tx, held: u32, applied: u32, calls: [u32; 3], when: &str) {
        let Some(e) = self.subject.effects(tx).await else {
            return;
        };
        assert_eq!((e.held, e.applied), (held, applied), "held, applied {when}");
        if let Some(made) = e.calls {
            assert_eq!(made, calls, "reserve, confirm, cancel calls {when}");
        }
    }

    /// Asserts that a refused transaction left nothing: no hold, nothing applied, `confirm` and
    /// `cancel` never called, and `reserve` at most once (not at all when the SDK refused a
    /// payload that does not read as the service's type before any hook).
    pub async fn expect_refused(&self, tx: &Tx, when: &str) {
        let Some(e) = self.subject.effects(tx).await else {
            return;
        };
        assert_eq!((e.held, e.applied), (0, 0), "held, applied {when}");
        if let Some([reserve, confirm, cancel]) = e.calls {
            assert!(
                reserve <= 1 && (confirm, cancel) == (0, 0),
                "reserve, confirm, cancel calls {when}: {:?}",
                [reserve, confirm, cancel]
            );
        }
    }

    fn arm(&self, step: Step, fail: Fail) {
        self.subject.faults().arm(step, fail);
    }

    /// Waits until armed work (`Hold`, `Stall`) is inside.
    async fn inside(&self) {
        self.subject.faults().inside().await;
    }

    /// Lets held work go on.
    fn release(&self) {
        self.subject.faults().release();
    }
}

/// An entry keyed by the transaction, with this payload (what an SDK participant is sent).
pub fn payload_entry(tx: &TxId, payload: Value) -> Entry {
    Entry {
        key: [("id".to_owned(), json!(tx.as_str()))].into(),
        op: Operation::default(),
        payload: Some(payload),
    }
}
