//! The protocol's decisions, as pure functions: what was found → what to do.
//!
//! Each rule takes a few small `Copy` facts and answers with the step to take; nothing here
//! reads or writes anything. The drivers ([`crate::participant`], [`crate::coordinator`]) read,
//! ask a rule, write. The stores use the admission rules as the meaning of their conditional
//! writes (the in-memory store runs them; the DynamoDB adapter spells them as condition
//! expressions, and one contract suite runs against both). The model check
//! (`crates/model`) runs these same functions on its abstract items. `docs/protocol.md`
//! explains them.
//!
//! | rule | decides |
//! | --- | --- |
//! | [`prepare`] | whether a prepare may lock an item, and if not, why |
//! | [`reserve`], [`escrow`] | whether a commuting operation may reserve an item, and its bounds |
//! | [`commit`], [`abort`], [`fence_out`] | what a commit or abort does on an item as found |
//! | [`resolve`] | the lock rule: what to do about an expired lock's owner |
//! | [`decision`], [`after_lost_decide`], [`after_lost_finalize`], [`recovery`] | the record's moves |
//! | [`inquire`], [`staged_decision`] | the staged commit's recovery: is a participant held, or prevented? |
//! | [`plan_prune`] | which fence entries the lock holder's release removes, and the new horizon |
//! | [`native`], [`native_write`] | whether a transaction is committed as one native `TransactWriteItems`, and what its write does on an item as found |

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::decimal::Decimal;
use crate::ids::TxId;
use crate::item::{Escrow, FenceEntry, FenceOutcome, ItemState};
use crate::message::Prune;
use crate::op::{Bound, Escrowed};
use crate::status::{Decision, TxStatus};

/// What an inquiry found (the answer on the wire, which [`inquire`] and [`staged_decision`]
/// decide by).
pub use crate::message::Inquiry;

/// What an item is, to the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// No item under the key: no lock, no fence, no horizon.
    Absent,
    /// A business item.
    Real,
    /// Written by a creating prepare (`put`): the key, the lock, the fence; always locked;
    /// readers see nothing. Its commit makes it real, its abort a tombstone.
    Placeholder,
    /// What a committed delete or an aborted create leaves: the key, the fence and the horizon,
    /// never a lock; readers see nothing; a creating prepare may take it.
    Tombstone,
}

/// Who holds an item's lock, seen from the transaction taking the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Holder {
    /// Nobody.
    Nobody,
    /// The transaction taking the step.
    Me,
    /// Another transaction; `expired`: its deadline (the lock's `expiresAt`) has passed, so a
    /// newcomer may resolve it (never take it).
    Other {
        /// Whether the owner's deadline has passed.
        expired: bool,
    },
}

/// Whether other transactions hold reservations on an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Others {
    /// None.
    None,
    /// Some, all live.
    Live,
    /// Some, at least one past its owner's deadline (resolve it by the lock rule).
    Expired,
}

/// An item as one transaction's step finds it: everything the protocol's rules read of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Seen {
    /// What the item is.
    pub shape: Shape,
    /// Who holds its (exclusive) lock.
    pub holder: Holder,
    /// The transaction's own fence entry on the item, if any.
    pub entry: Option<FenceOutcome>,
    /// Whether the item's fence horizon covers the transaction (it began at or before it): no
    /// prepare of it may lock the item again.
    pub covered: bool,
    /// Whether the transaction holds a reservation on the item.
    pub reserved_by_me: bool,
    /// Whether other transactions do.
    pub reserved_by_others: Others,
    /// Whether new reservations are paused (an exclusive operation waits for the item).
    pub paused: bool,
}

impl Seen {
    /// No item: nothing locked, nothing fenced.
    pub const ABSENT: Seen = Seen {
        shape: Shape::Absent,
        holder: Holder::Nobody,
        entry: None,
        covered: false,
        reserved_by_me: false,
        reserved_by_others: Others::None,
        paused: false,
    };

    /// Whether the transaction holds the item, by lock or by reservation.
    pub fn held_by_me(self) -> bool {
        self.holder == Holder::Me || self.reserved_by_me
    }

    /// What the rules read of `item` for transaction `tx` (which began at `began`) at time
    /// `now` (no item: [`Seen::ABSENT`]).
    pub fn of(item: &ItemState, tx: &TxId, began: u64, now: u64) -> Seen {
        Seen {
            shape: if item.placeholder {
                Shape::Placeholder
            } else if item.tombstone {
                Shape::Tombstone
            } else {
                Shape::Real
            },
            holder: match &item.lock {
                None => Holder::Nobody,
                Some(l) if &l.tx_id == tx => Holder::Me,
                Some(l) => Holder::Other {
                    expired: now > l.expires_at,
                },
            },
            entry: item.fence.get(tx).map(|e| e.outcome),
            covered: began <= item.horizon,
            reserved_by_me: item.reservations.contains_key(tx),
            reserved_by_others: {
                let others = item.reservations.iter().filter(|(id, _)| *id != tx);
                let mut expired = false;
                let mut any = false;
                for (_, r) in others {
                    any = true;
                    expired |= now > r.expires_at;
                }
                match (any, expired) {
                    (false, _) => Others::None,
                    (true, false) => Others::Live,
                    (true, true) => Others::Expired,
                }
            },
            paused: now < item.paused_until,
        }
    }
}

/// Why a prepare may not lock an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrepareRefusal {
    /// The transaction already ended on the item (its fence entry): a late or duplicated prepare.
    Fenced(FenceOutcome),
    /// The horizon covers the transaction: it ended here and its entry was pruned since, or more
    /// transactions that began after it ended here than the fence keeps.
    BelowHorizon,
    /// Another transaction holds the lock and its deadline has not passed.
    Locked,
    /// Another transaction's lock, or one of its reservations, expired: resolve its owner
    /// ([`resolve`]), then try again.
    ResolveOwner,
    /// Other transactions' reservations stand: an exclusive operation waits until they drain
    /// (it pauses new reservations meanwhile).
    Reserved,
    /// New reservations are paused: an exclusive operation is waiting for the item.
    Paused,
    /// The item holds as many reservations as it takes (`ParticipantConfig::max_reservations`):
    /// each one is stored on the item, which DynamoDB bills per KB written and caps at 400 KB.
    Full,
    /// The operation needs a business item and there is none of this shape.
    NotFound(Shape),
    /// A creating operation (`put`) on an item that exists.
    Exists,
    /// The protocol admits the prepare; one of the operation's own conditions fails (a
    /// `require`, or an `add` to an attribute that is not a number).
    Business,
}

/// What a prepare does on an item as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrepareStep {
    /// Lock it (a creating operation writes a placeholder), provided the operation's own
    /// conditions hold; or it is locked by this transaction already (a retry: yes again).
    Lock,
    /// Refuse.
    Refuse(PrepareRefusal),
}

