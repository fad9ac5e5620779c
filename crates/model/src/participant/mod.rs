//! The participant's conditional writes on one item: each builds the [`rules::Seen`] of the item as
//! its step finds it ([`ItemState::seen_by`]), asks the rule of `twopc_core::rules` that
//! `Participant` asks ([`rules::prepare`], [`rules::commit`], [`rules::abort`]), and carries out
//! the answer on the abstract item: exactly one DynamoDB conditional write (or a refused one)
//! per call, returning the item as it becomes and the answer. What the model writes is the
//! effect of the conditions of `twopc_dynamo::items::DynamoItems`; what it decides is the
//! rule's, nothing else.
//!
//! A [`Variant`] other than [`Variant::Correct`] overrides the rules: it changes the facts given
//! to a rule, the step a rule answers, or only the effect of a step. Each override is small and
//! written, and documented, where it applies.

mod variant;

pub use variant::Variant;

use twopc_core::item::FenceOutcome;
use twopc_core::message::Inquiry;
use twopc_core::rules::{
    self, AbortStep, CommitStep, InquiryStep, NativeStep, Others, PrepareRefusal, PrepareStep,
    Reply, Seen, Shape,
};
use twopc_core::status::Decision;

use crate::state::{Env, Item, ItemState, Op, Tx};

/// The fence upkeep a write may carry out besides its own effect: a choice the model leaves
/// open (every choice is a separate step), so that every pruning policy and every fence
/// capacity of the real code is one of the behaviours checked. Only a write to which the upkeep
/// [`applies`](upkeep_applies) is a step; the others are the `Plain` step's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Upkeep {
    /// None.
    Plain,
    /// The lock holder's commit or abort also removes the fence entries of these transactions
    /// (one bit per transaction index, each with an entry, never the holder's own), committed or
    /// aborted, whenever, and raises the horizon to the latest of them (the `prune` of
    /// `ParticipantStore::{commit, abort}`, planned by `rules::plan_prune` from the fence its
    /// prepare read; entries only leave the fence by the holder's own release, so they are
    /// still there).
    Prune(u8),
    /// A lock-free abort that fences its transaction out raises the horizon to its transaction
    /// instead of writing its `aborted` entry: `rules::fence_out`'s `RaiseHorizon`, which
    /// `fence_aborted` writes when the fence is full. Applies whenever the fence has an entry:
    /// full for some capacity (≥ 1), so every capacity is covered.
    Raise,
}

/// Whether `upkeep` does something in the write of `decision` for `tx` to `item`: `Plain`
/// always; `Prune` only in the lock holder's release (the commit rule's `Apply`, the abort
/// rule's `Release`), naming only other transactions that have an entry; `Raise` only where the
/// abort rule answers `FenceOut` and the fence has an entry (so never on an absent item, which
/// has no fence and which the rule answers "already done").
pub fn upkeep_applies<const TXS: usize>(
    variant: Variant,
    item: &ItemState<TXS>,
    tx: Tx,
    decision: Decision,
    upkeep: Upkeep,
    env: &Env<TXS>,
) -> bool {
    let seen = item.seen_by(tx, env);
    match upkeep {
        Upkeep::Plain => true,
        Upkeep::Prune(mask) => {
            variant.fences()
                && seen.held_by_me()
                && mask & (1 << tx.0) == 0
                // Its own id's entries are never pruned by its release (a former one's is
                // retired first; by id alone, a twin's is its own).
                && env.twin[tx.ix()].is_none_or(|w| mask & (1 << w.0) == 0)
                && (0..TXS).all(|u| mask & (1 << u) == 0 || item.fence[u].is_some())
        }
        Upkeep::Raise => {
            variant.fences()
                && decision == Decision::Abort
                && rules::abort(seen) == AbortStep::FenceOut
                && item.fence.iter().any(Option::is_some)
        }
    }
}

/// The one reserved attribute of `tx`'s commuting `ops[tx]` as its reservation finds `item`:
/// what `rules::EscrowSeen::of` gives `rules::escrow` in `crates/core`. The extremes are the
/// value moved by every standing reservation's debits (the lowest; no operation of the model
/// has an upper bound, so the highest is not needed); the standing floor is the one their operations keep (all keep 0 or none in the model's
/// operations). [`Variant::CommittedBound`] checks the bound against the value instead.
pub fn escrow_seen<const TXS: usize>(
    variant: Variant,
    item: &ItemState<TXS>,
    tx: Tx,
    ops: &[Op; TXS],
) -> rules::EscrowSeen {
    let op = ops[tx.ix()];
    let standing = (0..TXS).filter(|&u| u != tx.ix() && item.reserved[u]);
    // The lowest extreme as stored, not derived from the standing reservations.
    let mut lowest = item.value + item.escrow;
    let mut standing_floor = None;
    for u in standing {
        standing_floor = standing_floor.or(ops[u].floor());
    }
    if variant == Variant::CommittedBound {
        lowest = item.value;
    }
    let vs = |x: i8| op.lower_bound().map(|b| x.cmp(&b));
    rules::EscrowSeen {
        // The model keeps no escrow of its own to go stale: only the protocol writes its items.
        stale: false,
        strict_lower: false,
        strict_upper: false,
        change: op.delta().cmp(&0),
        value_vs_lower: vs(item.value),
        value_vs_upper: None,
        lowest_vs_lower: vs(lowest),
        highest_vs_upper: None,
        floor: rules::Keeps::of(op.floor(), standing_floor, |a, b| a == b),
        ceiling: rules::Keeps::Neither,
    }
}

/// A prepare as it reaches an item: what `PrepareRequest` carries that the rules read, and
/// what the participant reads of the holds beside the item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prepare<const TXS: usize> {
    /// Whose.
    pub tx: Tx,
    /// The name it comes under (its request's spelling of the key): what the hold it takes
    /// records ([`ItemState::held_for`]).
    pub name: Item,
    /// `ops[u]`: the operation `u`'s hold on the item carries (a reservation's extremes
    /// depend on the standing ones' changes); `ops[tx]`: the operation this prepare holds.
    pub ops: [Op; TXS],
    /// Whether `tx`'s own hold on the item carries another operation than this one: the fact
    /// [`own_hold_with_another_operation`] reads.
    pub other_op: bool,
    /// A prepare whose `began` is later than every horizon
    /// ([`Variant::FreshBeganReplay`]'s replay).
    pub fresh: bool,
}

impl<const TXS: usize> Prepare<TXS> {
    /// `tx`'s prepare under `name`, `ops` as above, nothing else special.
    pub fn of(tx: Tx, name: Item, ops: [Op; TXS]) -> Self {
        Prepare {
            tx,
            name,
            ops,
            other_op: false,
            fresh: false,
        }
    }

