//! The generic participant: prepare (lock + rules), commit (apply + unlock), abort (unlock), and
//! the resolution of an expired lock's owner. Every step is idempotent.
//!
//! The same code runs behind every transport: in the participant Lambda, in the local stack and
//! inside the coordinator (`direct`).
//!
//! Resolution here settles the item it stands on; finishing the owner's other participants is
//! the owner's coordinator's or the sweeper's job (see `docs/architecture.md`), so a participant
//! needs no transport to other services.

mod clock;
mod refusal;

pub(crate) use refusal::show_key;
pub use refusal::{Refusal, classify_native_refusal, classify_refusal};

use std::ops::ControlFlow;

use tracing::{error, info, warn};

use crate::ids::TxId;
use crate::item::{FenceEntry, FenceOutcome, ItemState, Key, Lock};
use crate::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, Inquiry, PrepareReply,
    PrepareRequest,
};
use crate::op::Mode;
use crate::ports::{
    Clock, CompleteWrite, Completion, Created, ParticipantStore, PortError, PrepareWrite, Swapped,
    TxLog,
};
use crate::record::{TxRecord, Vote, VoteReason};
use crate::rules::{
    self, AbortStep, CommitStep, InquiryStep, OwnerRecord, Reply, Resolution, Seen, Shape,
    Violation,
};
use crate::status::TxStatus;

/// Tunables of the participant logic.
///
/// Neither fence setting bears on safety: whenever an entry is removed, the item's horizon
/// rises to cover its transaction (see "The fence horizon" in `docs/architecture.md`). They
/// trade item size against refusing a live transaction's slow prepare.
#[derive(Clone, Debug)]
pub struct ParticipantConfig {
    /// How long after its transaction began a fence entry is kept when the fence has room for
    /// it ([`FenceEntry::is_stale`]). At least the largest transaction timeout plus the clock
    /// skew between coordinators and participants: a prepare can only be refused by the horizon
    /// a stale entry raised if its transaction began before one that began this long ago. The
    /// default is the largest timeout the coordinator accepts by default (60 s) plus 10 s.
    pub fence_window_ms: u64,
    /// Most entries a fence keeps after a commit or abort that prunes (writes that do not prune
    /// may add entries past it until the next that does). Bounds the item's size: an entry takes
    /// ~31 bytes, so the default fence costs ~0.75 KB and a hot item at capacity stays within one write
    /// unit (releases in flight may add entries past it until the next pruning write).
    /// A prepare is refused by the horizon only if more than about this many transactions that
    /// began after its own ended on the item before it landed.
    pub fence_capacity: usize,
    /// How many rounds of settling other holders one prepare goes through before it gives up
    /// with `conflict`.
    pub max_resolutions: usize,
    /// How long an exclusive operation that meets live reservations pauses new ones (ms), so
    /// that the standing ones drain and its retry can lock the item: a stream of reservations
    /// never starves it.
    pub reservation_pause_ms: u64,
    /// Most reservations that may stand on one item at once; a reservation beyond it votes
    /// `conflict`. Each is stored on the item (~250 bytes with its operation), and DynamoDB
    /// bills every write of the item by its size (a unit per KB) and caps it at 400 KB.
    pub max_reservations: usize,
    /// How far ahead of this participant's clock a transaction's `began` may lie (ms,
    /// `TWOPC_FENCE_MARGIN_MS`): a prepare further ahead is refused (`clockSkew`), so that no
    /// clock running ahead puts a horizon in the future ([`rules::too_far_ahead`]).
    pub clock_margin_ms: u64,
}

impl Default for ParticipantConfig {
    fn default() -> Self {
        ParticipantConfig {
            fence_window_ms: 70_000,
            fence_capacity: 24,
            max_resolutions: 3,
            reservation_pause_ms: 1_000,
            max_reservations: 32,
            clock_margin_ms: 10_000,
        }
    }
}