/// The prepare rule. Checked in this order: the transaction's own fence entry; its own lock (a
/// retried prepare); the horizon; another's lock (live: `Locked`; expired: resolve the owner);
/// then the item's shape against the operation (`creates`: a `put`, which needs the item absent
/// or a tombstone; anything else needs a real item). A refused write reads as
/// [`PrepareRefusal::Business`] when this says `Lock`: the operation's own conditions failed.
pub fn prepare(seen: Seen, creates: bool) -> PrepareStep {
    use PrepareRefusal::*;
    let refuse = PrepareStep::Refuse;
    if let Some(outcome) = seen.entry {
        return refuse(Fenced(outcome));
    }
    if seen.holder == Holder::Me {
        // A retry: our placeholder (creating) or our lock on the real item.
        return match (creates, seen.shape) {
            (true, Shape::Placeholder) | (false, Shape::Real) => PrepareStep::Lock,
            (true, _) => refuse(Exists),
            (false, shape) => refuse(NotFound(shape)),
        };
    }
    if seen.covered {
        return refuse(BelowHorizon);
    }
    if let Holder::Other { expired } = seen.holder {
        return refuse(if expired { ResolveOwner } else { Locked });
    }
    match seen.reserved_by_others {
        Others::Expired => return refuse(ResolveOwner),
        Others::Live => return refuse(Reserved),
        Others::None => {}
    }
    match (creates, seen.shape) {
        (true, Shape::Absent | Shape::Tombstone) | (false, Shape::Real) => PrepareStep::Lock,
        (true, _) => refuse(Exists),
        (false, shape) => refuse(NotFound(shape)),
    }
}

/// The reservation rule, for a commuting operation: like [`prepare`], but other reservations may
/// stand beside it, only a lock excludes it, and it waits while an exclusive operation does or
/// while the item holds as many reservations as it takes (`full`). Its own bounds against the
/// escrowed extremes are the operation's own conditions ([`escrow`]): a refused write that this
/// admits failed one of them (`Business`).
pub fn reserve(seen: Seen, full: bool) -> PrepareStep {
    use PrepareRefusal::*;
    let refuse = PrepareStep::Refuse;
    if let Some(outcome) = seen.entry {
        return refuse(Fenced(outcome));
    }
    if seen.reserved_by_me {
        return PrepareStep::Lock; // a retry: yes again
    }
    if seen.covered {
        return refuse(BelowHorizon);
    }
    if let Holder::Other { expired } = seen.holder {
        return refuse(if expired { ResolveOwner } else { Locked });
    }
    if seen.shape != Shape::Real {
        return refuse(NotFound(seen.shape));
    }
    if seen.paused {
        return refuse(Paused);
    }
    if full {
        return refuse(Full);
    }
    PrepareStep::Lock
}

/// How a new reservation's bound on one side of an attribute (its floor, or its ceiling) meets
/// the one the standing reservations keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Keeps {
    /// Neither keeps one.
    Neither,
    /// Only the new reservation.
    Mine,
    /// Only the standing ones.
    Theirs,
    /// Both, the same.
    Same,
    /// Both, different ones.
    Different,
}

impl Keeps {
    /// From the new reservation's bound and the standing ones', `same` telling equal bounds.
    pub fn of<T>(mine: Option<T>, theirs: Option<T>, same: impl Fn(&T, &T) -> bool) -> Keeps {
        match (mine, theirs) {
            (None, None) => Keeps::Neither,
            (Some(_), None) => Keeps::Mine,
            (None, Some(_)) => Keeps::Theirs,
            (Some(m), Some(t)) if same(&m, &t) => Keeps::Same,
            (Some(_), Some(_)) => Keeps::Different,
        }
    }
}

/// One attribute of a commuting operation as its reservation finds it, each fact reduced to a
/// comparison (`Operation::escrow` gives the bounds; the store the value and the extremes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EscrowSeen {
    /// No reservation stands on the attribute and its escrow's extremes are not at the value:
    /// something outside the protocol wrote it since (the escrow must be reset first).
    pub stale: bool,
    /// The sign of the change (`Less`: a debit).
    pub change: Ordering,
    /// The lower bound is `gt` (reaching it breaks it), not `gte`.
    pub strict_lower: bool,
    /// The upper bound is `lt`, not `lte`.
    pub strict_upper: bool,
    /// The committed value against the operation's lower bound (`gte v`, `gt v`); `None`: no
    /// such bound.
    pub value_vs_lower: Option<Ordering>,
    /// The committed value against its upper bound (`lte v`).
    pub value_vs_upper: Option<Ordering>,
    /// The lowest value the attribute could reach if every standing debit committed and no
    /// credit did (the value, if nothing stands) against the lower bound.
    pub lowest_vs_lower: Option<Ordering>,
    /// The highest (every standing credit, no debit) against the upper bound.
    pub highest_vs_upper: Option<Ordering>,
    /// The floor the standing reservations keep against the operation's own.
    pub floor: Keeps,
    /// The ceiling.
    pub ceiling: Keeps,
}

impl EscrowSeen {
    /// Reserved attribute `name` of `item` as a reservation of `e` finds it: what [`escrow`]
    /// reads (`None`: the attribute holds something other than a number). An absent attribute
    /// counts as 0; with nothing standing, the extremes are the value.
    pub fn of(item: &ItemState, name: &str, e: &Escrowed) -> Option<EscrowSeen> {
        let value = match item.attributes.get(name) {
            None => Decimal::zero(),
            Some(v) if v.is_number() => Decimal::parse(&v.to_string()).ok()?,
            Some(_) => return None,
        };
        let escrow = item.escrow.get(name);
        let standing = escrow.filter(|s| s.count > 0);
        let (lowest, highest) = standing.map_or((&value, &value), |s| (&s.low, &s.high));
        let vs = |x: &Decimal, bound: &Option<Bound>| bound.as_ref().map(|b| x.cmp_value(&b.value));
        let strict = |bound: &Option<Bound>| bound.as_ref().is_some_and(|b| b.strict);
        let same = |a: &&Bound, b: &&Bound| a.same(b);
        Some(EscrowSeen {
            stale: escrow.is_some_and(|s| s.is_stale(&value)),
            change: e.delta.cmp_value(&Decimal::zero()),
            strict_lower: strict(&e.lower),
            strict_upper: strict(&e.upper),
            value_vs_lower: vs(&value, &e.lower),
            value_vs_upper: vs(&value, &e.upper),
            lowest_vs_lower: vs(lowest, &e.lower),
            highest_vs_upper: vs(highest, &e.upper),
            floor: Keeps::of(
                e.floor.as_ref(),
                escrow.and_then(Escrow::standing_floor),
                same,
            ),
            ceiling: Keeps::of(
                e.ceiling.as_ref(),
                escrow.and_then(Escrow::standing_ceiling),
                same,
            ),
        })
    }
}