    /// The operation it holds.
    pub fn op(&self) -> Op {
        self.ops[self.tx.ix()]
    }
}

/// The refusal of a prepare that meets its own transaction's hold carrying another operation.
/// A stand-in for the reason core will name (`PrepareRefusal::OtherOperation`, issue 35): to
/// the model any refusal is a no vote, written nowhere.
pub const ANOTHER_OPERATION: PrepareRefusal = PrepareRefusal::Business;

/// Issue 35's second line, as the model runs it until core's rules read the fact themselves:
/// whether a step of a transaction finds the transaction's own hold (its lock or reservation)
/// carrying another operation than the one the step is about (`other_op`), the same item named
/// twice under two spellings of its key. Checked after the transaction's own fence entry, as
/// `rules::prepare` and `rules::reserve` check it (`Seen::other_op`). A prepare that finds it
/// is refused ([`ANOTHER_OPERATION`]): the hold keeps its operation, nothing is written, the
/// vote is no. (An inquiry that finds it is core's own [`rules::inquire`]'s: `Prevented`.)
pub fn own_hold_with_another_operation(seen: Seen, other_op: bool) -> bool {
    other_op && seen.entry.is_none() && seen.held_by_me()
}

/// Prepare `p.tx`'s operation on `item`: one conditional write (`DynamoItems::prepare`), as
/// [`rules::prepare`] decides from the item as found. Its `Lock` takes the lock unless it is
/// `tx`'s already (a retry: yes again, the lock written again with this prepare's operation);
/// a creating operation (`put`) writes a placeholder locked by `tx`, keeping a tombstone's fence
/// and horizon. Its `Refuse` is a no vote. The coordinator counts the answer as a yes iff it is
/// `Lock`. First, [`own_hold_with_another_operation`] refuses (issue 35's second line).
///
/// An expired lock of another transaction is refused (`ResolveOwner`): resolving its owner is
/// the separate step `Action::Resolve` ([`rules::resolve`]), after which a redelivered prepare
/// can lock.
///
/// The deadline is not checked here. `Participant::prepare` checks it *before* sending this
/// write, so the write itself can land after the deadline (a slow or retried request); the model
/// therefore applies the check when the prepares are sent (see `Action::SendPrepares`) and lets a
/// prepare sent in time land at any later moment, with no bound.
///
/// `env.deadline_passed[u]` says whether transaction `u`'s deadline (and lock) has expired.
///
/// A commuting operation ([`Op::reserves`]) asks [`rules::reserve`] instead, then, unless the
/// reservation is already `tx`'s, [`rules::escrow`] (the write's bound conditions): its `Lock`
/// is the reservation (`DynamoItems::reserve_item`; a retry writes nothing). An exclusive
/// prepare that the rule refuses for live reservations pauses new ones (`pause_reservations`),
/// until its deadline. A [`Op::Withdraw`]'s own bound is checked on the committed value, in the
/// same write.
pub fn prepare<const TXS: usize>(
    variant: Variant,
    item: ItemState<TXS>,
    p: &Prepare<TXS>,
    env: &Env<TXS>,
) -> (ItemState<TXS>, PrepareStep) {
    let mut seen = item.seen_by(p.tx, env);
    // A prepare whose `began` is later than every horizon (FreshBeganReplay's replay).
    if p.fresh {
        seen.covered = false;
    }
    // NoFence checks no entry, NoFence and NoHorizon no horizon: the rule is not told. (Without
    // a fence, nothing writes an entry or raises the horizon anyway.)
    if !variant.fences() {
        seen.entry = None;
    }
    if !variant.checks_horizon() {
        seen.covered = false;
    }
    if own_hold_with_another_operation(seen, p.other_op) {
        return (item, PrepareStep::Refuse(ANOTHER_OPERATION));
    }
    if p.op().reserves() {
        reserve(variant, item, p, seen)
    } else {
        lock(variant, item, p, seen, env)
    }
}

/// [`prepare`] of a commuting operation: [`rules::reserve`], then [`rules::escrow`].
fn reserve<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    p: &Prepare<TXS>,
    seen: Seen,
) -> (ItemState<TXS>, PrepareStep) {
    let tx = p.tx;
    // At most three transactions: never more reservations than an item takes.
    let mut step = rules::reserve(seen, false);
    if step == PrepareStep::Lock
        && !item.reserved[tx.ix()]
        && rules::escrow(escrow_seen(variant, &item, tx, &p.ops)).is_err()
    {
        step = PrepareStep::Refuse(PrepareRefusal::Business);
    }
    if step == PrepareStep::Lock && !item.reserved[tx.ix()] {
        item.reserved[tx.ix()] = true;
        item.held_for[tx.ix()] = Some(p.name);
        let debit = p.ops[tx.ix()].delta().min(0);
        item.held_debit[tx.ix()] = debit;
        item.escrow += debit;
    }
    (item, step)
}

/// [`prepare`] of an exclusive operation: [`rules::prepare`], with the variants' overrides.
fn lock<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    p: &Prepare<TXS>,
    seen: Seen,
    env: &Env<TXS>,
) -> (ItemState<TXS>, PrepareStep) {
    let (tx, op) = (p.tx, p.op());
    let mut step = rules::prepare(seen, op.creates());
    // LockIgnoresReservations: the lock's write does not wait for the reservations to drain.
    if variant == Variant::LockIgnoresReservations
        && step == PrepareStep::Refuse(PrepareRefusal::Reserved)
    {
        step = PrepareStep::Lock;
    }
    // Live reservations: pause new ones (the real participant first settles those whose owner
    // decided, and pauses only if one stays live; pausing more often only refuses more).
    if step == PrepareStep::Refuse(PrepareRefusal::Reserved) && !env.deadline_passed[tx.ix()] {
        item.paused_by[tx.ix()] = true;
    }
    // BlindTakeover: the rule says resolve the expired owner; the blind write on a real item
    // (`expiresAt < now`, for a non-creating operation) overwrites its lock instead. The rule
    // answers `ResolveOwner` only past the entry and the horizon, which the blind write checks
    // as well.
    if variant == Variant::BlindTakeover
        && step == PrepareStep::Refuse(PrepareRefusal::ResolveOwner)
        && seen.shape == Shape::Real
        && !op.creates()
    {
        step = PrepareStep::Lock;
    }
    // A withdrawal's bound, on the committed value (the lock keeps it until commit).
    if step == PrepareStep::Lock
        && item.lock != Some(tx)
        && op.lower_bound().is_some_and(|b| item.value < b)
    {
        step = PrepareStep::Refuse(PrepareRefusal::Business);
    }
    if step != PrepareStep::Lock {
        return (item, step);
    }
    if item.lock != Some(tx) {
        if let Some(owner) = item.lock {
            item.held_for[owner.ix()] = None; // BlindTakeover's overwritten owner
        }
        item.lock = Some(tx);
        if op.creates() {
            item.shape = Shape::Placeholder;
        }
        // StaleHorizon: the holder remembers the horizon its prepare read (see `release`).
        if variant == Variant::StaleHorizon {
            item.horizon_at_lock = item.horizon;
        }
    }
    // The lock is written with this prepare's operation, a retry's too.
    item.held_for[tx.ix()] = Some(p.name);
    (item, step)
}