/// The participant logic over a store of items and the transaction log.
#[derive(Clone, Debug)]
pub struct Participant<S, L, C> {
    store: S,
    log: L,
    clock: C,
    config: ParticipantConfig,
}

/// The no vote for a hold the store refused to write as invalid (DynamoDB's
/// `ValidationException`: the item with the hold, which carries the operation, past 400 KB).
/// Nothing was written, and no retry can write it: `invalid`, never `unreachable`, which reads
/// as "the participant may come back".
fn refused_by_store(message: &str) -> PrepareReply {
    PrepareReply::no(
        VoteReason::Invalid,
        format!(
            "the store refused to write the hold as invalid ({message}); nothing was written: the operation can never apply to this item as it is (an item past 400 KB?), change the request"
        ),
    )
}

/// What resolving an expired lock's owner did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// The owner is still live (its deadline has not passed): the lock stands.
    OwnerLive,
    /// The owner was (or is now) aborted; its lock on this item is gone.
    Aborted,
    /// The owner had decided to commit; its operation is now applied here.
    RolledForward,
    /// The owner was committed; this lock was a stale duplicate, removed unapplied.
    DroppedStale,
    /// The owner is `STAGING` past its deadline: only a recovery of its whole record (every
    /// participant asked) may end it, so the hold stands here until that runs (the sweeper's,
    /// or a coordinator's that met it).
    NeedsRecovery,
}