/// Why a reservation's bounds refuse it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EscrowRefusal {
    /// The attribute's idle escrow is stale: reset it, then try again.
    Stale,
    /// The committed value breaks the bound: no outcome of the transactions in flight helps
    /// (`condition`).
    Breaks,
    /// The standing reservations keep the attribute to another bound, or the change moves it
    /// toward a bound they keep without one of its own (`conflict`: retry once they end).
    Disagrees,
    /// The bound holds for the committed value, not for every outcome of the reservations in
    /// flight (`conflict`).
    InFlight,
}

/// The escrow rule, per reserved attribute: a bound is checked against the extreme every
/// subset of the standing reservations could reach (a lower bound against the lowest, an upper
/// against the highest), and every standing reservation keeps the same floor and ceiling, so
/// that each new reservation's check protects the standing ones too and every bound holds in
/// every committed history (`docs/protocol.md`, "Reservations"). A change without a floor of
/// its own may not move the value toward a floor others keep (nor up toward their ceiling).
pub fn escrow(seen: EscrowSeen) -> Result<(), EscrowRefusal> {
    let below = |o: Option<Ordering>| {
        o == Some(Ordering::Less) || (seen.strict_lower && o == Some(Ordering::Equal))
    };
    let above = |o: Option<Ordering>| {
        o == Some(Ordering::Greater) || (seen.strict_upper && o == Some(Ordering::Equal))
    };
    if seen.stale {
        return Err(EscrowRefusal::Stale);
    }
    if below(seen.value_vs_lower) || above(seen.value_vs_upper) {
        return Err(EscrowRefusal::Breaks);
    }
    let agrees = |keeps: Keeps, toward: Ordering| match keeps {
        Keeps::Different => false,
        Keeps::Theirs => seen.change != toward,
        Keeps::Neither | Keeps::Mine | Keeps::Same => true,
    };
    if !agrees(seen.floor, Ordering::Less) || !agrees(seen.ceiling, Ordering::Greater) {
        return Err(EscrowRefusal::Disagrees);
    }
    if below(seen.lowest_vs_lower) || above(seen.highest_vs_upper) {
        return Err(EscrowRefusal::InFlight);
    }
    Ok(())
}

/// The answer of a commit or abort to its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// Written now.
    Done,
    /// Nothing to do: done before (a duplicate, or a resolver did it).
    AlreadyDone,
    /// The item contradicts the decision: reported loudly, never acknowledged.
    Violation(Violation),
}

impl Reply {
    /// Whether the sender may count the item as finished.
    pub fn acknowledged(self) -> bool {
        !matches!(self, Reply::Violation(_))
    }
}

/// A contradiction between an item and a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Violation {
    /// A commit of a transaction the item recorded as aborted.
    CommitOfAborted,
    /// An abort of a transaction the item recorded as committed.
    AbortOfCommitted,
    /// A commit that finds neither its lock nor its fence entry, and no horizon covering it.
    NeitherLockNorEntry,
    /// A commit (other than a delete's) that finds no item at all.
    NoItem,
}

/// What a commit does on an item as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommitStep {
    /// The lock is the transaction's: apply the operation, release the lock, write the
    /// `committed` entry (one conditional write; pruning only if the horizon is not above the
    /// planned one, else without pruning).
    Apply,
    /// Answer without writing.
    Answer(Reply),
}

/// The commit rule. A decided commit's lock is removed by nobody but that commit (the lock rule
/// rolls `COMMITTING` owners forward), so without the lock: a `committed` entry, or a horizon
/// covering the transaction (its entry pruned after it applied), means applied; no item means
/// applied for a delete only (its tombstone removed by someone outside the protocol);
/// anything else contradicts the decision.
pub fn commit(seen: Seen, deletes: bool) -> CommitStep {
    let answer = CommitStep::Answer;
    if seen.held_by_me() {
        return CommitStep::Apply;
    }
    if seen.shape == Shape::Absent {
        return answer(if deletes {
            Reply::AlreadyDone
        } else {
            Reply::Violation(Violation::NoItem)
        });
    }
    answer(match seen.entry {
        Some(FenceOutcome::Committed) => Reply::AlreadyDone,
        Some(FenceOutcome::Aborted) => Reply::Violation(Violation::CommitOfAborted),
        None if seen.covered => Reply::AlreadyDone,
        None => Reply::Violation(Violation::NeitherLockNorEntry),
    })
}

/// What an abort does on an item as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortStep {
    /// The lock is the transaction's: release it and write the `aborted` entry (a placeholder
    /// becomes a tombstone).
    Release,
    /// Fence the transaction out so that a prepare of it landing later is refused
    /// ([`fence_out`]: an `aborted` entry, or a raised horizon); the lock, if any, is another's
    /// and stays.
    FenceOut,
    /// Answer without writing.
    Answer(Reply),
}

/// The abort rule. Without the lock: no item means nothing to do (nothing to fence: a late
/// prepare finds nothing to lock unless someone creates the item first; accepted, see
/// `docs/protocol.md`); an `aborted` entry or a covering horizon means done; a `committed` entry
/// contradicts the decision; otherwise fence the transaction out.
pub fn abort(seen: Seen) -> AbortStep {
    let answer = AbortStep::Answer;
    if seen.held_by_me() {
        return AbortStep::Release;
    }
    if seen.shape == Shape::Absent {
        return answer(Reply::AlreadyDone);
    }
    match seen.entry {
        Some(FenceOutcome::Aborted) => answer(Reply::AlreadyDone),
        Some(FenceOutcome::Committed) => answer(Reply::Violation(Violation::AbortOfCommitted)),
        None if seen.covered => answer(Reply::AlreadyDone),
        None => AbortStep::FenceOut,
    }
}

/// How an abort fences its transaction out of an item it does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceOut {
    /// Write the `aborted` entry.
    Entry,
    /// The fence is full: raise the horizon to the transaction's `began` instead (never lowered),
    /// which refuses its prepares just as well and keeps the fence bounded.
    RaiseHorizon,
}

/// Entry or horizon, by the fence's size.
pub fn fence_out(entries: usize, capacity: usize) -> FenceOut {
    if entries < capacity {
        FenceOut::Entry
    } else {
        FenceOut::RaiseHorizon
    }
}