/// The lock holder's release (`release_clauses`): remove the lock, write `outcome` as `tx`'s
/// fence entry, and carry out `upkeep`'s pruning: remove the named other entries and raise the
/// horizon to the latest of them. The horizon is never lowered. Overrides of this effect:
/// [`Variant::NoFence`] writes no entry and prunes nothing; [`Variant::StaleHorizon`] writes the
/// horizon computed from the one its prepare read, lowering a horizon raised since.
fn release<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
    outcome: FenceOutcome,
    upkeep: Upkeep,
    env: &Env<TXS>,
    op: Op,
) -> ItemState<TXS> {
    // The hold released: `tx`'s, or by id alone its twin's (`Variant::ReuseMatchesId`).
    let holder = env
        .same_as(tx)
        .filter(|&w| !item.held_by(tx) && item.held_by(w))
        .unwrap_or(tx);
    if item.reserved[holder.ix()] {
        item.reserved[holder.ix()] = false;
        // Applied or given back, the reservation's debit leaves the stored extreme: the
        // hold's (`GiveBackByMessage`: the message's operation's, on an abort).
        let debit = match (variant, outcome) {
            (Variant::GiveBackByMessage, FenceOutcome::Aborted) => op.delta().min(0),
            _ => item.held_debit[holder.ix()],
        };
        item.escrow -= debit;
        item.held_debit[holder.ix()] = 0;
    } else {
        item.lock = None;
    }
    item.held_for[holder.ix()] = None;
    if variant.fences() {
        item = write_entry(item, tx, outcome, env);
        if let Upkeep::Prune(mask) = upkeep {
            let mut latest = None;
            for (u, entry) in item.fence.iter_mut().enumerate() {
                if u != tx.ix() && mask & (1 << u) != 0 && entry.take().is_some() {
                    latest = Some(Tx(u as u8));
                }
            }
            if latest.is_some() {
                let from = match variant {
                    Variant::StaleHorizon => item.horizon_at_lock,
                    _ => item.horizon,
                };
                item.horizon = from.max(latest);
            }
        }
    }
    item.horizon_at_lock = None;
    item
}

/// `tx`'s fence entry written: the one entry its id has room for. A former transaction's under
/// the id is retired first (the rules answer `Retire` while one stands: the write is
/// conditional on no entry under the id); by id alone ([`Env::by_id`]) a twin's is
/// overwritten, its removal raising no horizon.
fn write_entry<const TXS: usize>(
    mut item: ItemState<TXS>,
    tx: Tx,
    outcome: FenceOutcome,
    env: &Env<TXS>,
) -> ItemState<TXS> {
    debug_assert!(
        env.former(tx).is_none_or(|w| item.fence[w.ix()].is_none()),
        "an entry written over a former transaction's"
    );
    if let Some(w) = env.same_as(tx) {
        item.fence[w.ix()] = None;
    }
    item.fence[tx.ix()] = Some(outcome);
    item
}

/// Retire `former`'s fence entry on `item` (`ParticipantStore::retire`): a transaction under
/// the same id met it in the way of its own. Removed, the horizon raised to cover `former`, as
/// a prune does, so nothing of the former transaction may land again.
pub fn retire<const TXS: usize>(mut item: ItemState<TXS>, former: Tx) -> ItemState<TXS> {
    item.fence[former.ix()] = None;
    item.horizon = item.horizon.max(Some(former));
    item
}

/// What becomes of an item a committed delete, an aborted create or a dropped stale lock on a
/// placeholder leaves behind (`DynamoItems::bury`, `release` of a placeholder): a tombstone
/// keeping the fence and the horizon, or, with [`Variant::DeleteRemoves`] (an override of this
/// effect), nothing at all (only the observer's `applied` record, kept by the transaction,
/// stays).
fn bury<const TXS: usize>(variant: Variant, item: ItemState<TXS>) -> ItemState<TXS> {
    debug_assert!(item.lock.is_none(), "buried while locked");
    if variant == Variant::DeleteRemoves {
        ItemState::with_shape(Shape::Absent)
    } else {
        ItemState {
            shape: Shape::Tombstone,
            ..item
        }
    }
}

/// What a native transaction's write of `tx`'s `op` does on `item` ([`rules::native_write`],
/// then the operation's bound on the committed value, as the write's condition checks it), without
/// writing. [`Variant::NativeIgnoresReservations`]: the rule is not told of reservations.
pub fn native_write<const TXS: usize>(
    variant: Variant,
    item: &ItemState<TXS>,
    tx: Tx,
    op: Op,
    env: &Env<TXS>,
) -> NativeStep {
    let mut seen = item.seen_by(tx, env);
    if variant == Variant::NativeIgnoresReservations {
        seen.reserved_by_others = Others::None;
    }
    match rules::native_write(seen, op.creates()) {
        NativeStep::Apply if op.lower_bound().is_some_and(|b| item.value < b) => {
            NativeStep::Refuse(PrepareRefusal::Business)
        }
        step => step,
    }
}

/// A native transaction's write of `op` on `item` (admitted by [`native_write`]): the
/// operation applied, no lock taken or released, no fence entry.
pub fn native_apply<const TXS: usize>(mut item: ItemState<TXS>, op: Op) -> ItemState<TXS> {
    item.value += op.delta();
    if op.creates() {
        item.shape = Shape::Real;
    }
    item
}

/// Commit `tx`'s `op` on `item`, as [`rules::commit`] decides from the item as found (`deletes`:
/// `op` is a delete). `Apply`: apply the operation, release the lock and write the `committed`
/// fence entry in one conditional write, pruning as `upkeep` says (answered [`Reply::Done`],
/// which a commit answers only where it applied); a `put` makes its
/// placeholder real, a `delete` leaves a tombstone with the fence (our entry included) and the
/// horizon (`DynamoItems::bury`). `Answer`: that reply, nothing written. `Retire`: `None`, the
/// write refused until the former transaction's entry is retired (`Action::Retire`).
pub fn commit<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
    op: Op,
    upkeep: Upkeep,
    env: &Env<TXS>,
) -> Option<(ItemState<TXS>, Reply)> {
    Some(
        match rules::commit(item.seen_by(tx, env), op == Op::Delete) {
            CommitStep::Retire => return None,
            CommitStep::Apply => {
                debug_assert_eq!(
                    item.shape == Shape::Placeholder,
                    op.creates(),
                    "a put locks only its placeholder, other operations only real items"
                );
                item = release(variant, item, tx, FenceOutcome::Committed, upkeep, env, op);
                item.value += op.delta();
                match op {
                    Op::Update | Op::Withdraw | Op::Debit | Op::Credit => {}
                    Op::Put => item.shape = Shape::Real,
                    Op::Delete => item = bury(variant, item),
                }
                (item, Reply::Done)
            }
            // NoFence: the naive reading of a refused commit, "someone already committed it",
            // whatever the rule would make of the item.
            CommitStep::Answer(_) if !variant.fences() => (item, Reply::AlreadyDone),
            CommitStep::Answer(reply) => (item, reply),
        },
    )
}

