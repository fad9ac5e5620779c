//! Ports: what the protocol needs from the world. Adapters implement them (DynamoDB in
//! `twopc-dynamo`, transports in the binaries); tests may fake them.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::TxId;
use crate::item::{FenceEntry, ItemState, Key, Lock};
use crate::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
    Prune,
};
use crate::op::Operation;
use crate::record::{Target, TxRecord, Vote};
use crate::service::KeySchema;
use crate::status::TxStatus;

type Source = Box<dyn StdError + Send + Sync>;

/// A failure of a port, classified by what the caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// Not done; trying again later may work (throttling, a connection refused before sending).
    #[error("{context}: temporarily unavailable")]
    Retryable {
        /// What was attempted.
        context: String,
        /// Why.
        #[source]
        source: Source,
    },
    /// Sent, outcome unknown (timeout after sending): read back before deciding anything.
    #[error("{context}: outcome unknown")]
    Undetermined {
        /// What was attempted.
        context: String,
        /// Why.
        #[source]
        source: Source,
    },
    /// The request itself is wrong; repeating it will not help.
    #[error("{context}: {message}")]
    Invalid {
        /// What was attempted.
        context: String,
        /// What is wrong.
        message: String,
    },
    /// Anything else (missing table, bad credentials, corrupt record).
    #[error("{context}: failed")]
    Fatal {
        /// What was attempted.
        context: String,
        /// Why.
        #[source]
        source: Source,
    },
}

/// Wall-clock time in epoch milliseconds, injected so tests control it: the one "now" of the
/// workspace ([`SystemClock`] outside tests).
pub trait Clock: Send + Sync {
    /// Now.
    fn now_ms(&self) -> u64;

    /// Now in epoch seconds (token expiries, time-to-live attributes).
    fn now_secs(&self) -> u64 {
        self.now_ms() / 1000
    }
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock tests move by hand.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// Starts at `now` (epoch ms).
    pub fn new(now: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(now)))
    }
    /// Moves forward.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}

/// Result of writing a new record.
#[derive(Debug)]
pub enum Created {
    /// Written now.
    New,
    /// A record with that id was already there.
    Exists(Box<TxRecord>),
}

/// Result of a compare-and-swap on a record's status.
#[derive(Debug)]
pub enum Swapped {
    /// The status is now the new one: the record as the swap left it.
    Done(Box<TxRecord>),
    /// Someone else moved it first: the record as it is (None if it does not exist).
    Lost(Option<Box<TxRecord>>),
}

/// What every [`TxLog::transition`] refuses before writing: a move the status machine does not
/// have (`Invalid`; nothing is written).
pub fn check_transition(record: &TxRecord, to: TxStatus) -> Result<(), PortError> {
    let from = record.status;
    if from.can_move_to(to) {
        return Ok(());
    }
    Err(PortError::Invalid {
        context: format!("transaction {}", record.tx_id),
        message: format!("{from} -> {to} is not a legal transition"),
    })
}

/// The transactions table.
pub trait TxLog: Send + Sync {
    /// Writes a new record if none has its id.
    fn create(&self, record: &TxRecord) -> impl Future<Output = Result<Created, PortError>> + Send;

    /// Reads a record (strongly consistent).
    fn get(&self, tx: &TxId) -> impl Future<Output = Result<Option<TxRecord>, PortError>> + Send;

    /// Moves `record` from its status to `to` if the stored status is still the record's;
    /// records `votes` when given. A terminal `to` takes the record out of the recovery index
    /// and sets its expiry. On success the record is not read back: `Swapped::Done` carries
    /// [`TxRecord::moved`] of the one given.
    fn transition(
        &self,
        record: &TxRecord,
        to: TxStatus,
        votes: Option<&[Vote]>,
        now: u64,
    ) -> impl Future<Output = Result<Swapped, PortError>> + Send;

    /// Records a transaction that never began as `ABORTED` (lock rule: owner missing), as the
    /// one that began at `began` (its hold's): the record's `createdAt`, which the lock rule
    /// reads the record's owner by (`rules::OwnerRecord`).
    fn create_aborted(
        &self,
        tx: &TxId,
        began: u64,
        now: u64,
    ) -> impl Future<Output = Result<Created, PortError>> + Send;