/// What a resolver does about an expired lock's owner (`docs/protocol.md`, "The lock rule"): an expired lock
/// is never free, it only gives the right to settle its owner by the owner's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resolution {
    /// Owner `PREPARING` (or its record missing) and its deadline has not passed: the lock
    /// stands (`conflict`).
    OwnerLive,
    /// Owner record missing and the lock expired: the owner never began. Record it `ABORTED`
    /// (only if still missing), then abort it here.
    RecordAborted,
    /// Owner `PREPARING` past its deadline: compare-and-swap it to `ABORTING`, then follow the
    /// record as it then is.
    DecideAbort,
    /// Owner `COMMITTING`: roll it forward on this item (commit its operation from its lock).
    RollForward,
    /// Owner `ABORTING` or `ABORTED`: abort it on this item.
    AbortHere,
    /// Owner `COMMITTED`: every participant acknowledged before that was written, so this lock
    /// is a stale duplicate that slipped past the fence: drop it without applying it.
    DropStale,
    /// Owner `STAGING` past its deadline: it may be committed implicitly (every participant
    /// holding it), so nobody aborts it from one item. Its record is recovered as a whole
    /// ([`Recovery::Inquire`]: inline where the resolver can reach every participant, else
    /// by asking for it); the lock stands meanwhile (`conflict`).
    Recover,
}

/// The lock rule, from the owner's record (`None`: missing) and whether its deadline passed (a
/// missing record's deadline is the lock's expiry: a live lock of a missing record is left
/// alone, as a staged coordinator, which writes its record with its prepares, needs).
pub fn resolve(owner: Option<TxStatus>, deadline_passed: bool) -> Resolution {
    match owner {
        None if deadline_passed => Resolution::RecordAborted,
        None => Resolution::OwnerLive,
        Some(TxStatus::Preparing) if deadline_passed => Resolution::DecideAbort,
        Some(TxStatus::Staging) if deadline_passed => Resolution::Recover,
        Some(TxStatus::Preparing | TxStatus::Staging) => Resolution::OwnerLive,
        Some(TxStatus::Committing) => Resolution::RollForward,
        Some(TxStatus::Aborting | TxStatus::Aborted) => Resolution::AbortHere,
        Some(TxStatus::Committed) => Resolution::DropStale,
    }
}

/// The decision from the votes: commit only if every participant voted yes (a participant that
/// did not answer counts as a no).
pub fn decision(mut yes: impl Iterator<Item = bool>) -> Decision {
    if yes.all(|y| y) {
        Decision::Commit
    } else {
        Decision::Abort
    }
}

/// What a coordinator whose decision swap was lost does, from the record as it is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AfterLostSwap {
    /// Someone decided first (a resolver or the sweeper, past the deadline): follow the
    /// recorded decision (which may already be finished).
    Follow(Decision),
    /// The record is missing, or still undecided after a failed swap: storage is broken.
    Fatal,
}

/// After a lost `PREPARING → COMMITTING | ABORTING` swap.
pub fn after_lost_decide(found: Option<TxStatus>) -> AfterLostSwap {
    match found.and_then(TxStatus::decision) {
        Some(d) => AfterLostSwap::Follow(d),
        None => AfterLostSwap::Fatal,
    }
}

/// After a lost finalize swap (`COMMITTING → COMMITTED`, `ABORTING → ABORTED`): done if someone
/// else (the sweeper) finalized it the same way, else the record is broken.
pub fn after_lost_finalize(found: Option<TxStatus>, decision: Decision) -> AfterLostSwap {
    if found == Some(TxStatus::finishing(decision)) {
        AfterLostSwap::Follow(decision)
    } else {
        AfterLostSwap::Fatal
    }
}

/// What recovery (a replay, the sweeper) does with a record, from the record alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recovery {
    /// Undecided and its deadline has not passed: its coordinator may still be at work.
    Leave,
    /// Undecided past its deadline: compare-and-swap to `ABORTING`, then complete the abort.
    DecideAbort,
    /// Decided, not finished: send the decision to every participant, then finalize.
    Complete(Decision),
    /// `STAGING` past its deadline: its stager may have answered "committed" from every
    /// participant holding it, so the deadline alone decides nothing. Ask every participant
    /// to prevent the transaction ([`inquire`] with `prevent`), then decide by
    /// [`staged_decision`].
    Inquire,
    /// Terminal: nothing to do.
    Ended,
}

/// The recovery rule.
pub fn recovery(status: TxStatus, deadline_passed: bool) -> Recovery {
    match (status, status.decision()) {
        (TxStatus::Preparing, _) if deadline_passed => Recovery::DecideAbort,
        (TxStatus::Staging, _) if deadline_passed => Recovery::Inquire,
        (TxStatus::Preparing | TxStatus::Staging, _) => Recovery::Leave,
        (s, _) if s.is_terminal() => Recovery::Ended,
        (_, Some(d)) => Recovery::Complete(d),
        (_, None) => Recovery::Leave,
    }
}

/// Whether the completer (on the transactions table's stream) recovers a record after a
/// change: only when the change is a participant's ask (`recoveryAsked` newly set) on a record
/// still `STAGING`. A participant asks only after the deadline, so the recovery it triggers is
/// [`Recovery::Inquire`]; every other change is its coordinator's (or a recoverer's) own work
/// in progress, which the completer must not duplicate. At-least-once delivery repeats a
/// recovery, which changes nothing twice (every step is a compare-and-swap).
pub fn completer_recovers(asked_before: bool, status: TxStatus, asked: bool) -> bool {
    status == TxStatus::Staging && asked && !asked_before
}

/// What an inquiry does on an item as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InquiryStep {
    /// Answer without writing.
    Answer(Inquiry),
    /// Prevent the transaction on an item that exists (not held by it, no entry, no covering
    /// horizon): the lock-free abort's write ([`fence_out`]: an `aborted` entry, or the
    /// horizon raised), then read the answer again.
    Fence,
    /// Prevent it on an absent key: a tombstone carrying its `aborted` entry, written only if
    /// the key is still absent. Without it, the key could be created and the transaction's
    /// late prepare land after recovery aborted it, while its stager answers "committed".
    Bury,
}

/// The inquiry rule: what an inquiry (a recoverer's, with `prevent`; a helper's, without)
/// finds of the transaction on one item, and the write that prevents it where nothing does yet.
pub fn inquire(seen: Seen, prevent: bool) -> InquiryStep {
    let answer = InquiryStep::Answer;
    if seen.held_by_me() {
        return answer(Inquiry::Held);
    }
    match seen.entry {
        Some(FenceOutcome::Aborted) => return answer(Inquiry::Prevented),
        Some(FenceOutcome::Committed) => return answer(Inquiry::Committed),
        None if seen.covered => return answer(Inquiry::Prevented),
        None => {}
    }
    match (prevent, seen.shape) {
        (false, _) => answer(Inquiry::Open),
        (true, Shape::Absent) => InquiryStep::Bury,
        (true, _) => InquiryStep::Fence,
    }
}