/// Abort `tx` on `item`, as [`rules::abort`] decides from the item as found. `Release`: release
/// the lock and write the `aborted` fence entry, pruning as `upkeep` says; `tx`'s placeholder
/// becomes a tombstone. `FenceOut`: fence `tx` out (`fence_aborted`) so that a prepare arriving
/// later is refused: write the `aborted` entry, or, with [`Upkeep::Raise`] (the fence is full),
/// raise the horizon to `tx` (above the old one, or the rule would have answered "already
/// done"); whoever else holds the lock keeps it. `Answer`: that reply, nothing written (an
/// absent item included: `fence_aborted` needs the item to exist). `Retire`: `None`, as for
/// [`commit`].
pub fn abort<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
    op: Op,
    upkeep: Upkeep,
    env: &Env<TXS>,
) -> Option<(ItemState<TXS>, Reply)> {
    let t = tx.ix();
    let seen = item.seen_by(tx, env);
    Some(match rules::abort(seen) {
        AbortStep::Retire => return None,
        AbortStep::Release => {
            let mut item = release(variant, item, tx, FenceOutcome::Aborted, upkeep, env, op);
            if item.shape == Shape::Placeholder {
                item = bury(variant, item);
            }
            (item, Reply::Done)
        }
        // NoFence: nothing to fence out with; the lock is gone, so "already done".
        AbortStep::FenceOut if !variant.fences() => (item, Reply::AlreadyDone),
        AbortStep::FenceOut => {
            if upkeep == Upkeep::Raise {
                item.horizon = Some(tx);
            } else {
                item = write_entry(item, tx, FenceOutcome::Aborted, env);
            }
            (item, Reply::Done)
        }
        // AbortBuriesAbsent: where the rule finds no item and answers "already done", write a
        // tombstone carrying the `aborted` entry instead.
        AbortStep::Answer(Reply::AlreadyDone)
            if variant == Variant::AbortBuriesAbsent && seen.shape == Shape::Absent =>
        {
            item.shape = Shape::Tombstone;
            item.fence[t] = Some(FenceOutcome::Aborted);
            (item, Reply::Done)
        }
        AbortStep::Answer(reply) => (item, reply),
    })
}

/// An inquiry about `tx` on `item` (`Participant::inquire`, [`rules::inquire`]), with `prevent`
/// for a recoverer: the answer, and the item after the write that prevents `tx` where nothing
/// does yet. `Fence`: the lock-free abort's write (`fence_aborted`), the `aborted` entry or, with
/// [`Upkeep::Raise`] (the fence is full), the horizon raised to `tx`; `Bury`: a tombstone
/// carrying the `aborted` entry, written only while the key is absent. Either answers
/// `Prevented`. Override: [`Variant::PreventSkipsAbsent`] answers `Prevented` on an absent key
/// and writes nothing. `other_op` (`tx`'s hold on the item carries another operation than the
/// one asked about) is the rule's [`Seen::other_op`]: it answers `Prevented`, nothing written,
/// a hold being evidence of the operation it carries, not of another.
pub fn inquire<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
    (prevent, other_op): (bool, bool),
    upkeep: Upkeep,
    env: &Env<TXS>,
) -> (ItemState<TXS>, Inquiry) {
    let t = tx.ix();
    let seen = Seen {
        other_op,
        ..item.seen_by(tx, env)
    };
    match rules::inquire(seen, prevent) {
        InquiryStep::Answer(answer) => (item, answer),
        // Refused until the former transaction's entry is retired (`Action::Retire`): found
        // neither held nor prevented yet.
        InquiryStep::Retire => (item, Inquiry::Open),
        InquiryStep::Fence => {
            if upkeep == Upkeep::Raise {
                item.horizon = item.horizon.max(Some(tx));
            } else {
                item = write_entry(item, tx, FenceOutcome::Aborted, env);
            }
            (item, Inquiry::Prevented)
        }
        InquiryStep::Bury if variant == Variant::PreventSkipsAbsent => (item, Inquiry::Prevented),
        InquiryStep::Bury => {
            item.shape = Shape::Tombstone;
            item.fence[t] = Some(FenceOutcome::Aborted);
            (item, Inquiry::Prevented)
        }
    }
}

/// Whether `upkeep` does something in an inquiry's prevent: `Plain` always, `Raise` only where
/// the rule fences an item whose fence has an entry (full for some capacity: the one its entries
/// fill, as `rules::prevent_capacity` leaves it; never for a transaction that began too far
/// ahead, [`Env::ahead`], whose entry is written whatever the fence holds).
pub fn inquiry_upkeep_applies<const TXS: usize>(
    item: &ItemState<TXS>,
    tx: Tx,
    upkeep: Upkeep,
    env: &Env<TXS>,
) -> bool {
    match upkeep {
        Upkeep::Plain => true,
        Upkeep::Raise => {
            let entries = item.fence.iter().filter(|e| e.is_some()).count();
            let capacity = rules::prevent_capacity(entries, env.ahead[tx.ix()]);
            rules::inquire(item.seen_by(tx, env), true) == InquiryStep::Fence
                && entries > 0
                && rules::fence_out(entries, capacity) == rules::FenceOut::RaiseHorizon
        }
        Upkeep::Prune(_) => false,
    }
}

/// Remove `tx`'s lock or reservation without applying anything and without a fence entry: the effect of the
/// lock rule's `DropStale` (`ParticipantStore::drop_lock`). A placeholder becomes a tombstone
/// (`release`).
pub fn drop_stale_lock<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
) -> ItemState<TXS> {
    if item.lock == Some(tx) {
        item.lock = None;
        item.horizon_at_lock = None;
        if item.shape == Shape::Placeholder {
            item = bury(variant, item);
        }
    }
    // A reservation: given back (`release_reservation` with `Give::Drop`).
    if item.reserved[tx.ix()] {
        item.escrow -= item.held_debit[tx.ix()];
    }
    item.reserved[tx.ix()] = false;
    item.held_for[tx.ix()] = None;
    item.held_debit[tx.ix()] = 0;
    item
}