    /// Non-terminal records whose deadline passed before `now` and that are not backing off,
    /// oldest deadline first, at most `limit`.
    fn overdue(
        &self,
        now: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TxRecord>, PortError>> + Send;

    /// The earliest deadline among non-terminal records, backing off or not (`None`: nothing is
    /// pending). What the sweeper reports as the age of the oldest stuck transaction.
    fn oldest_pending_deadline(
        &self,
    ) -> impl Future<Output = Result<Option<u64>, PortError>> + Send;

    /// Counts a failed recovery attempt and schedules the next one no earlier than `retry_after`.
    fn note_failed_attempt(
        &self,
        tx: &TxId,
        retry_after: u64,
        now: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Asks for the recovery of a `STAGING` record whose holds a participant met past its
    /// deadline (a participant has no transport to inquire itself): marks it once
    /// (`recoveryAsked`, conditional on `STAGING` and no mark yet), which the completer on the
    /// transactions stream acts on. True if this call marked it.
    fn ask_recovery(
        &self,
        tx: &TxId,
        now: u64,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;
}

/// What an operator reads and notes on the transactions table beyond the protocol's calls
/// (`docs/operations.md`, "The console"): listings through indexes, never a scan.
pub trait OperatorLog: Send + Sync {
    /// A page of `q`: unfinished transactions (the pending index) by deadline, oldest first;
    /// ended ones (the ended index) by their end, newest first. Records whose status moved on
    /// since the index was read, or that the filters leave out, are not on the page, so a page
    /// may hold fewer than `q.limit`: follow `next`.
    fn list(
        &self,
        q: &crate::operator::ListQuery,
    ) -> impl Future<Output = Result<crate::operator::ListPage, PortError>> + Send;

    /// How many transactions are unfinished, overdue at `now`, and ended each way since `since`.
    fn counts(
        &self,
        since: u64,
        now: u64,
    ) -> impl Future<Output = Result<crate::operator::Counts, PortError>> + Send;

    /// Appends `note` to the record's operator actions, changing nothing else (its status, its
    /// `updatedAt` and its places in the indexes stay). False if there is no such record.
    fn note_action(
        &self,
        tx: &TxId,
        note: &crate::operator::ActionNote,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;
}

/// What a conditional prepare or reservation did.
#[derive(Debug)]
pub enum PrepareWrite {
    /// Locked or reserved (or already, by this transaction).
    Locked {
        /// The item's fence after the write: the commit/abort prunes it.
        fence: BTreeMap<TxId, FenceEntry>,
        /// The item's fence horizon (0 when none).
        horizon: u64,
    },
    /// The condition failed; the item as it was (None: no such item).
    Refused(Option<Box<ItemState>>),
}

/// What a conditional commit or abort found.
#[derive(Debug)]
pub enum CompleteWrite {
    /// Written.
    Done,
    /// The condition failed; the item as it was (None: no such item).
    Refused(Option<Box<ItemState>>),
}

/// What a commit or abort writes besides releasing the item: the transaction's fence entry
/// and the pruning its prepare planned. Whether the transaction holds a lock or a reservation
/// follows from the operation ([`Operation::mode`]).
#[derive(Clone, Copy, Debug)]
pub struct Completion<'a> {
    /// The transaction.
    pub tx: &'a TxId,
    /// Its operation on the item (from the record, or from the lock).
    pub op: &'a Operation,
    /// Its fence entry (`committed` or `aborted`).
    pub entry: FenceEntry,
    /// Entries to remove and the horizon to raise to, planned at prepare.
    pub prune: Option<&'a Prune>,
}

/// Participant items, in any table.
pub trait ParticipantStore: Send + Sync {
    /// One conditional write: lock the item for `lock.tx_id` if it is already ours (its id,
    /// its `began`, its operation), or if it is unlocked and the transaction began after the
    /// fence horizon; and the fence has no entry of the transaction (an entry under its id of
    /// another `began` is a former transaction's, which its release retires), the op's
    /// `require` holds (and, for a creating op, the item is
    /// absent or a tombstone: a placeholder is written). A non-creating op on a tombstone is
    /// refused. With `hot_until`, the same write marks the item hot until then
    /// ([`ItemState::hot_until`]).
    fn prepare(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
        hot_until: Option<u64>,
    ) -> impl Future<Output = Result<PrepareWrite, PortError>> + Send;

    /// One conditional write: reserve `lock.op`'s changes (a commuting operation:
    /// [`Operation::escrow`]) for `lock.tx_id` if no lock stands, reservations are not paused
    /// at `now`, the transaction began after the fence horizon and has no fence entry, and each
    /// bound holds against the escrowed extreme (lowest for `gte`, highest for `lte`) and agrees
    /// with the other reservations' bound, and fewer than `most` reservations stand; or if the
    /// reservation is already `tx`'s. With `hot_until`, the same write marks the item hot until
    /// then.
    fn reserve(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
        hot_until: Option<u64>,
        now: u64,
        most: usize,
    ) -> impl Future<Output = Result<PrepareWrite, PortError>> + Send;

    /// One conditional write, only if the item is `c.tx`'s (lock or reservation, of the
    /// transaction that began at `c.entry.began`) and no entry stands under its id: apply `c.op`,
    /// release, write `c.entry` (`committed`) into the fence, carry out `c.prune`. A delete
    /// leaves a tombstone (key, fence, horizon), never nothing.
    fn commit(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
    ) -> impl Future<Output = Result<CompleteWrite, PortError>> + Send;

    /// One conditional write, only if the item is `c.tx`'s (as for `commit`) and no entry
    /// stands under its id: release it without applying anything (a placeholder becomes a
    /// tombstone; a reservation gives its escrow back), write
    /// `c.entry` (`aborted`) into the fence, carry out `c.prune`.
    fn abort(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
    ) -> impl Future<Output = Result<CompleteWrite, PortError>> + Send;

    /// Removes the escrow of each of `attributes` on which no reservation stands (a stale one:
    /// see `item::Escrow`), so that the next reservation starts from the value. Changes nothing
    /// where a reservation stands or the item is missing.
    fn reset_escrow(
        &self,
        table: &str,
        key: &Key,
        attributes: &[&str],
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Refuses new reservations until `until` (epoch ms), unless already paused longer: an
    /// exclusive operation waits for the standing ones to drain.
    fn pause_reservations(
        &self,
        table: &str,
        key: &Key,
        until: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Fences `tx` out of an existing item it does not hold, so a late prepare is refused: one
    /// conditional write of `entry` (`aborted`) if the fence has fewer than `capacity` entries,
    /// else one that raises the horizon to `entry.began`. Refused if the item is absent, has an
    /// entry under `tx`'s id (its own, or a former transaction's to retire first), covers it by
    /// the horizon, or is now held by it (lock or reservation, of the transaction that began at
    /// `entry.began`).
    fn fence_aborted(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        entry: FenceEntry,
        capacity: usize,
    ) -> impl Future<Output = Result<CompleteWrite, PortError>> + Send;

    /// Prevents `tx` on an absent key: writes a tombstone (the key, `txTombstone`, a fence of
    /// `entry`, `aborted`) only if the key is still absent, so that no prepare of `tx` can ever
    /// land there. Refused (with the item) if the key exists.
    fn bury_aborted(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        entry: FenceEntry,
    ) -> impl Future<Output = Result<CompleteWrite, PortError>> + Send;

    /// Removes `holder`'s lock or reservation (its transaction's, that began when it did)
    /// without applying anything and without a fence entry (a stale duplicate of an owner that
    /// ended).
    fn drop_lock(
        &self,
        table: &str,
        key: &Key,
        holder: &Lock,
    ) -> impl Future<Output = Result<CompleteWrite, PortError>> + Send;

    /// Retires a former transaction's fence entry under `tx`'s id (`former`, its `began`
    /// another than the transaction's: an idempotency key used again after its record
    /// expired), as a prune does: removes it and sets the horizon to `horizon` (at least
    /// `former.began` and the horizon as read), in one conditional write, only while the entry
    /// is still `former` and the horizon not above `horizon`. Refused (with the item) otherwise.
    fn retire(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        former: FenceEntry,
        horizon: u64,
    ) -> impl Future<Output = Result<CompleteWrite, PortError>> + Send;

    /// Items whose lock or some reservation expired before `now` (through the table's sparse
    /// lock index, never a scan), at most `limit`: their key and each expired holder (a
    /// reservation reads as the lock of its owner).
    fn expired_locks(
        &self,
        table: &str,
        key: &KeySchema,
        now: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<(Key, Lock)>, PortError>> + Send;

    /// Reads the item (strongly consistent).
    fn read(
        &self,
        table: &str,
        key: &Key,
    ) -> impl Future<Output = Result<Option<ItemState>, PortError>> + Send;
}

/// One item of a native transaction: the operation to apply where [`rules::native_write`]
/// admits it.
///
/// [`rules::native_write`]: crate::rules::native_write
#[derive(Clone, Copy, Debug)]
pub struct NativeWrite<'a> {
    /// The participant table.
    pub table: &'a str,
    /// The item's key.
    pub key: &'a Key,
    /// The operation.
    pub op: &'a Operation,
}

/// What one item's write found when a native transaction was cancelled.
#[derive(Clone, Debug, PartialEq)]
pub enum NativeItem {
    /// Its condition held (another action cancelled the transaction).
    Held,
    /// Its condition failed: the item as it was (None: no such item).
    Refused(Option<Box<ItemState>>),
    /// Another request was writing it at the same time (DynamoDB's `TransactionConflict`).
    Busy,
}

/// What a native transaction did: all of it, or nothing.
#[derive(Clone, Debug, PartialEq)]
pub enum NativeOutcome {
    /// Every item written and the record put, in one step.
    Committed,
    /// Nothing written. `record`: a record with the transaction's id was there already (a
    /// replay); `items`: what each write found, in order.
    Cancelled {
        /// The record already there, if that cancelled it.
        record: Option<Box<TxRecord>>,
        /// Each item's finding, in the order of the writes.
        items: Vec<NativeItem>,
    },
}

/// What [`NativeStore::commit_at_once`] returns.
pub type NativeFuture<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<NativeOutcome, PortError>> + Send + 'a>>;

/// The store's own all-or-nothing write across tables (DynamoDB's `TransactWriteItems`): the
/// record's put, conditional on no record with its id, and each item's write, conditional on
/// [`rules::native_write`] admitting it and the operation's own conditions holding; each write
/// applies the operation with the commit marks (`txVersion` + 1, `lastTx`), removes the idle
/// escrow of each attribute it adds to, and leaves the fence as it is. Object-safe, so a coordinator may have one or none.
///
/// [`rules::native_write`]: crate::rules::native_write
pub trait NativeStore: Send + Sync {
    /// Writes `record` (terminal, `COMMITTED`) and every item at once, or nothing.
    fn commit_at_once<'a>(
        &'a self,
        record: &'a TxRecord,
        writes: &'a [NativeWrite<'a>],
    ) -> NativeFuture<'a>;
}

/// A transport failed to deliver a message or to bring back its answer.
#[derive(Debug, thiserror::Error)]
#[error("participant at {target} did not answer: {message}")]
pub struct TransportError {
    /// Where it was sent.
    pub target: String,
    /// What happened.
    pub message: String,
    /// Whether the message may have been acted on.
    pub undetermined: bool,
    /// Cause.
    #[source]
    pub source: Option<Source>,
}

/// How the coordinator reaches participants.
pub trait Transport: Send + Sync {
    /// Sends prepare.
    fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> impl Future<Output = Result<PrepareReply, TransportError>> + Send;

    /// Sends commit.
    fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> impl Future<Output = Result<CompleteReply, TransportError>> + Send;

    /// Sends abort.
    fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> impl Future<Output = Result<CompleteReply, TransportError>> + Send;

    /// Sends an inquiry about a staged transaction.
    fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> impl Future<Output = Result<InquireReply, TransportError>> + Send;
}