/// What recovery of a `STAGING` record does once each participant answered an inquiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StagedDecision {
    /// Some participant is prevented: the transaction can never hold everywhere. Compare-and-
    /// swap `STAGING → ABORTING`. One prevented participant is enough, so an abort never waits
    /// for an unreachable one.
    Abort,
    /// Every participant holds it (or committed it): compare-and-swap `STAGING → COMMITTING`.
    Commit,
    /// Neither yet (an answer missing, or open): leave the record and ask again later.
    Wait,
}

/// The staged decision rule, from each participant's answer (`None`: no answer).
pub fn staged_decision(answers: impl IntoIterator<Item = Option<Inquiry>>) -> StagedDecision {
    let mut all_held = true;
    for a in answers {
        match a {
            Some(Inquiry::Prevented) => return StagedDecision::Abort,
            Some(Inquiry::Held | Inquiry::Committed) => {}
            Some(Inquiry::Open) | None => all_held = false,
        }
    }
    if all_held {
        StagedDecision::Commit
    } else {
        StagedDecision::Wait
    }
}

/// Why a transaction is not committed as one native `TransactWriteItems` (it takes the
/// protocol path instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotNative {
    /// A custom participant (its own logic, reached by its own transport) takes part.
    Custom,
    /// A table the coordinator does not reach `direct` (a Lambda or HTTP participant: another
    /// account, Region or process owns the writes).
    NotDirect,
    /// A service marked `hot` takes part: its items take concurrent reservations, which a
    /// native transaction on the same item would conflict with.
    Hot,
    /// A `delete`: it must leave a tombstone carrying the item's fence, which needs the item
    /// read first.
    Delete,
    /// More items than one `TransactWriteItems` takes besides the record.
    TooMany,
    /// More bytes than one `TransactWriteItems` takes.
    TooLarge,
}

impl NotNative {
    /// For logs and the bench.
    pub fn as_str(self) -> &'static str {
        match self {
            NotNative::Custom => "custom participant",
            NotNative::NotDirect => "participant not reached direct",
            NotNative::Hot => "hot service",
            NotNative::Delete => "delete",
            NotNative::TooMany => "too many items",
            NotNative::TooLarge => "too large",
        }
    }
}

/// One participant of a transaction, as [`native`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NativeFacts {
    /// A table's item (not a custom participant).
    pub table: bool,
    /// Reached `direct`: the coordinator writes the table itself, in its own account and Region.
    pub direct: bool,
    /// The service is marked hot.
    pub hot: bool,
    /// The operation deletes the item.
    pub deletes: bool,
}

/// Most actions in one `TransactWriteItems` (the record's put is one of them).
pub const NATIVE_MAX_ACTIONS: usize = 100;
/// Most bytes in one `TransactWriteItems`.
pub const NATIVE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Whether a transaction may be committed as one native `TransactWriteItems` (every item's
/// write and the record's put), given its participants and an upper estimate of the request's
/// bytes. Checked in this order: custom participants, transports, hot services, deletes, size.
pub fn native(
    participants: impl IntoIterator<Item = NativeFacts>,
    bytes: usize,
) -> Result<(), NotNative> {
    let mut items = 0;
    for p in participants {
        if !p.table {
            return Err(NotNative::Custom);
        }
        if !p.direct {
            return Err(NotNative::NotDirect);
        }
        if p.hot {
            return Err(NotNative::Hot);
        }
        if p.deletes {
            return Err(NotNative::Delete);
        }
        items += 1;
    }
    if items + 1 > NATIVE_MAX_ACTIONS {
        return Err(NotNative::TooMany);
    }
    if bytes > NATIVE_MAX_BYTES {
        return Err(NotNative::TooLarge);
    }
    Ok(())
}

/// What a native transaction's write does on one item as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NativeStep {
    /// Apply the operation (its own conditions permitting).
    Apply,
    /// The protocol holds the item (a lock, a placeholder, reservations): the transaction takes
    /// the protocol path, which settles or waits for the holders.
    Protocol,
    /// Refuse, as a prepare would (the item's shape against the operation).
    Refuse(PrepareRefusal),
}

/// The native write's rule: the prepare rule ([`prepare`]) for a transaction that has never
/// been anywhere (no fence entry, above every horizon, holding nothing), taken and released in
/// one write. So it applies only where an exclusive prepare would lock the item at once: no
/// lock, no reservation standing, the shape the operation needs; where the protocol holds the
/// item it gives way to the protocol. A reservation's escrow is kept by the same token: none
/// stands where a native write applies.
pub fn native_write(seen: Seen, creates: bool) -> NativeStep {
    let fresh = Seen {
        entry: None,
        covered: false,
        reserved_by_me: false,
        holder: match seen.holder {
            Holder::Me => Holder::Other { expired: false },
            other => other,
        },
        ..seen
    };
    match prepare(fresh, creates) {
        PrepareStep::Lock => NativeStep::Apply,
        PrepareStep::Refuse(
            PrepareRefusal::Locked
            | PrepareRefusal::ResolveOwner
            | PrepareRefusal::Reserved
            | PrepareRefusal::Paused
            | PrepareRefusal::Full
            | PrepareRefusal::Fenced(_)
            | PrepareRefusal::BelowHorizon,
        ) => NativeStep::Protocol,
        PrepareStep::Refuse(r) => NativeStep::Refuse(r),
    }
}