/// Commit or abort, by decision (`None`: a former transaction's entry to retire first).
pub fn complete<const TXS: usize>(
    variant: Variant,
    item: ItemState<TXS>,
    tx: Tx,
    op: Op,
    decision: Decision,
    upkeep: Upkeep,
    env: &Env<TXS>,
) -> Option<(ItemState<TXS>, Reply)> {
    match decision {
        Decision::Commit => commit(variant, item, tx, op, upkeep, env),
        Decision::Abort => abort(variant, item, tx, op, upkeep, env),
    }
}

/// Whether `item` is finished for `tx` under `decision`: sending the commit or abort again would
/// change nothing and be acknowledged ([`Reply::acknowledged`]). A finished item stays finished
/// in the correct protocol (a fence entry or the horizon, which never drops, blocks a new lock;
/// a pruned `committed` entry leaves the horizon covering it, which a retried commit answers
/// "already done"; a tombstone keeps them both), so "every item acknowledged" in
/// `Coordinator::complete` is the same as "every item is finished now". One exception: an abort
/// that found no item wrote nothing, and if the item is created afterwards a late prepare may
/// lock it for the aborted transaction (an orphan the lock rule aborts; see `docs/model-check.md`,
/// "Creates and deletes").
pub fn finished<const TXS: usize>(
    variant: Variant,
    item: ItemState<TXS>,
    tx: Tx,
    op: Op,
    decision: Decision,
    env: &Env<TXS>,
) -> bool {
    complete(variant, item, tx, op, decision, Upkeep::Plain, env)
        .is_some_and(|(after, reply)| after == item && reply.acknowledged())
}

#[cfg(test)]
mod tests {
    use twopc_core::rules::PrepareRefusal::{
        BelowHorizon, Exists, Fenced, Locked, NotFound, ResolveOwner,
    };
    use twopc_core::rules::{Reply, Violation};

    use super::*;

    // Commit and abort with no deadline passed (their rules do not read a lock's expiry).

    fn commit<const TXS: usize>(
        variant: Variant,
        item: ItemState<TXS>,
        tx: Tx,
        op: Op,
        upkeep: Upkeep,
    ) -> (ItemState<TXS>, Reply) {
        super::commit(variant, item, tx, op, upkeep, &Env::new([false; TXS]))
            .expect("no former entry")
    }

    fn abort<const TXS: usize>(
        variant: Variant,
        item: ItemState<TXS>,
        tx: Tx,
        upkeep: Upkeep,
    ) -> (ItemState<TXS>, Reply) {
        // The operation the abort carries moves nothing unless a reservation stands.
        super::abort(
            variant,
            item,
            tx,
            Op::Update,
            upkeep,
            &Env::new([false; TXS]),
        )
        .expect("no former entry")
    }

    /// Prepare where every transaction does `op` to the item.
    fn prepare<const TXS: usize>(
        variant: Variant,
        item: ItemState<TXS>,
        tx: Tx,
        op: Op,
        env: &Env<TXS>,
    ) -> (ItemState<TXS>, PrepareStep) {
        super::prepare(variant, item, &Prepare::of(tx, I0, [op; TXS]), env)
    }

    fn complete(
        variant: Variant,
        item: ItemState<2>,
        tx: Tx,
        op: Op,
        decision: Decision,
        upkeep: Upkeep,
    ) -> (ItemState<2>, Reply) {
        super::complete(variant, item, tx, op, decision, upkeep, &NO_DEADLINE_PASSED)
            .expect("no former entry")
    }

    fn finished(variant: Variant, item: ItemState<2>, tx: Tx, op: Op, decision: Decision) -> bool {
        super::finished(variant, item, tx, op, decision, &NO_DEADLINE_PASSED)
    }

    fn upkeep_applies(
        variant: Variant,
        item: &ItemState<2>,
        tx: Tx,
        decision: Decision,
        upkeep: Upkeep,
    ) -> bool {
        super::upkeep_applies(variant, item, tx, decision, upkeep, &NO_DEADLINE_PASSED)
    }

    const LOCK: PrepareStep = PrepareStep::Lock;
    const REFUSE: fn(PrepareRefusal) -> PrepareStep = PrepareStep::Refuse;

    const T0: Tx = Tx(0);
    const T1: Tx = Tx(1);
    const PLAIN: Upkeep = Upkeep::Plain;
    const UPD: Op = Op::Update;
    const PRUNE_ALL: Upkeep = Upkeep::Prune(0b11);
    const NO_DEADLINE_PASSED: Env<2> = Env {
        deadline_passed: [false, false],
        twin: [None, None],
        by_id: false,
        ahead: [false, false],
    };

    fn free() -> ItemState<2> {
        ItemState::new()
    }

    const I0: Item = Item(0);

    fn locked_by(tx: Tx) -> ItemState<2> {
        let mut item = ItemState {
            lock: Some(tx),
            ..free()
        };
        item.held_for[tx.ix()] = Some(I0);
        item
    }

    /// `tx`'s prepare of `ops[tx]` under name 0, where each transaction's hold carries `ops`.
    fn reserve_or_lock(item: ItemState<2>, tx: Tx, ops: [Op; 2]) -> (ItemState<2>, PrepareStep) {
        super::prepare(
            Variant::Correct,
            item,
            &Prepare::of(tx, I0, ops),
            &NO_DEADLINE_PASSED,
        )
    }

    #[test]
    fn prepare_locks_a_free_item_and_a_retry_is_still_yes() {
        let (item, vote) = prepare(Variant::Correct, free(), T0, UPD, &NO_DEADLINE_PASSED);
        assert_eq!((item.lock, vote), (Some(T0), LOCK));
        assert_eq!(
            prepare(Variant::Correct, item, T0, UPD, &NO_DEADLINE_PASSED),
            (item, LOCK)
        );
    }

    #[test]
    fn late_prepare_after_commit_or_abort_is_fenced_out() {
        for (decision, outcome) in [
            (Decision::Commit, FenceOutcome::Committed),
            (Decision::Abort, FenceOutcome::Aborted),
        ] {
            let (done, _) = complete(Variant::Correct, locked_by(T0), T0, UPD, decision, PLAIN);
            assert_eq!(
                prepare(Variant::Correct, done, T0, UPD, &NO_DEADLINE_PASSED),
                (done, REFUSE(Fenced(outcome)))
            );
        }
        // An abort that found no lock still fences: the prepare that lands afterwards is refused,
        // by the entry or by the raised horizon.
        for (upkeep, refusal) in [
            (PLAIN, Fenced(FenceOutcome::Aborted)),
            (Upkeep::Raise, BelowHorizon),
        ] {
            let (fenced, reply) = abort(Variant::Correct, free(), T0, upkeep);
            assert_eq!(reply, Reply::Done);
            assert_eq!(
                prepare(Variant::Correct, fenced, T0, UPD, &NO_DEADLINE_PASSED).1,
                REFUSE(refusal)
            );
        }
    }