impl<S: ParticipantStore, L: TxLog, C: Clock> Participant<S, L, C> {
    /// Wires the logic.
    pub fn new(store: S, log: L, clock: C, config: ParticipantConfig) -> Self {
        Participant {
            store,
            log,
            clock,
            config,
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Prepare: hold the item for the transaction (a lock, or a reservation for a commuting
    /// operation) and check the operation's rules. Other holders it meets are settled by the
    /// lock rule where they may be (expired, or already decided); live ones make it a conflict.
    /// A loop over trying the write ([`Self::try_hold`]) and settling what refused it
    /// ([`Self::settle`]), a bounded number of times.
    pub async fn prepare(
        &self,
        table: &str,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, PortError> {
        if req.op.is_empty() {
            return Ok(PrepareReply::no(
                VoteReason::Invalid,
                "no operation: a table's participant needs one (a payload is for custom participants)",
            ));
        }
        if let Some(refused) = self.too_far_ahead(req.began) {
            return Ok(refused);
        }
        let lock = Lock {
            tx_id: req.tx_id.clone(),
            expires_at: req.deadline,
            began: req.began,
            op: req.op.clone(),
            coordinator: req.coordinator.clone(),
        };
        for attempt in 0..=self.config.max_resolutions {
            let now = self.clock.now_ms();
            if now >= req.deadline {
                return Ok(PrepareReply::no(
                    VoteReason::Expired,
                    format!(
                        "the transaction's deadline passed {} ms ago",
                        now - req.deadline
                    ),
                ));
            }
            let item = match self.try_hold(table, req, &lock, now).await? {
                ControlFlow::Break(held) => return Ok(held),
                ControlFlow::Continue(item) => item,
            };
            let last = attempt == self.config.max_resolutions;
            if let Some(refused) = self.settle(table, req, &lock, item, now, last).await? {
                return Ok(refused);
            }
        }
        Ok(PrepareReply::no(
            VoteReason::Conflict,
            "the item kept being held by other transactions",
        ))
    }

    /// The prepare's one conditional write: breaks with the yes vote (and the prune its
    /// release will carry) if it holds the item, else goes on with the item that refused it.
    async fn try_hold(
        &self,
        table: &str,
        req: &PrepareRequest,
        lock: &Lock,
        now: u64,
    ) -> Result<ControlFlow<PrepareReply, Option<Box<ItemState>>>, PortError> {
        let mode = req.op.mode();
        let write = match mode {
            Mode::Exclusive => {
                (self.store)
                    .prepare(table, &req.key, lock, req.hot_until)
                    .await
            }
            Mode::Reserved => {
                let most = self.config.max_reservations;
                (self.store)
                    .reserve(table, &req.key, lock, req.hot_until, now, most)
                    .await
            }
        };
        let write = match write {
            Ok(write) => write,
            Err(PortError::Invalid { message, .. }) => {
                return Ok(ControlFlow::Break(refused_by_store(&message)));
            }
            Err(e) => return Err(e),
        };
        Ok(match write {
            PrepareWrite::Locked { fence, horizon } => ControlFlow::Break(PrepareReply {
                vote: Vote::yes(mode),
                prune: rules::plan_prune(
                    &fence,
                    horizon,
                    &req.tx_id,
                    now,
                    self.config.fence_window_ms,
                    self.config.fence_capacity,
                ),
            }),
            PrepareWrite::Refused(item) => ControlFlow::Continue(item),
        })
    }

    /// What a refused write leads to ([`classify_refusal`]): a no vote, or `None` to try again
    /// once the holders in the way are settled (or an idle escrow written outside the protocol
    /// is reset). On the `last` attempt nothing is settled: the prepare gives up.
    async fn settle(
        &self,
        table: &str,
        req: &PrepareRequest,
        lock: &Lock,
        item: Option<Box<ItemState>>,
        now: u64,
        last: bool,
    ) -> Result<Option<PrepareReply>, PortError> {
        let no = |reason, message: String| Ok(Some(PrepareReply::no(reason, message)));
        let full = |i: &ItemState| i.reservations.len() >= self.config.max_reservations;
        let (owners, waiting) = match classify_refusal(item.as_deref(), lock, now, full) {
            Refusal::Vote(VoteReason::NotFound, _) if item.is_none() => {
                return no(
                    VoteReason::NotFound,
                    format!("no item with key {}", show_key(&req.key)),
                );
            }
            Refusal::Vote(reason, message) => return no(reason, message),
            Refusal::Held { owners, waiting } => (owners, waiting),
            Refusal::Stale(_) if last => return Ok(None),
            Refusal::Stale(attributes) => {
                let names: Vec<&str> = attributes.iter().map(String::as_str).collect();
                warn!(tx_id = %req.tx_id, table, key = %show_key(&req.key), attributes = ?names,
                    "idle escrow out of step with the value (written outside the protocol): reset");
                self.store.reset_escrow(table, &req.key, &names).await?;
                return Ok(None);
            }
        };
        if last {
            return Ok(None);
        }
        let live = self.settle_holders(table, &req.key, &owners).await?;
        if live.is_empty() {
            return Ok(None); // every holder settled here: try again
        }
        if waiting {
            let until = (now + self.config.reservation_pause_ms).min(req.deadline);
            self.store
                .pause_reservations(table, &req.key, until)
                .await?;
            return no(
                VoteReason::Conflict,
                format!(
                    "reserved by live transactions {}; new reservations are paused until they end, so a retry can take the item",
                    live.join(", ")
                ),
            );
        }
        no(
            VoteReason::Conflict,
            format!("held by live transaction {}", live.join(", ")),
        )
    }

    /// Settles each holder by the lock rule ([`Self::resolve`]); the ones still live, named.
    async fn settle_holders(
        &self,
        table: &str,
        key: &Key,
        owners: &[Lock],
    ) -> Result<Vec<String>, PortError> {
        let mut live = vec![];
        for owner in owners {
            match self.resolve(table, key, owner).await? {
                Resolved::OwnerLive => live.push(owner.tx_id.to_string()),
                Resolved::NeedsRecovery => live.push(format!(
                    "{} (staged, past its deadline: being recovered)",
                    owner.tx_id
                )),
                Resolved::Aborted | Resolved::RolledForward | Resolved::DroppedStale => {}
            }
        }
        Ok(live)
    }

    /// Commit: apply the operation of the record and release the lock.
    pub async fn commit(
        &self,
        table: &str,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, PortError> {
        let mut c = self.completion(FenceOutcome::Committed, req);
        loop {
            let item = match self.store.commit(table, &req.key, &c).await? {
                CompleteWrite::Done => return Ok(CompleteReply::Done),
                CompleteWrite::Refused(item) => item,
            };
            let seen = self.seen(item.as_deref(), req);
            match rules::commit(seen, req.op.delete) {
                // Still ours: the horizon rose past the prune's since our prepare (a lock-free
                // abort of a full fence). Commit without pruning rather than lower it.
                CommitStep::Apply if c.prune.is_some() => c.prune = None,
                CommitStep::Apply => {
                    return Err(PortError::Fatal {
                        context: format!("committing {} in {table}", req.tx_id),
                        source: "the store refused a commit whose lock it holds".into(),
                    });
                }
                CommitStep::Retire => self.retire(table, &req.key, req, item.as_deref()).await?,
                CommitStep::Answer(reply) => {
                    if reply == Reply::AlreadyDone
                        && seen.entry.is_none()
                        && seen.shape != Shape::Absent
                    {
                        info!(tx_id = %req.tx_id, table, key = %show_key(&req.key),
                            "retried commit: lock gone and entry pruned under the horizon, so it was applied");
                    }
                    return Ok(answer(reply, table, &req.key, &req.tx_id, item.as_deref()));
                }
            }
        }
    }

    /// Abort: release the lock without applying anything, and fence the transaction out.
    pub async fn abort(
        &self,
        table: &str,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, PortError> {
        let mut c = self.completion(FenceOutcome::Aborted, req);
        // Whose write comes first: the lock holder's release, unless this item refused the
        // prepare (then the lock is most likely someone else's or nobody's, and fencing
        // first saves the release's refused write).
        let mut release = !req.refused;
        // A transaction from a clock too far ahead is released if it holds the item, never
        // fenced out (`began_too_far_ahead`).
        let unfenced = self.began_too_far_ahead(req.began);
        release |= unfenced;
        // A prepare may land between our writes; each write settles one such race.
        for _ in 0..6 {
            let write = if release {
                self.store.abort(table, &req.key, &c).await?
            } else {
                self.store
                    .fence_aborted(
                        table,
                        &req.key,
                        &req.tx_id,
                        c.entry,
                        self.config.fence_capacity,
                    )
                    .await?
            };
            let item = match write {
                CompleteWrite::Done => return Ok(CompleteReply::Done),
                CompleteWrite::Refused(item) => item,
            };
            match rules::abort(self.seen(item.as_deref(), req)) {
                // Our prepare holds the lock (it landed after a refused write), or the horizon
                // rose past the prune's since our prepare: release, without pruning.
                AbortStep::Release => {
                    c.prune = None;
                    release = true;
                }
                // Someone else's lock, or none: fence the transaction out.
                AbortStep::FenceOut if unfenced => return Ok(CompleteReply::Done),
                AbortStep::FenceOut => release = false,
                // A former transaction's entry under its id is in the way: retire it, then
                // the same write again.
                AbortStep::Retire => self.retire(table, &req.key, req, item.as_deref()).await?,
                AbortStep::Answer(reply) => {
                    return Ok(answer(reply, table, &req.key, &req.tx_id, item.as_deref()));
                }
            }
        }
        Err(PortError::Retryable {
            context: format!("abort of {} on {table}", req.tx_id),
            source: "the item kept changing under the abort".into(),
        })
    }

    /// Inquiry about a staged transaction ([`rules::inquire`]): does it hold the item, or can it
    /// never take it? With `prevent`, makes sure of one or the other: where it holds nothing,
    /// the lock-free abort's fencing write (an existing item) or a tombstone (an absent key),
    /// each conditional on the transaction still not holding the item, so the answer is
    /// linearized with any prepare of it.
    pub async fn inquire(
        &self,
        table: &str,
        req: &InquireRequest,
    ) -> Result<InquireReply, PortError> {
        let answer = |inquiry| Ok(InquireReply { inquiry });
        // A hold of the transaction carrying another operation than `req`'s is not its hold.
        let seen = |item: Option<&ItemState>| {
            let now = self.clock.now_ms();
            Seen::inquiring(item, &req.tx_id, req.began, req.op.as_ref(), now)
        };
        if !req.prevent {
            let item = self.store.read(table, &req.key).await?;
            return match rules::inquire(seen(item.as_ref()), false) {
                InquiryStep::Answer(a) => answer(a),
                InquiryStep::Fence | InquiryStep::Bury | InquiryStep::Retire => {
                    answer(Inquiry::Open)
                }
            };
        }
        let entry = FenceEntry {
            outcome: FenceOutcome::Aborted,
            began: req.began,
        };
        // Never a horizon raised into the future: a transaction from a clock too far ahead is
        // fenced out by its entry, whatever the fence holds.
        let ahead = self.began_too_far_ahead(req.began);
        let capacity = rules::prevent_capacity(self.config.fence_capacity, ahead);
        // The fencing write first: on an item that holds nothing of the transaction, the
        // common case, it is the only request; refused, its item says why.
        let mut step = InquiryStep::Fence;
        for _ in 0..6 {
            let write = match step {
                InquiryStep::Answer(a) => return answer(a),
                InquiryStep::Retire => {
                    let item = self.store.read(table, &req.key).await?;
                    let former = Former::of(item.as_ref(), &req.tx_id);
                    self.retire_former(table, &req.key, &req.tx_id, former)
                        .await?;
                    step = InquiryStep::Fence;
                    continue;
                }
                InquiryStep::Fence => {
                    self.store
                        .fence_aborted(table, &req.key, &req.tx_id, entry, capacity)
                        .await?
                }
                InquiryStep::Bury => {
                    self.store
                        .bury_aborted(table, &req.key, &req.tx_id, entry)
                        .await?
                }
            };
            step = match write {
                CompleteWrite::Done => {
                    info!(tx_id = %req.tx_id, table, key = %show_key(&req.key),
                        "staged transaction prevented on this item");
                    return answer(Inquiry::Prevented);
                }
                CompleteWrite::Refused(item) => rules::inquire(seen(item.as_deref()), true),
            };
        }
        Err(PortError::Retryable {
            context: format!("inquiry about {} on {table}", req.tx_id),
            source: "the item kept changing under the inquiry".into(),
        })
    }

    /// Settles the owner of a lock or reservation on this item by the lock rule
    /// ([`rules::resolve`]): reads the owner's record and follows it, one write at a time, until
    /// the owner is live (`PREPARING`, deadline not passed) or this item is no longer held by it.
    /// An expired holder is always settled; a live one only if its owner already decided.
    pub async fn resolve(
        &self,
        table: &str,
        key: &Key,
        owner: &Lock,
    ) -> Result<Resolved, PortError> {
        let mut record = self.log.get(&owner.tx_id).await?;
        for _ in 0..4 {
            let now = self.clock.now_ms();
            let found = OwnerRecord::of(record.as_ref(), owner.began);
            let past = match (&record, found) {
                (Some(r), OwnerRecord::Found(_)) => now > r.deadline,
                _ => now > owner.expires_at,
            };
            match rules::resolve(found, past) {
                Resolution::OwnerLive => return Ok(Resolved::OwnerLive),
                Resolution::Recover => {
                    self.ask_recovery(table, key, owner, record.as_ref(), now)
                        .await;
                    return Ok(Resolved::NeedsRecovery);
                }
                Resolution::RecordAborted => {
                    match self
                        .log
                        .create_aborted(&owner.tx_id, owner.began, now)
                        .await?
                    {
                        // The owner never began: it is now recorded aborted and can never begin.
                        Created::New => {
                            warn!(tx_id = %owner.tx_id, table, "lock of a transaction that never began: recorded it ABORTED");
                            self.abort_here(table, key, owner).await?;
                            return Ok(Resolved::Aborted);
                        }
                        Created::Exists(r) => record = Some(*r),
                    }
                }
                Resolution::DecideAbort => {
                    record = Some(
                        self.decide_abort(&owner.tx_id, record.as_ref(), now)
                            .await?,
                    );
                }
                Resolution::RollForward => {
                    self.roll_forward(table, key, owner).await?;
                    return Ok(Resolved::RolledForward);
                }
                Resolution::AbortHere => {
                    self.abort_here(table, key, owner).await?;
                    return Ok(Resolved::Aborted);
                }
                Resolution::DropStale => {
                    error!(tx_id = %owner.tx_id, table, key = %show_key(key), ?found,
                        "stale lock of an ended transaction found (its record COMMITTED, or another's under its id); removing it without applying its operation");
                    self.store.drop_lock(table, key, owner).await?;
                    return Ok(Resolved::DroppedStale);
                }
            }
        }
        Err(PortError::Retryable {
            context: format!("resolving {} on {table}", owner.tx_id),
            source: "the owner's record kept changing".into(),
        })
    }

    /// A holder `STAGING` past its deadline: with no transport here to inquire its other
    /// participants, marks its record for the completer on the transactions stream (the
    /// sweeper backs it up). Once: the record just read says whether someone asked already,
    /// and a refused conditional write still costs a write unit.
    async fn ask_recovery(
        &self,
        table: &str,
        key: &Key,
        owner: &Lock,
        record: Option<&TxRecord>,
        now: u64,
    ) {
        if record.is_some_and(|r| r.recovery_asked.is_some()) {
            return;
        }
        match self.log.ask_recovery(&owner.tx_id, now).await {
            Ok(asked) => {
                info!(tx_id = %owner.tx_id, table, key = %show_key(key), asked,
                "holder is STAGING past its deadline: its recovery is asked for")
            }
            Err(e) => warn!(tx_id = %owner.tx_id, error = %e,
                "holder is STAGING past its deadline; asking for its recovery failed (the sweeper will find it)"),
        }
    }

    /// Past its deadline and undecided: decides abort, by compare-and-swap. If the owner's
    /// coordinator decided first, the record says so, and the lock rule follows it instead.
    async fn decide_abort(
        &self,
        owner: &TxId,
        record: Option<&TxRecord>,
        now: u64,
    ) -> Result<TxRecord, PortError> {
        let Some(r) = record else {
            return Err(vanished(owner));
        };
        match self
            .log
            .transition(r, TxStatus::Aborting, None, now)
            .await?
        {
            Swapped::Done(r) | Swapped::Lost(Some(r)) => Ok(*r),
            Swapped::Lost(None) => Err(vanished(owner)),
        }
    }

    /// The owner decided commit: its operation applied here, its lock released.
    async fn roll_forward(&self, table: &str, key: &Key, owner: &Lock) -> Result<(), PortError> {
        let reply = self.commit(table, &complete_request(owner, key)).await?;
        acknowledged(reply, || {
            format!("rolling {} forward on {table}", owner.tx_id)
        })
    }

    async fn abort_here(&self, table: &str, key: &Key, owner: &Lock) -> Result<(), PortError> {
        let reply = self.abort(table, &complete_request(owner, key)).await?;
        acknowledged(reply, || format!("aborting {} on {table}", owner.tx_id))
    }

    /// Retires the former transaction's entry under `req`'s id that `item` holds (its commit or
    /// abort found it in the way of its own).
    async fn retire(
        &self,
        table: &str,
        key: &Key,
        req: &CompleteRequest,
        item: Option<&ItemState>,
    ) -> Result<(), PortError> {
        let former = Former::of(item, &req.tx_id);
        self.retire_former(table, key, &req.tx_id, former).await
    }

    /// One retiring write (`ParticipantStore::retire`); refused, the caller reads the item
    /// again and the rules say what next.
    async fn retire_former(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        former: Option<Former>,
    ) -> Result<(), PortError> {
        let Some(Former { entry, horizon }) = former else {
            return Ok(()); // gone meanwhile
        };
        warn!(tx_id = %tx, table, key = %show_key(key), former_began = entry.began,
            "fence entry of a former transaction under this id (its idempotency key used again after its record expired): retired, the horizon raised over it");
        self.store.retire(table, key, tx, entry, horizon).await?;
        Ok(())
    }

    /// What a commit or abort of `req` writes: its fence entry (`outcome`), its prune, the hint.
    fn completion<'a>(&self, outcome: FenceOutcome, req: &'a CompleteRequest) -> Completion<'a> {
        Completion {
            tx: &req.tx_id,
            op: &req.op,
            entry: FenceEntry {
                outcome,
                began: req.began,
            },
            prune: req.prune.as_ref(),
        }
    }

    /// The item as `req`'s commit or abort finds it.
    fn seen(&self, item: Option<&ItemState>, req: &CompleteRequest) -> Seen {
        item.map_or(Seen::ABSENT, |i| {
            Seen::of(i, &req.tx_id, req.began, self.clock.now_ms())
        })
    }
}

/// A resolver's own commit or abort, acknowledged; else the violation it met (logged).
fn acknowledged(reply: CompleteReply, context: impl FnOnce() -> String) -> Result<(), PortError> {
    if reply.acknowledged() {
        Ok(())
    } else {
        Err(PortError::Fatal {
            context: context(),
            source: "protocol violation (logged)".into(),
        })
    }
}

fn vanished(tx: &TxId) -> PortError {
    PortError::Fatal {
        context: format!("resolving {tx}"),
        source: "the transaction record vanished".into(),
    }
}

/// The reply to a commit or abort that did not write, with a violation logged loudly.
fn answer(
    reply: Reply,
    table: &str,
    key: &Key,
    tx: &TxId,
    item: Option<&ItemState>,
) -> CompleteReply {
    let what = match reply {
        Reply::Done => return CompleteReply::Done,
        Reply::AlreadyDone => return CompleteReply::AlreadyDone,
        Reply::Violation(Violation::CommitOfAborted) => {
            "commit of a transaction this item recorded as aborted".to_owned()
        }
        Reply::Violation(Violation::AbortOfCommitted) => {
            "abort of a transaction this item recorded as committed".to_owned()
        }
        Reply::Violation(Violation::NoItem) => {
            "commit found neither its lock nor its fence entry (item absent)".to_owned()
        }
        Reply::Violation(Violation::NeitherLockNorEntry) => format!(
            "commit found neither its lock nor its fence entry (item present, lock held by {})",
            item.and_then(|i| i.lock.as_ref())
                .map_or_else(|| "nobody".to_owned(), |l| l.tx_id.to_string())
        ),
    };
    violation(table, key, tx, &what)
}

/// A former transaction's entry under a transaction's id, and the horizon retiring it sets: at
/// least its `began` and the horizon as read (a prune's, `rules::plan_prune`: nothing of the
/// former transaction may land again).
struct Former {
    entry: FenceEntry,
    horizon: u64,
}

impl Former {
    fn of(item: Option<&ItemState>, tx: &TxId) -> Option<Former> {
        let item = item?;
        let entry = *item.fence.get(tx)?;
        Some(Former {
            entry,
            horizon: item.horizon.max(entry.began),
        })
    }
}

fn complete_request(owner: &Lock, key: &Key) -> CompleteRequest {
    CompleteRequest {
        tx_id: owner.tx_id.clone(),
        deadline: owner.expires_at,
        began: owner.began,
        key: key.clone(),
        op: owner.op.clone(),
        prune: None,
        refused: false,
    }
}

fn violation(table: &str, key: &Key, tx: &TxId, what: &str) -> CompleteReply {
    error!(tx_id = %tx, table, key = %show_key(key), "PROTOCOL VIOLATION: {what}");
    CompleteReply::Violation {
        message: format!("{what} (table {table}, key {})", show_key(key)),
    }
}