/// What the holder's commit or abort prunes from the fence it found when its prepare took the
/// item: every stale entry (more than `window` ms after its transaction began,
/// [`FenceEntry::is_stale`]), and, once more than `capacity - 1` others
/// are fresh, the oldest (by `began`) down to three quarters of that, leaving room for its own.
/// Pruning in batches means the releases that follow on a hot item need not prune at all, so
/// they do not race each other's horizon (a release whose planned horizon was overtaken is made
/// again without pruning). The horizon rises to the latest `began` removed, so no prepare of a
/// removed transaction can ever land again. `None`: nothing to prune.
pub fn plan_prune(
    fence: &BTreeMap<TxId, FenceEntry>,
    horizon: u64,
    holder: &TxId,
    now: u64,
    window: u64,
    capacity: usize,
) -> Option<Prune> {
    let mut others: Vec<(&TxId, &FenceEntry)> =
        fence.iter().filter(|(id, _)| *id != holder).collect();
    // Newest first: those are the ones whose prepares may still be in flight.
    others.sort_by(|a, b| b.1.began.cmp(&a.1.began).then_with(|| a.0.cmp(b.0)));
    let room = capacity.saturating_sub(1);
    let fresh = others
        .iter()
        .filter(|(_, e)| !e.is_stale(now, window))
        .count();
    let keep = if fresh > room { room - room / 4 } else { room };
    let (mut kept, mut ids, mut new_horizon) = (0, vec![], horizon);
    for (id, e) in others {
        if e.is_stale(now, window) || kept >= keep {
            ids.push(id.clone());
            new_horizon = new_horizon.max(e.began);
        } else {
            kept += 1;
        }
    }
    (!ids.is_empty()).then_some(Prune {
        ids,
        horizon: new_horizon,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> NativeFacts {
        NativeFacts {
            table: true,
            direct: true,
            hot: false,
            deletes: false,
        }
    }

    #[test]
    fn native_takes_plain_direct_tables_and_names_the_first_reason_it_refuses() {
        assert_eq!(native([table(), table()], 1_000), Ok(()));
        let with = |f: fn(&mut NativeFacts)| {
            let mut p = table();
            f(&mut p);
            native([table(), p], 1_000)
        };
        assert_eq!(with(|p| p.table = false), Err(NotNative::Custom));
        assert_eq!(with(|p| p.direct = false), Err(NotNative::NotDirect));
        assert_eq!(with(|p| p.hot = true), Err(NotNative::Hot));
        assert_eq!(with(|p| p.deletes = true), Err(NotNative::Delete));
        assert_eq!(
            native(vec![table(); NATIVE_MAX_ACTIONS - 1], 1),
            Ok(()),
            "99 items and the record fill one request"
        );
        assert_eq!(
            native(vec![table(); NATIVE_MAX_ACTIONS], 1),
            Err(NotNative::TooMany)
        );
        assert_eq!(
            native([table()], NATIVE_MAX_BYTES + 1),
            Err(NotNative::TooLarge)
        );
    }

    #[test]
    fn a_native_write_applies_only_where_an_exclusive_prepare_would_lock_at_once() {
        let real = Seen {
            shape: Shape::Real,
            ..Seen::ABSENT
        };
        assert_eq!(native_write(real, false), NativeStep::Apply);
        assert_eq!(native_write(Seen::ABSENT, true), NativeStep::Apply);
        let tomb = Seen {
            shape: Shape::Tombstone,
            // A tombstone's fence and horizon are about other transactions.
            covered: true,
            ..Seen::ABSENT
        };
        assert_eq!(native_write(tomb, true), NativeStep::Apply);
        // Where the protocol holds the item, it gives way.
        for held in [
            Seen {
                holder: Holder::Other { expired: false },
                ..real
            },
            Seen {
                holder: Holder::Other { expired: true },
                ..real
            },
            Seen {
                reserved_by_others: Others::Live,
                ..real
            },
            Seen {
                reserved_by_others: Others::Expired,
                ..real
            },
            Seen {
                shape: Shape::Placeholder,
                holder: Holder::Other { expired: false },
                ..Seen::ABSENT
            },
        ] {
            assert_eq!(native_write(held, false), NativeStep::Protocol, "{held:?}");
        }
        // A pause keeps reservations out, not a native write.
        assert_eq!(
            native_write(
                Seen {
                    paused: true,
                    ..real
                },
                false
            ),
            NativeStep::Apply
        );
        // The shape against the operation: refused as a prepare is.
        assert_eq!(
            native_write(Seen::ABSENT, false),
            NativeStep::Refuse(PrepareRefusal::NotFound(Shape::Absent))
        );
        assert_eq!(
            native_write(tomb, false),
            NativeStep::Refuse(PrepareRefusal::NotFound(Shape::Tombstone))
        );
        assert_eq!(
            native_write(real, true),
            NativeStep::Refuse(PrepareRefusal::Exists)
        );
    }

    fn fence(began: &[u64]) -> (Vec<TxId>, BTreeMap<TxId, FenceEntry>) {
        let ids: Vec<TxId> = began.iter().map(|_| TxId::random()).collect();
        let map = ids
            .iter()
            .zip(began)
            .map(|(id, &began)| {
                (
                    id.clone(),
                    FenceEntry {
                        outcome: FenceOutcome::Committed,
                        began,
                    },
                )
            })
            .collect();
        (ids, map)
    }

    #[test]
    fn prune_removes_stale_entries_and_raises_the_horizon_to_the_latest_removed() {
        // now = 100, window = 75: an entry that began before 25 is stale.
        let (ids, f) = fence(&[10, 30, 40, 20]);
        let me = TxId::random();
        let p = plan_prune(&f, 5, &me, 100, 75, 32).expect("something to prune");
        let mut want = vec![ids[0].clone(), ids[3].clone()];
        want.sort();
        let mut got = p.ids.clone();
        got.sort();
        assert_eq!(got, want);
        assert_eq!(p.horizon, 20, "the latest began among removed entries");
        // Nothing stale, room enough: nothing to do.
        assert_eq!(plan_prune(&f, 5, &me, 0, 75, 32), None);
        // A horizon already above the removed entries stays.
        assert_eq!(
            plan_prune(&f, 77, &me, 100, 75, 32).expect("prune").horizon,
            77
        );
    }

    #[test]
    fn prune_keeps_the_newest_entries_within_capacity_and_never_its_own() {
        let (ids, mut f) = fence(&[10, 40, 20, 30]);
        let me = TxId::random();
        f.insert(
            me.clone(),
            FenceEntry {
                outcome: FenceOutcome::Aborted,
                began: 1,
            },
        );
        // Capacity 3: room for two others besides the holder's own entry (a fence this small
        // is pruned to its room: a quarter of two is none). The holder's own entry is stale
        // (began 1, window 50), and stays all the same; the others are fresh.
        let p = plan_prune(&f, 0, &me, 55, 50, 3).expect("over capacity");
        let mut got = p.ids.clone();
        got.sort();
        let mut want = vec![ids[0].clone(), ids[2].clone()]; // began 10 and 20
        want.sort();
        assert_eq!(got, want);
        assert_eq!(p.horizon, 20);
        assert!(!p.ids.contains(&me));
    }

    #[test]
    fn a_full_fence_is_pruned_to_three_quarters_so_the_next_releases_need_not_prune() {
        // Capacity 9: room for 8 others. 9 fresh others: over, so down to 6 (the newest).
        let began: Vec<u64> = (1..=9).map(|b| b * 10).collect();
        let (ids, f) = fence(&began);
        let me = TxId::random();
        let p = plan_prune(&f, 0, &me, 100, 500, 9).expect("over capacity");
        let mut got = p.ids.clone();
        got.sort();
        let mut want = ids[..3].to_vec(); // began 10, 20, 30
        want.sort();
        assert_eq!(got, want);
        assert_eq!(p.horizon, 30);
        // At the room exactly, nothing is pruned: the next releases add entries freely.
        let (_, eight) = fence(&began[..8]);
        assert_eq!(plan_prune(&eight, 0, &me, 100, 500, 9), None);
    }

    const REAL: Seen = Seen {
        shape: Shape::Real,
        ..Seen::ABSENT
    };
    const LIVE_OTHER: Holder = Holder::Other { expired: false };
    const EXPIRED_OTHER: Holder = Holder::Other { expired: true };

    fn seen(shape: Shape, holder: Holder) -> Seen {
        Seen {
            shape,
            holder,
            ..Seen::ABSENT
        }
    }

    #[test]
    fn prepare_locks_a_free_real_item_and_a_retry_finding_its_own_lock() {
        assert_eq!(prepare(REAL, false), PrepareStep::Lock);
        let mine_covered = Seen {
            covered: true,
            ..seen(Shape::Real, Holder::Me)
        };
        assert_eq!(
            prepare(mine_covered, false),
            PrepareStep::Lock,
            "a horizon raised after our lock does not refuse our retry"
        );
        assert_eq!(
            prepare(seen(Shape::Placeholder, Holder::Me), true),
            PrepareStep::Lock
        );
    }

    #[test]
    fn the_fence_then_the_horizon_then_another_lock_refuse_a_prepare() {
        use PrepareRefusal::*;
        let fenced = Seen {
            entry: Some(FenceOutcome::Aborted),
            covered: true,
            ..seen(Shape::Real, LIVE_OTHER)
        };
        assert_eq!(
            prepare(fenced, false),
            PrepareStep::Refuse(Fenced(FenceOutcome::Aborted))
        );
        let covered = Seen {
            covered: true,
            ..seen(Shape::Real, LIVE_OTHER)
        };
        assert_eq!(prepare(covered, false), PrepareStep::Refuse(BelowHorizon));
        assert_eq!(
            prepare(seen(Shape::Real, LIVE_OTHER), false),
            PrepareStep::Refuse(Locked)
        );
        assert_eq!(
            prepare(seen(Shape::Real, EXPIRED_OTHER), false),
            PrepareStep::Refuse(ResolveOwner),
            "an expired lock is resolved, never taken"
        );
    }

    #[test]
    fn a_put_needs_no_item_or_a_tombstone_and_other_operations_a_real_item() {
        use PrepareRefusal::*;
        assert_eq!(prepare(Seen::ABSENT, true), PrepareStep::Lock);
        assert_eq!(
            prepare(seen(Shape::Tombstone, Holder::Nobody), true),
            PrepareStep::Lock
        );
        assert_eq!(prepare(REAL, true), PrepareStep::Refuse(Exists));
        for shape in [Shape::Absent, Shape::Tombstone] {
            assert_eq!(
                prepare(seen(shape, Holder::Nobody), false),
                PrepareStep::Refuse(NotFound(shape))
            );
        }
        assert_eq!(
            prepare(seen(Shape::Placeholder, LIVE_OTHER), false),
            PrepareStep::Refuse(Locked),
            "someone else's placeholder is locked"
        );
    }

    #[test]
    fn commit_without_its_lock_reads_the_fence_and_the_horizon() {
        let without = |entry, covered| Seen {
            entry,
            covered,
            ..REAL
        };
        assert_eq!(
            commit(seen(Shape::Real, Holder::Me), false),
            CommitStep::Apply
        );
        assert_eq!(
            commit(without(Some(FenceOutcome::Committed), false), false),
            CommitStep::Answer(Reply::AlreadyDone)
        );
        assert_eq!(
            commit(without(None, true), false),
            CommitStep::Answer(Reply::AlreadyDone),
            "an entry pruned under the horizon was applied"
        );
        assert_eq!(
            commit(without(None, false), false),
            CommitStep::Answer(Reply::Violation(Violation::NeitherLockNorEntry))
        );
        assert_eq!(
            commit(without(Some(FenceOutcome::Aborted), true), false),
            CommitStep::Answer(Reply::Violation(Violation::CommitOfAborted))
        );
        assert_eq!(
            commit(Seen::ABSENT, true),
            CommitStep::Answer(Reply::AlreadyDone)
        );
        assert_eq!(
            commit(Seen::ABSENT, false),
            CommitStep::Answer(Reply::Violation(Violation::NoItem))
        );
    }

    #[test]
    fn abort_without_its_lock_fences_the_transaction_out_unless_it_is_already() {
        assert_eq!(abort(seen(Shape::Real, Holder::Me)), AbortStep::Release);
        assert_eq!(abort(seen(Shape::Real, LIVE_OTHER)), AbortStep::FenceOut);
        assert_eq!(abort(REAL), AbortStep::FenceOut);
        assert_eq!(abort(Seen::ABSENT), AbortStep::Answer(Reply::AlreadyDone));
        let covered = Seen {
            covered: true,
            ..REAL
        };
        assert_eq!(abort(covered), AbortStep::Answer(Reply::AlreadyDone));
        let committed = Seen {
            entry: Some(FenceOutcome::Committed),
            ..REAL
        };
        assert_eq!(
            abort(committed),
            AbortStep::Answer(Reply::Violation(Violation::AbortOfCommitted))
        );
        assert_eq!(fence_out(3, 4), FenceOut::Entry);
        assert_eq!(fence_out(4, 4), FenceOut::RaiseHorizon);
    }

    #[test]
    fn the_lock_rule_follows_the_owners_record() {
        use TxStatus::*;
        assert_eq!(resolve(None, true), Resolution::RecordAborted);
        assert_eq!(resolve(None, false), Resolution::OwnerLive);
        assert_eq!(resolve(Some(Preparing), false), Resolution::OwnerLive);
        assert_eq!(resolve(Some(Preparing), true), Resolution::DecideAbort);
        assert_eq!(resolve(Some(Committing), true), Resolution::RollForward);
        assert_eq!(resolve(Some(Aborting), true), Resolution::AbortHere);
        assert_eq!(resolve(Some(Aborted), false), Resolution::AbortHere);
        assert_eq!(resolve(Some(Committed), true), Resolution::DropStale);
    }

    #[test]
    fn the_record_moves_by_the_votes_and_lost_swaps_follow_the_record() {
        use TxStatus::*;
        assert_eq!(decision([true, true].into_iter()), Decision::Commit);
        assert_eq!(decision([true, false].into_iter()), Decision::Abort);
        assert_eq!(
            after_lost_decide(Some(Aborting)),
            AfterLostSwap::Follow(Decision::Abort)
        );
        assert_eq!(
            after_lost_decide(Some(Committed)),
            AfterLostSwap::Follow(Decision::Commit)
        );
        assert_eq!(after_lost_decide(Some(Preparing)), AfterLostSwap::Fatal);
        assert_eq!(after_lost_decide(None), AfterLostSwap::Fatal);
        assert_eq!(
            after_lost_finalize(Some(Committed), Decision::Commit),
            AfterLostSwap::Follow(Decision::Commit)
        );
        assert_eq!(
            after_lost_finalize(Some(Aborted), Decision::Commit),
            AfterLostSwap::Fatal
        );
        assert_eq!(recovery(Preparing, false), Recovery::Leave);
        // The completer acts on a participant's ask, once, and only while STAGING.
        assert!(completer_recovers(false, Staging, true));
        assert!(
            !completer_recovers(true, Staging, true),
            "asked before: a repeat"
        );
        assert!(
            !completer_recovers(false, Staging, false),
            "the stager's own write"
        );
        assert!(
            !completer_recovers(false, Committing, true),
            "decided meanwhile"
        );
        assert_eq!(recovery(Preparing, true), Recovery::DecideAbort);
        assert_eq!(
            recovery(Committing, false),
            Recovery::Complete(Decision::Commit)
        );
        assert_eq!(recovery(Aborted, true), Recovery::Ended);
    }

    /// A debit of `amount` with `gte amount` on a value with a standing lowest (floors 0).
    fn debit(value: i32, lowest: i32, amount: i32, standing_floor: Option<i32>) -> EscrowSeen {
        EscrowSeen {
            stale: false,
            strict_lower: false,
            strict_upper: false,
            change: Ordering::Less,
            value_vs_lower: Some(value.cmp(&amount)),
            value_vs_upper: None,
            lowest_vs_lower: Some(lowest.cmp(&amount)),
            highest_vs_upper: None,
            floor: Keeps::of(Some(0), standing_floor, |a, b| a == b),
            ceiling: Keeps::Neither,
        }
    }

    #[test]
    fn a_debit_is_checked_against_the_lowest_value_in_flight() {
        // 100 committed, debits of 60 standing: a debit of 40 fits, one of 41 does not.
        assert_eq!(escrow(debit(100, 40, 40, Some(0))), Ok(()));
        assert_eq!(
            escrow(debit(100, 40, 41, Some(0))),
            Err(EscrowRefusal::InFlight)
        );
        // The committed value itself is short: no outcome helps.
        assert_eq!(escrow(debit(30, 30, 41, None)), Err(EscrowRefusal::Breaks));
    }

    #[test]
    fn standing_reservations_keep_one_floor() {
        // `gte 150` with a debit of 50 keeps the value above 100; others keep it above 0.
        let other_floor = EscrowSeen {
            floor: Keeps::of(Some(100), Some(0), |a, b| a == b),
            ..debit(500, 500, 150, Some(0))
        };
        assert_eq!(escrow(other_floor), Err(EscrowRefusal::Disagrees));
        // A debit without a bound may not move toward a floor others keep; a credit may.
        let unbounded = EscrowSeen {
            value_vs_lower: None,
            lowest_vs_lower: None,
            floor: Keeps::Theirs,
            ..debit(500, 500, 10, Some(0))
        };
        assert_eq!(escrow(unbounded), Err(EscrowRefusal::Disagrees));
        let credit = EscrowSeen {
            change: Ordering::Greater,
            ..unbounded
        };
        assert_eq!(escrow(credit), Ok(()));
        // An upper bound is checked against the highest, and the ceiling works the same way.
        let over = EscrowSeen {
            stale: false,
            strict_lower: false,
            strict_upper: false,
            change: Ordering::Greater,
            value_vs_lower: None,
            lowest_vs_lower: None,
            value_vs_upper: Some(Ordering::Less),
            highest_vs_upper: Some(Ordering::Greater),
            floor: Keeps::Neither,
            ceiling: Keeps::Same,
        };
        assert_eq!(escrow(over), Err(EscrowRefusal::InFlight));
        let debit_under_a_ceiling = EscrowSeen {
            change: Ordering::Less,
            ceiling: Keeps::Theirs,
            value_vs_upper: None,
            highest_vs_upper: None,
            ..over
        };
        assert_eq!(escrow(debit_under_a_ceiling), Ok(()));
    }

    #[test]
    fn a_staging_owner_is_never_aborted_for_its_deadline_alone() {
        assert_eq!(
            resolve(Some(TxStatus::Staging), false),
            Resolution::OwnerLive
        );
        assert_eq!(resolve(Some(TxStatus::Staging), true), Resolution::Recover);
        assert_eq!(recovery(TxStatus::Staging, false), Recovery::Leave);
        assert_eq!(recovery(TxStatus::Staging, true), Recovery::Inquire);
        // PREPARING keeps today's rule: aborted once its deadline passed.
        assert_eq!(recovery(TxStatus::Preparing, true), Recovery::DecideAbort);
    }

    #[test]
    fn an_inquiry_reads_held_prevented_or_committed_and_prevents_only_when_asked() {
        let real = Seen {
            shape: Shape::Real,
            ..Seen::ABSENT
        };
        let held = Seen {
            holder: Holder::Me,
            ..real
        };
        let reserved = Seen {
            reserved_by_me: true,
            ..real
        };
        for prevent in [false, true] {
            assert_eq!(inquire(held, prevent), InquiryStep::Answer(Inquiry::Held));
            assert_eq!(
                inquire(reserved, prevent),
                InquiryStep::Answer(Inquiry::Held)
            );
            let aborted = Seen {
                entry: Some(FenceOutcome::Aborted),
                ..real
            };
            assert_eq!(
                inquire(aborted, prevent),
                InquiryStep::Answer(Inquiry::Prevented)
            );
            let covered = Seen {
                covered: true,
                ..real
            };
            assert_eq!(
                inquire(covered, prevent),
                InquiryStep::Answer(Inquiry::Prevented)
            );
            let committed = Seen {
                entry: Some(FenceOutcome::Committed),
                ..real
            };
            assert_eq!(
                inquire(committed, prevent),
                InquiryStep::Answer(Inquiry::Committed)
            );
        }
        // Another's lock does not protect the transaction from being prevented.
        let other = Seen {
            holder: Holder::Other { expired: false },
            ..real
        };
        assert_eq!(inquire(other, false), InquiryStep::Answer(Inquiry::Open));
        assert_eq!(inquire(other, true), InquiryStep::Fence);
        assert_eq!(
            inquire(Seen::ABSENT, false),
            InquiryStep::Answer(Inquiry::Open)
        );
        assert_eq!(inquire(Seen::ABSENT, true), InquiryStep::Bury);
        let tombstone = Seen {
            shape: Shape::Tombstone,
            ..Seen::ABSENT
        };
        assert_eq!(inquire(tombstone, true), InquiryStep::Fence);
    }

    #[test]
    fn one_prevented_participant_aborts_and_only_all_held_commits() {
        use Inquiry::*;
        assert_eq!(
            staged_decision([Some(Held), Some(Committed), Some(Held)]),
            StagedDecision::Commit
        );
        assert_eq!(staged_decision([Some(Held), None]), StagedDecision::Wait);
        assert_eq!(
            staged_decision([Some(Open), Some(Held)]),
            StagedDecision::Wait
        );
        assert_eq!(
            staged_decision([None, Some(Prevented)]),
            StagedDecision::Abort
        );
        assert_eq!(
            staged_decision([Some(Held), Some(Prevented), Some(Open)]),
            StagedDecision::Abort
        );
    }
}