    #[test]
    fn without_a_fence_a_late_prepare_locks_again() {
        let (done, _) = commit(Variant::NoFence, locked_by(T0), T0, UPD, PLAIN);
        assert_eq!(
            prepare(Variant::NoFence, done, T0, UPD, &NO_DEADLINE_PASSED).1,
            LOCK
        );
    }

    #[test]
    fn expired_lock_is_a_no_unless_taken_over_blindly() {
        let expired_owner = Env::new([true, false]);
        let item = locked_by(T0);
        assert_eq!(
            prepare(Variant::Correct, item, T1, UPD, &expired_owner),
            (item, REFUSE(ResolveOwner))
        );
        let (taken, vote) = prepare(Variant::BlindTakeover, item, T1, UPD, &expired_owner);
        assert_eq!((taken.lock, vote), (Some(T1), LOCK));
        // A live lock is never taken, even by the blind variant.
        assert_eq!(
            prepare(Variant::BlindTakeover, item, T1, UPD, &NO_DEADLINE_PASSED),
            (item, REFUSE(Locked))
        );
    }

    #[test]
    fn commit_applies_once_and_a_retry_is_already_done() {
        let (item, reply) = commit(Variant::Correct, locked_by(T0), T0, UPD, PLAIN);
        assert_eq!(reply, Reply::Done);
        assert_eq!(item.fence[0], Some(FenceOutcome::Committed));
        assert_eq!(item.lock, None);
        assert_eq!(
            commit(Variant::Correct, item, T0, UPD, PLAIN),
            (item, Reply::AlreadyDone)
        );
    }

    #[test]
    fn commit_without_lock_or_fence_entry_is_a_violation() {
        let other = locked_by(T1);
        assert_eq!(
            commit(Variant::Correct, other, T0, UPD, PLAIN),
            (other, Reply::Violation(Violation::NeitherLockNorEntry))
        );
        let (aborted, _) = abort(Variant::Correct, free(), T0, PLAIN);
        assert_eq!(
            commit(Variant::Correct, aborted, T0, UPD, PLAIN).1,
            Reply::Violation(Violation::CommitOfAborted)
        );
    }

    #[test]
    fn the_holders_release_prunes_other_entries_and_raises_the_horizon_over_them() {
        // T0 committed; T1 takes the lock, and its abort prunes T0's entry (never its own).
        let (done, _) = commit(Variant::Correct, locked_by(T0), T0, UPD, PLAIN);
        let (held, _) = prepare(Variant::Correct, done, T1, UPD, &NO_DEADLINE_PASSED);
        let (pruned, reply) = abort(Variant::Correct, held, T1, PRUNE_ALL);
        assert_eq!(reply, Reply::Done);
        assert_eq!(pruned.fence, [None, Some(FenceOutcome::Aborted)]);
        assert_eq!(pruned.horizon, Some(T0));
        // T0's retried commit is answered by the horizon, its late prepare refused by it.
        assert_eq!(
            commit(Variant::Correct, pruned, T0, UPD, PLAIN),
            (pruned, Reply::AlreadyDone)
        );
        assert_eq!(
            prepare(Variant::Correct, pruned, T0, UPD, &NO_DEADLINE_PASSED),
            (pruned, REFUSE(BelowHorizon))
        );
        // Without the horizon check, the late prepare locks the item again.
        assert_eq!(
            prepare(Variant::NoHorizon, pruned, T0, UPD, &NO_DEADLINE_PASSED).1,
            LOCK
        );
        // A write that does not hold the lock prunes nothing.
        let other = locked_by(T1);
        let (fenced, _) = abort(Variant::Correct, other, T0, PRUNE_ALL);
        assert_eq!(fenced.fence, [Some(FenceOutcome::Aborted), None]);
        assert_eq!(fenced.horizon, None);
    }

    #[test]
    fn a_lock_free_abort_under_the_horizon_writes_nothing() {
        let item = ItemState {
            horizon: Some(T1),
            ..free()
        };
        assert_eq!(
            abort(Variant::Correct, item, T0, PLAIN),
            (item, Reply::AlreadyDone)
        );
        // Above it, the raise lifts the horizon to the transaction.
        let low = ItemState {
            horizon: Some(T0),
            ..free()
        };
        let (raised, reply) = abort(Variant::Correct, low, T1, Upkeep::Raise);
        assert_eq!(
            (raised.horizon, raised.fence, reply),
            (Some(T1), [None, None], Reply::Done)
        );
    }

    #[test]
    fn a_stale_horizon_release_undoes_a_raise_made_while_it_held_the_lock() {
        // Three transactions: T0 ended here (entry), T1 takes the lock, T2's lock-free abort
        // raises the horizon to T2, and T1's release prunes T0's entry.
        const T2: Tx = Tx(2);
        let mut item = ItemState::<3>::new();
        item.fence[0] = Some(FenceOutcome::Committed);
        let none_passed = Env::new([false; 3]);
        for (variant, after) in [
            (Variant::Correct, Some(T2)),
            (Variant::StaleHorizon, Some(T0)),
        ] {
            let (held, _) = prepare(variant, item, T1, UPD, &none_passed);
            let (raised, _) = abort(variant, held, T2, Upkeep::Raise);
            assert_eq!(raised.horizon, Some(T2));
            let (released, _) = commit(variant, raised, T1, UPD, Upkeep::Prune(0b001));
            assert_eq!(released.fence, [None, Some(FenceOutcome::Committed), None]);
            assert_eq!(released.horizon, after, "{variant:?}");
            // The stale write re-admits the aborted T2's late prepare.
            let vote = prepare(variant, released, T2, UPD, &none_passed).1;
            assert_eq!(vote == LOCK, variant == Variant::StaleHorizon);
        }
    }

    #[test]
    fn an_upkeep_is_a_step_only_where_it_does_something() {
        let c = Variant::Correct;
        let mut held = locked_by(T0);
        held.fence[1] = Some(FenceOutcome::Aborted);
        let commit = Decision::Commit;
        // Prune: the holder's release, naming only others that have an entry.
        assert!(upkeep_applies(c, &held, T0, commit, Upkeep::Prune(0b10)));
        assert!(!upkeep_applies(c, &held, T0, commit, Upkeep::Prune(0b11)));
        assert!(!upkeep_applies(
            c,
            &locked_by(T0),
            T0,
            commit,
            Upkeep::Prune(0b10)
        ));
        assert!(!upkeep_applies(
            c,
            &held,
            T1,
            Decision::Abort,
            Upkeep::Prune(0b01)
        ));
        assert!(!upkeep_applies(
            Variant::NoFence,
            &held,
            T0,
            commit,
            Upkeep::Prune(0b10)
        ));
        // Raise: a lock-free abort fencing its transaction out of a fence with an entry.
        let mut other_entry = free();
        other_entry.fence[0] = Some(FenceOutcome::Committed);
        assert!(upkeep_applies(
            c,
            &other_entry,
            T1,
            Decision::Abort,
            Upkeep::Raise
        ));
        assert!(!upkeep_applies(
            c,
            &free(),
            T1,
            Decision::Abort,
            Upkeep::Raise
        ));
        assert!(!upkeep_applies(c, &other_entry, T1, commit, Upkeep::Raise));
        let covered = ItemState {
            horizon: Some(T1),
            ..other_entry
        };
        assert!(!upkeep_applies(
            c,
            &covered,
            T1,
            Decision::Abort,
            Upkeep::Raise
        ));
        assert!(upkeep_applies(c, &free(), T1, commit, Upkeep::Plain));
    }

    #[test]
    fn abort_leaves_another_transactions_lock_alone() {
        let (item, reply) = abort(Variant::Correct, locked_by(T1), T0, PLAIN);
        assert_eq!(reply, Reply::Done);
        assert_eq!(item.lock, Some(T1));
        assert_eq!(item.fence, [Some(FenceOutcome::Aborted), None]);
    }

    #[test]
    fn a_stale_lock_is_dropped_without_applying() {
        let item = drop_stale_lock(Variant::Correct, locked_by(T0), T0);
        assert_eq!(item, free());
    }

    fn shaped(shape: Shape) -> ItemState<2> {
        ItemState::with_shape(shape)
    }

    #[test]
    fn a_put_needs_no_item_a_tombstone_below_the_horizon_or_its_own_placeholder() {
        let c = Variant::Correct;
        let (ph, vote) = prepare(c, shaped(Shape::Absent), T0, Op::Put, &NO_DEADLINE_PASSED);
        assert_eq!(
            (ph.shape, ph.lock, vote),
            (Shape::Placeholder, Some(T0), LOCK)
        );
        assert_eq!(prepare(c, ph, T0, Op::Put, &NO_DEADLINE_PASSED), (ph, LOCK));
        // Another's placeholder, a real item: refused.
        assert_eq!(
            prepare(c, ph, T1, Op::Put, &NO_DEADLINE_PASSED),
            (ph, REFUSE(Locked))
        );
        assert_eq!(
            prepare(c, free(), T0, Op::Put, &NO_DEADLINE_PASSED).1,
            REFUSE(Exists)
        );
        // A tombstone: taken, fence and horizon kept, unless its fence or horizon covers the
        // put.
        let mut tomb = shaped(Shape::Tombstone);
        tomb.fence[0] = Some(FenceOutcome::Committed);
        let (taken, vote) = prepare(c, tomb, T1, Op::Put, &NO_DEADLINE_PASSED);
        assert_eq!(vote, LOCK);
        assert_eq!(
            (taken.shape, taken.fence, taken.horizon),
            (Shape::Placeholder, tomb.fence, None)
        );
        assert_eq!(
            prepare(c, tomb, T0, Op::Put, &NO_DEADLINE_PASSED),
            (tomb, REFUSE(Fenced(FenceOutcome::Committed)))
        );
        let covered = ItemState {
            fence: [None, None],
            horizon: Some(T1),
            ..tomb
        };
        assert_eq!(
            prepare(c, covered, T1, Op::Put, &NO_DEADLINE_PASSED),
            (covered, REFUSE(BelowHorizon))
        );
    }

    #[test]
    fn other_operations_need_a_real_item() {
        let (ph, _) = prepare(
            Variant::Correct,
            shaped(Shape::Absent),
            T0,
            Op::Put,
            &NO_DEADLINE_PASSED,
        );
        for (item, refusal) in [
            (shaped(Shape::Absent), NotFound(Shape::Absent)),
            (shaped(Shape::Tombstone), NotFound(Shape::Tombstone)),
            (ph, Locked),
        ] {
            for op in [Op::Update, Op::Delete] {
                assert_eq!(
                    prepare(Variant::Correct, item, T1, op, &NO_DEADLINE_PASSED),
                    (item, REFUSE(refusal))
                );
            }
        }
    }

    #[test]
    fn a_committed_put_is_real_an_aborted_one_a_tombstone() {
        let (ph, _) = prepare(
            Variant::Correct,
            shaped(Shape::Absent),
            T0,
            Op::Put,
            &NO_DEADLINE_PASSED,
        );
        let (real, reply) = commit(Variant::Correct, ph, T0, Op::Put, PLAIN);
        assert_eq!(reply, Reply::Done);
        assert_eq!((real.shape, real.lock), (Shape::Real, None));
        let (tomb, _) = abort(Variant::Correct, ph, T0, PLAIN);
        assert_eq!(tomb.shape, Shape::Tombstone);
        assert_eq!(tomb.fence, [Some(FenceOutcome::Aborted), None]);
        // The old design deletes the placeholder, fence and all.
        let (gone, _) = abort(Variant::DeleteRemoves, ph, T0, PLAIN);
        assert_eq!(gone, shaped(Shape::Absent));
        // A stale lock of a COMMITTED owner on a placeholder: dropped, leaving a tombstone.
        let dropped = drop_stale_lock(Variant::Correct, ph, T0);
        assert_eq!((dropped.shape, dropped.lock), (Shape::Tombstone, None));
    }

    #[test]
    fn a_committed_delete_leaves_a_tombstone_with_its_fence() {
        let (tomb, reply) = commit(Variant::Correct, locked_by(T0), T0, Op::Delete, PLAIN);
        assert_eq!(reply, Reply::Done);
        assert_eq!(tomb.shape, Shape::Tombstone);
        assert_eq!(tomb.fence, [Some(FenceOutcome::Committed), None]);
        assert_eq!(
            commit(Variant::Correct, tomb, T0, Op::Delete, PLAIN),
            (tomb, Reply::AlreadyDone)
        );
        // A late put of a transaction the tombstone fences is refused.
        assert_eq!(
            prepare(Variant::Correct, tomb, T0, Op::Put, &NO_DEADLINE_PASSED).1,
            REFUSE(Fenced(FenceOutcome::Committed))
        );
        // The old design removes the item: the retried delete is "already done" all the same,
        // but the late put recreates the item.
        let (gone, _) = commit(Variant::DeleteRemoves, locked_by(T0), T0, Op::Delete, PLAIN);
        assert_eq!(gone.shape, Shape::Absent);
        assert_eq!(gone.fence, [None, None]);
        assert_eq!(
            commit(Variant::DeleteRemoves, gone, T0, Op::Delete, PLAIN),
            (gone, Reply::AlreadyDone)
        );
        assert_eq!(
            prepare(
                Variant::DeleteRemoves,
                gone,
                T0,
                Op::Put,
                &NO_DEADLINE_PASSED
            )
            .1,
            LOCK
        );
    }

    #[test]
    fn an_abort_that_finds_no_item_writes_nothing_unless_it_buries_it() {
        let absent = shaped(Shape::Absent);
        assert_eq!(
            abort(Variant::Correct, absent, T0, PLAIN),
            (absent, Reply::AlreadyDone)
        );
        assert!(!upkeep_applies(
            Variant::Correct,
            &absent,
            T0,
            Decision::Abort,
            Upkeep::Raise
        ));
        let (tomb, reply) = abort(Variant::AbortBuriesAbsent, absent, T0, PLAIN);
        assert_eq!(reply, Reply::Done);
        assert_eq!(tomb.shape, Shape::Tombstone);
        assert_eq!(tomb.fence, [Some(FenceOutcome::Aborted), None]);
        // A commit that finds no item: a violation, but for a delete (its item went with it).
        assert_eq!(
            commit(Variant::Correct, absent, T0, Op::Put, PLAIN).1,
            Reply::Violation(Violation::NoItem)
        );
    }

    #[test]
    fn finished_means_a_resend_changes_nothing() {
        let (done, _) = commit(Variant::Correct, locked_by(T0), T0, UPD, PLAIN);
        assert!(finished(Variant::Correct, done, T0, UPD, Decision::Commit));
        assert!(!finished(
            Variant::Correct,
            locked_by(T0),
            T0,
            UPD,
            Decision::Commit
        ));
        assert!(!finished(
            Variant::Correct,
            free(),
            T0,
            UPD,
            Decision::Abort
        ));
    }

    #[test]
    fn reservations_stand_side_by_side_and_each_release_applies_only_its_own_change() {
        let ops = [Op::Debit, Op::Credit];
        let item = ItemState::<2> { value: 1, ..free() };
        let (one, vote) = reserve_or_lock(item, T0, ops);
        assert_eq!((one.reserved, vote), ([true, false], LOCK));
        let (both, vote) = reserve_or_lock(one, T1, ops);
        assert_eq!((both.reserved, vote), ([true, true], LOCK));
        // A retry is yes again and writes nothing.
        assert_eq!(reserve_or_lock(both, T0, ops), (both, LOCK));
        let (credited, reply) = commit(Variant::Correct, both, T1, Op::Credit, PLAIN);
        assert_eq!(reply, Reply::Done);
        assert_eq!((credited.value, credited.reserved), (2, [true, false]));
        let (aborted, _) = abort(Variant::Correct, credited, T0, PLAIN);
        assert_eq!(
            (aborted.value, aborted.reserved, aborted.fence),
            (
                2,
                [false, false],
                [Some(FenceOutcome::Aborted), Some(FenceOutcome::Committed)]
            )
        );
        // A stale reservation is given back without applying.
        assert_eq!(drop_stale_lock(Variant::Correct, one, T0), item);
    }

    #[test]
    fn its_own_hold_carrying_another_operation_refuses_a_prepare_and_prevents_an_inquiry() {
        // T0 holds the item (a lock for an update, a reservation for a debit) under name 0;
        // its prepare under name 1 carries another operation.
        for ops in [[UPD, UPD], [Op::Debit, Op::Credit]] {
            let item = ItemState::<2> { value: 1, ..free() };
            let (held, _) = reserve_or_lock(item, T0, ops);
            let other = Prepare {
                other_op: true,
                ..Prepare::of(T0, Item(1), ops)
            };
            assert_eq!(
                super::prepare(Variant::Correct, held, &other, &NO_DEADLINE_PASSED),
                (held, REFUSE(ANOTHER_OPERATION)),
                "{ops:?}"
            );
            // Told nothing, it is a retry: yes again.
            let told_nothing = Prepare::of(T0, Item(1), ops);
            let (_, vote) =
                super::prepare(Variant::Correct, held, &told_nothing, &NO_DEADLINE_PASSED);
            assert_eq!(vote, LOCK, "{ops:?}");
            // An inquiry about the other operation: prevented, nothing written; about the
            // held one: held.
            for (other_op, answer) in [(true, Inquiry::Prevented), (false, Inquiry::Held)] {
                let asked = (true, other_op);
                assert_eq!(
                    inquire(
                        Variant::Correct,
                        held,
                        T0,
                        asked,
                        PLAIN,
                        &NO_DEADLINE_PASSED
                    ),
                    (held, answer)
                );
            }
        }
        // The transaction's own fence entry comes first (a late prepare of an ended one).
        let (done, _) = commit(Variant::Correct, locked_by(T0), T0, UPD, PLAIN);
        let late = Prepare {
            other_op: true,
            ..Prepare::of(T0, Item(1), [UPD; 2])
        };
        assert_eq!(
            super::prepare(Variant::Correct, done, &late, &NO_DEADLINE_PASSED).1,
            REFUSE(Fenced(FenceOutcome::Committed))
        );
    }

    #[test]
    fn a_lock_and_reservations_exclude_each_other() {
        let ops = [Op::Debit, Op::Withdraw];
        let item = ItemState::<2> { value: 2, ..free() };
        let (reserved, _) = reserve_or_lock(item, T0, ops);
        let (paused, vote) = reserve_or_lock(reserved, T1, ops);
        assert_eq!(vote, REFUSE(PrepareRefusal::Reserved));
        assert_eq!((paused.lock, paused.paused_by), (None, [false, true]));
        let (locked, vote) = reserve_or_lock(item, T1, ops);
        assert_eq!((locked.lock, vote), (Some(T1), LOCK));
        assert_eq!(reserve_or_lock(locked, T0, ops), (locked, REFUSE(Locked)));
    }

    #[test]
    fn a_prevent_raises_the_horizon_only_for_a_transaction_within_the_margin() {
        // T0 ended here (its entry fills a fence of capacity 1); T1 is prevented.
        let mut item = free();
        item.fence[0] = Some(FenceOutcome::Committed);
        assert!(inquiry_upkeep_applies(
            &item,
            T1,
            Upkeep::Raise,
            &NO_DEADLINE_PASSED
        ));
        // T1 began too far ahead: never the horizon (it would lie in the future), its entry.
        let ahead = Env {
            ahead: [false, true],
            ..NO_DEADLINE_PASSED
        };
        assert!(!inquiry_upkeep_applies(&item, T1, Upkeep::Raise, &ahead));
        assert!(inquiry_upkeep_applies(&item, T1, PLAIN, &ahead));
        let (prevented, answer) = inquire(Variant::Correct, item, T1, (true, false), PLAIN, &ahead);
        assert_eq!(answer, Inquiry::Prevented);
        assert_eq!(prevented.fence[1], Some(FenceOutcome::Aborted));
        assert_eq!(prevented.horizon, None);
    }
}
