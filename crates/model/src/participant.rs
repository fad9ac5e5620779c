//! The participant's conditional writes on one item, as pure functions: each takes the item as it
//! is and returns the item as it becomes plus the answer, exactly one DynamoDB conditional write
//! (or a refused one) per call. They mirror `twopc_core::participant::Participant` and the
//! conditions of `twopc_dynamo::items::DynamoItems`; the [`Variant`] switches in the mistakes
//! the model is meant to catch.

use crate::state::{Decision, Fence, ItemState, Op, Shape, Status, Tx, covers};

/// Which protocol the model runs: the real one, one with a known mistake put back in, or one
/// with a proposed change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The protocol of DESIGN.md §3 as `crates/core` implements it, with the fence horizon.
    Correct,
    /// A prepare that meets an expired lock overwrites it (a blind conditional write on
    /// `expiresAt < now`) instead of resolving the owner. DESIGN.md, "The lock rule": this loses
    /// a decided transaction's write.
    BlindTakeover,
    /// No fence: commit and abort write no entry, prepare checks none, and a commit or abort that
    /// finds its lock gone assumes it was already done (the source material's "any failed commit
    /// condition means already committed"). Only the deadline check stands between a late
    /// prepare and the item.
    NoFence,
    /// Fence entries are pruned at any time (and the horizon kept), but prepare does not check
    /// the horizon: pruning then relies on no prepare landing late, which nothing bounds.
    NoHorizon,
    /// The lock holder's pruning release writes the horizon it computed from the fence its
    /// prepare read (the horizon then, raised over the entries it removes) *unconditionally*,
    /// instead of only if the item's horizon is not above it (`release_clauses` in
    /// `crates/dynamo`: `horizon <= :h`, else the participant releases without pruning). A
    /// lock-free abort that raised the horizon meanwhile is undone.
    StaleHorizon,
    /// The design before tombstones: a committed delete removes the item entirely (its fence and
    /// horizon with it), and an aborted create (or a dropped stale lock on a placeholder)
    /// deletes its placeholder. A retried delete commit that finds no item answers "already
    /// done" (`Participant::commit`'s `Refused(None) if req.op.delete`).
    DeleteRemoves,
    /// Not a mistake but a proposed change: a lock-free abort that finds no item writes a
    /// tombstone carrying its `aborted` entry (`fence_aborted` creating the item,
    /// `attribute_not_exists(key)`), instead of answering "already done" with nothing written.
    /// Closes the orphan lock the correct protocol leaves when the item is created after the
    /// abort and the aborted transaction's prepare lands late (see the crate docs).
    AbortBuriesAbsent,
}

impl Variant {
    /// Whether items keep a fence (entries and horizon).
    pub fn fences(self) -> bool {
        self != Variant::NoFence
    }

    /// Whether prepare refuses a transaction the horizon covers.
    pub fn checks_horizon(self) -> bool {
        !matches!(self, Variant::NoFence | Variant::NoHorizon)
    }
}

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
    /// `ParticipantStore::{commit, abort}`, planned by `participant::plan_prune` from the fence
    /// its prepare read; entries only leave the fence by the holder's own release, so they are
    /// still there).
    Prune(u8),
    /// A lock-free abort that would write its `aborted` entry raises the horizon to its
    /// transaction instead, as `fence_aborted` does when the fence is full. Applies whenever the
    /// fence has an entry: full for some capacity (≥ 1), so every capacity is covered.
    Raise,
}

/// Whether `upkeep` does something in the write of `decision` for `tx` to `item`: `Plain`
/// always; `Prune` only in the lock holder's release, naming only other transactions that have
/// an entry; `Raise` only in a lock-free abort that fences `tx` out of a non-empty fence (so
/// never on an absent item, which has no fence and which `fence_aborted` leaves alone).
pub fn upkeep_applies<const TXS: usize>(
    variant: Variant,
    item: &ItemState<TXS>,
    tx: Tx,
    decision: Decision,
    upkeep: Upkeep,
) -> bool {
    match upkeep {
        Upkeep::Plain => true,
        Upkeep::Prune(mask) => {
            variant.fences()
                && item.lock == Some(tx)
                && mask & (1 << tx.0) == 0
                && (0..TXS).all(|u| mask & (1 << u) == 0 || item.fence[u].is_some())
        }
        Upkeep::Raise => {
            variant.fences()
                && decision == Decision::Abort
                && item.shape != Shape::Absent
                && item.lock != Some(tx)
                && item.fence[tx.ix()].is_none()
                && !covers(item.horizon, tx)
                && item.fence.iter().any(Option::is_some)
        }
    }
}

/// A participant's answer to prepare (`twopc_core::model::Vote`, reasons folded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vote {
    /// Locked for the transaction (now, or already by an earlier copy of this prepare).
    Yes,
    /// Refused: deadline passed, fenced (entry or horizon), locked by another transaction,
    /// `notFound` (a non-creating operation on an item that is not real) or `condition` (a
    /// `put` on an item that exists).
    No,
}

/// A participant's answer to commit or abort (`twopc_core::model::CompleteReply`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// Written now.
    Done,
    /// Nothing to do: an earlier copy of this message (or a resolver) already did it.
    AlreadyDone,
    /// The item contradicts the decision: logged loudly, never acknowledged.
    Violation,
}

impl Reply {
    /// Whether the sender may count this item as finished.
    pub fn acknowledged(self) -> bool {
        self != Reply::Violation
    }
}

/// Prepare `tx`'s `op` on `item`: one conditional write (`DynamoItems::prepare`), which requires
/// that the fence has no entry for `tx`, and:
/// - for a non-creating `op` (update, delete), a real item (absent, placeholder, tombstone:
///   `notFound`), already locked by `tx`, or unlocked with `tx` not covered by the horizon; it
///   sets the lock;
/// - for a creating `op` (`put`), the item absent, or a tombstone (never locked) whose horizon
///   does not cover `tx`, or already `tx`'s placeholder (a retry); it writes a placeholder
///   locked by `tx`, keeping the tombstone's fence and horizon. A real item votes `condition`.
///
/// A lock of another transaction is a `No` here even when expired: resolving its owner is the
/// separate step [`resolution`], after which a redelivered prepare can lock.
///
/// The deadline is not checked here. `Participant::prepare` checks it *before* sending this
/// write, so the write itself can land after the deadline (a slow or retried request); the model
/// therefore applies the check when the prepares are sent (see `Action::SendPrepares`) and lets a
/// prepare sent in time land at any later moment, with no bound.
///
/// `deadline_passed[t]` says whether transaction `t`'s deadline (and lock) has expired; only the
/// [`Variant::BlindTakeover`] variant reads it, for the lock holder of a real item.
pub fn prepare<const TXS: usize>(
    variant: Variant,
    item: ItemState<TXS>,
    tx: Tx,
    op: Op,
    deadline_passed: &[bool; TXS],
) -> (ItemState<TXS>, Vote) {
    if variant.fences() && item.fence[tx.ix()].is_some() {
        return (item, Vote::No);
    }
    let take = |mut item: ItemState<TXS>| {
        if variant.checks_horizon() && covers(item.horizon, tx) {
            return (item, Vote::No);
        }
        item.lock = Some(tx);
        if op.creates() {
            item.shape = Shape::Placeholder;
        }
        if variant == Variant::StaleHorizon {
            item.horizon_at_lock = item.horizon;
        }
        (item, Vote::Yes)
    };
    if op.creates() {
        return match (item.shape, item.lock) {
            // An absent item has no horizon: the check in `take` passes, as the real
            // `attribute_not_exists(key)` branch has none.
            (Shape::Absent, _) | (Shape::Tombstone, None) => take(item),
            (Shape::Placeholder, Some(owner)) if owner == tx => (item, Vote::Yes),
            // Real: `condition`; another's placeholder: conflict (or its owner is resolved).
            _ => (item, Vote::No),
        };
    }
    if item.shape != Shape::Real {
        return (item, Vote::No); // notFound
    }
    match item.lock {
        None => take(item),
        Some(owner) if owner == tx => (item, Vote::Yes),
        Some(owner) if variant == Variant::BlindTakeover && deadline_passed[owner.ix()] => {
            take(item)
        }
        Some(_) => (item, Vote::No),
    }
}

/// The lock holder's release (`release_clauses`): remove the lock, write `outcome` as `tx`'s
/// fence entry, and carry out `upkeep`'s pruning: remove the named other entries and raise the
/// horizon to the latest of them. The horizon is never lowered ([`Variant::StaleHorizon`] aside:
/// it writes the horizon computed from the one its prepare read).
fn release<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
    outcome: Fence,
    upkeep: Upkeep,
) -> ItemState<TXS> {
    item.lock = None;
    if variant.fences() {
        item.fence[tx.ix()] = Some(outcome);
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

/// What becomes of an item a committed delete, an aborted create or a dropped stale lock on a
/// placeholder leaves behind (`DynamoItems::bury`, `release` of a placeholder): a tombstone
/// keeping the fence and the horizon, or, with [`Variant::DeleteRemoves`], nothing at all (only
/// the observer's `applied` record stays).
fn bury<const TXS: usize>(variant: Variant, item: ItemState<TXS>) -> ItemState<TXS> {
    debug_assert!(item.lock.is_none(), "buried while locked");
    if variant == Variant::DeleteRemoves {
        ItemState {
            applied: item.applied,
            ..ItemState::with_shape(Shape::Absent)
        }
    } else {
        ItemState {
            shape: Shape::Tombstone,
            ..item
        }
    }
}

/// Commit `tx`'s `op` on `item`: if the lock is `tx`'s, apply the operation, release the lock
/// and write the `committed` fence entry in one conditional write, pruning as `upkeep` says. A
/// `put` makes its placeholder real; a `delete` leaves a tombstone with the fence (our entry
/// included) and the horizon (`DynamoItems::bury`). Otherwise read the refusal
/// (`Participant::commit`): no item → "already done" for a delete (its item went with it, in the
/// old design), else a violation; a `committed` entry → already done; an `aborted` entry → a
/// protocol violation; no entry → "already done" if the horizon covers `tx` (its entry was
/// pruned after it applied: a decided commit's lock is removed by nobody but that commit), else
/// a violation.
pub fn commit<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
    op: Op,
    upkeep: Upkeep,
) -> (ItemState<TXS>, Reply) {
    let t = tx.ix();
    if item.lock == Some(tx) {
        debug_assert_eq!(
            item.shape == Shape::Placeholder,
            op.creates(),
            "a put locks only its placeholder, other operations only real items"
        );
        item = release(variant, item, tx, Fence::Committed, upkeep);
        item.applied[t] = item.applied[t].bump();
        match op {
            Op::Update => {}
            Op::Put => item.shape = Shape::Real,
            Op::Delete => item = bury(variant, item),
        }
        return (item, Reply::Done);
    }
    if !variant.fences() {
        // The naive reading of a refused commit: "someone already committed it".
        return (item, Reply::AlreadyDone);
    }
    if item.shape == Shape::Absent {
        let reply = match op {
            Op::Delete => Reply::AlreadyDone,
            Op::Update | Op::Put => Reply::Violation,
        };
        return (item, reply);
    }
    match item.fence[t] {
        Some(Fence::Committed) => (item, Reply::AlreadyDone),
        None if covers(item.horizon, tx) => (item, Reply::AlreadyDone),
        Some(Fence::Aborted) | None => (item, Reply::Violation),
    }
}

/// Abort `tx` on `item`: if the lock is `tx`'s, release it and write the `aborted` fence entry,
/// pruning as `upkeep` says; `tx`'s placeholder becomes a tombstone. If not, an absent item
/// means already done with nothing written (`fence_aborted` needs the item to exist), an
/// `aborted` entry means already done, a `committed` one is a violation, a horizon covering `tx`
/// means already done with nothing written (no prepare of `tx` can lock the item), and
/// otherwise the abort fences `tx` out (`fence_aborted`) so that a prepare arriving later is
/// refused: it writes the `aborted` entry, or, with [`Upkeep::Raise`] (the fence is full),
/// raises the horizon to `tx` (above the old one, or it would cover `tx`). Whoever else holds
/// the lock keeps it (`Participant::abort`).
pub fn abort<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
    upkeep: Upkeep,
) -> (ItemState<TXS>, Reply) {
    let t = tx.ix();
    if item.lock == Some(tx) {
        let mut item = release(variant, item, tx, Fence::Aborted, upkeep);
        if item.shape == Shape::Placeholder {
            item = bury(variant, item);
        }
        return (item, Reply::Done);
    }
    if !variant.fences() {
        return (item, Reply::AlreadyDone);
    }
    if item.shape == Shape::Absent {
        if variant == Variant::AbortBuriesAbsent {
            item.shape = Shape::Tombstone;
            item.fence[t] = Some(Fence::Aborted);
            return (item, Reply::Done);
        }
        return (item, Reply::AlreadyDone);
    }
    match item.fence[t] {
        Some(Fence::Aborted) => (item, Reply::AlreadyDone),
        Some(Fence::Committed) => (item, Reply::Violation),
        None if covers(item.horizon, tx) => (item, Reply::AlreadyDone),
        None => {
            if upkeep == Upkeep::Raise {
                item.horizon = Some(tx);
            } else {
                item.fence[t] = Some(Fence::Aborted);
            }
            (item, Reply::Done)
        }
    }
}

/// Remove `tx`'s lock without applying anything and without a fence entry: the lock rule's
/// answer to a stale lock of a `COMMITTED` owner (`ParticipantStore::drop_lock`). A placeholder
/// becomes a tombstone (`release`).
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
    item
}

/// Commit or abort, by decision.
pub fn complete<const TXS: usize>(
    variant: Variant,
    item: ItemState<TXS>,
    tx: Tx,
    op: Op,
    decision: Decision,
    upkeep: Upkeep,
) -> (ItemState<TXS>, Reply) {
    match decision {
        Decision::Commit => commit(variant, item, tx, op, upkeep),
        Decision::Abort => abort(variant, item, tx, upkeep),
    }
}

/// Whether `item` is finished for `tx` under `decision`: sending the commit or abort again would
/// change nothing and be acknowledged. A finished item stays finished in the correct protocol (a
/// fence entry or the horizon, which never drops, blocks a new lock; a pruned `committed` entry
/// leaves the horizon covering it, which a retried commit answers "already done"; a tombstone
/// keeps them both), so "every item acknowledged" in `Coordinator::complete` is the same as
/// "every item is finished now". One exception: an abort that found no item wrote nothing, and
/// if the item is created afterwards a late prepare may lock it for the aborted transaction (an
/// orphan the lock rule aborts; see the crate docs, "Creates and deletes").
pub fn finished<const TXS: usize>(
    variant: Variant,
    item: ItemState<TXS>,
    tx: Tx,
    op: Op,
    decision: Decision,
) -> bool {
    let (after, reply) = complete(variant, item, tx, op, decision, Upkeep::Plain);
    after == item && reply.acknowledged()
}

/// What a resolver standing on an item does about its expired lock's owner, from the owner's
/// record (DESIGN.md, "The lock rule"; `Participant::resolve` and `follow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resolution {
    /// Owner record missing: create it `ABORTED` (`create_aborted`); the lock goes next round.
    RecordAborted,
    /// Owner `PREPARING` past its deadline: compare-and-swap it to `ABORTING`.
    DecideAbort,
    /// Owner `COMMITTING`: roll it forward on this item (commit).
    RollForward,
    /// Owner `ABORTING` or `ABORTED`: abort it on this item.
    AbortHere,
    /// Owner `COMMITTED`: the lock is a stale duplicate; drop it unapplied.
    DropStale,
}

/// The lock rule as a table: what to do about an expired lock whose owner's record reads
/// `record`. (The caller has checked that the lock expired; the owner's deadline is its lock's
/// expiry, so an expired lock's `PREPARING` owner is always past its deadline.)
pub fn resolution(record: Option<Status>) -> Resolution {
    match record {
        None => Resolution::RecordAborted,
        Some(Status::Preparing) => Resolution::DecideAbort,
        Some(Status::Committing) => Resolution::RollForward,
        Some(Status::Aborting | Status::Aborted) => Resolution::AbortHere,
        Some(Status::Committed) => Resolution::DropStale,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Applied;

    const T0: Tx = Tx(0);
    const T1: Tx = Tx(1);
    const PLAIN: Upkeep = Upkeep::Plain;
    const UPD: Op = Op::Update;
    const PRUNE_ALL: Upkeep = Upkeep::Prune(0b11);
    const NO_DEADLINE_PASSED: [bool; 2] = [false, false];

    fn free() -> ItemState<2> {
        ItemState::new()
    }

    fn locked_by(tx: Tx) -> ItemState<2> {
        ItemState {
            lock: Some(tx),
            ..free()
        }
    }

    #[test]
    fn prepare_locks_a_free_item_and_a_retry_is_still_yes() {
        let (item, vote) = prepare(Variant::Correct, free(), T0, UPD, &NO_DEADLINE_PASSED);
        assert_eq!((item.lock, vote), (Some(T0), Vote::Yes));
        assert_eq!(
            prepare(Variant::Correct, item, T0, UPD, &NO_DEADLINE_PASSED),
            (item, Vote::Yes)
        );
    }

    #[test]
    fn late_prepare_after_commit_or_abort_is_fenced_out() {
        for decision in [Decision::Commit, Decision::Abort] {
            let (done, _) = complete(Variant::Correct, locked_by(T0), T0, UPD, decision, PLAIN);
            assert_eq!(
                prepare(Variant::Correct, done, T0, UPD, &NO_DEADLINE_PASSED),
                (done, Vote::No)
            );
        }
        // An abort that found no lock still fences: the prepare that lands afterwards is refused,
        // by the entry or by the raised horizon.
        for upkeep in [PLAIN, Upkeep::Raise] {
            let (fenced, reply) = abort(Variant::Correct, free(), T0, upkeep);
            assert_eq!(reply, Reply::Done);
            assert_eq!(
                prepare(Variant::Correct, fenced, T0, UPD, &NO_DEADLINE_PASSED).1,
                Vote::No
            );
        }
    }

    #[test]
    fn without_a_fence_a_late_prepare_locks_again() {
        let (done, _) = commit(Variant::NoFence, locked_by(T0), T0, UPD, PLAIN);
        assert_eq!(
            prepare(Variant::NoFence, done, T0, UPD, &NO_DEADLINE_PASSED).1,
            Vote::Yes
        );
    }

    #[test]
    fn expired_lock_is_a_no_unless_taken_over_blindly() {
        let expired_owner = [true, false];
        let item = locked_by(T0);
        assert_eq!(
            prepare(Variant::Correct, item, T1, UPD, &expired_owner),
            (item, Vote::No)
        );
        let (taken, vote) = prepare(Variant::BlindTakeover, item, T1, UPD, &expired_owner);
        assert_eq!((taken.lock, vote), (Some(T1), Vote::Yes));
        // A live lock is never taken, even by the blind variant.
        assert_eq!(
            prepare(Variant::BlindTakeover, item, T1, UPD, &NO_DEADLINE_PASSED),
            (item, Vote::No)
        );
    }

    #[test]
    fn commit_applies_once_and_a_retry_is_already_done() {
        let (item, reply) = commit(Variant::Correct, locked_by(T0), T0, UPD, PLAIN);
        assert_eq!(reply, Reply::Done);
        assert_eq!(item.applied[0], Applied::Once);
        assert_eq!(item.fence[0], Some(Fence::Committed));
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
            (other, Reply::Violation)
        );
        let (aborted, _) = abort(Variant::Correct, free(), T0, PLAIN);
        assert_eq!(
            commit(Variant::Correct, aborted, T0, UPD, PLAIN).1,
            Reply::Violation
        );
    }

    #[test]
    fn the_holders_release_prunes_other_entries_and_raises_the_horizon_over_them() {
        // T0 committed; T1 takes the lock, and its abort prunes T0's entry (never its own).
        let (done, _) = commit(Variant::Correct, locked_by(T0), T0, UPD, PLAIN);
        let (held, _) = prepare(Variant::Correct, done, T1, UPD, &NO_DEADLINE_PASSED);
        let (pruned, reply) = abort(Variant::Correct, held, T1, PRUNE_ALL);
        assert_eq!(reply, Reply::Done);
        assert_eq!(pruned.fence, [None, Some(Fence::Aborted)]);
        assert_eq!(pruned.horizon, Some(T0));
        assert_eq!(pruned.applied[0], Applied::Once);
        // T0's retried commit is answered by the horizon, its late prepare refused by it.
        assert_eq!(
            commit(Variant::Correct, pruned, T0, UPD, PLAIN),
            (pruned, Reply::AlreadyDone)
        );
        assert_eq!(
            prepare(Variant::Correct, pruned, T0, UPD, &NO_DEADLINE_PASSED),
            (pruned, Vote::No)
        );
        // Without the horizon check, the late prepare locks the item again.
        assert_eq!(
            prepare(Variant::NoHorizon, pruned, T0, UPD, &NO_DEADLINE_PASSED).1,
            Vote::Yes
        );
        // A write that does not hold the lock prunes nothing.
        let other = locked_by(T1);
        let (fenced, _) = abort(Variant::Correct, other, T0, PRUNE_ALL);
        assert_eq!(fenced.fence, [Some(Fence::Aborted), None]);
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
        item.fence[0] = Some(Fence::Committed);
        let none_passed = [false; 3];
        for (variant, after) in [
            (Variant::Correct, Some(T2)),
            (Variant::StaleHorizon, Some(T0)),
        ] {
            let (held, _) = prepare(variant, item, T1, UPD, &none_passed);
            let (raised, _) = abort(variant, held, T2, Upkeep::Raise);
            assert_eq!(raised.horizon, Some(T2));
            let (released, _) = commit(variant, raised, T1, UPD, Upkeep::Prune(0b001));
            assert_eq!(released.fence, [None, Some(Fence::Committed), None]);
            assert_eq!(released.horizon, after, "{variant:?}");
            // The stale write re-admits the aborted T2's late prepare.
            let vote = prepare(variant, released, T2, UPD, &none_passed).1;
            assert_eq!(vote == Vote::Yes, variant == Variant::StaleHorizon);
        }
    }

    #[test]
    fn an_upkeep_is_a_step_only_where_it_does_something() {
        let c = Variant::Correct;
        let mut held = locked_by(T0);
        held.fence[1] = Some(Fence::Aborted);
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
        other_entry.fence[0] = Some(Fence::Committed);
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
        assert_eq!(item.fence, [Some(Fence::Aborted), None]);
    }

    #[test]
    fn the_lock_rule_follows_the_owners_record() {
        assert_eq!(resolution(None), Resolution::RecordAborted);
        assert_eq!(resolution(Some(Status::Preparing)), Resolution::DecideAbort);
        assert_eq!(
            resolution(Some(Status::Committing)),
            Resolution::RollForward
        );
        assert_eq!(resolution(Some(Status::Aborting)), Resolution::AbortHere);
        assert_eq!(resolution(Some(Status::Aborted)), Resolution::AbortHere);
        assert_eq!(resolution(Some(Status::Committed)), Resolution::DropStale);
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
            (Shape::Placeholder, Some(T0), Vote::Yes)
        );
        assert_eq!(
            prepare(c, ph, T0, Op::Put, &NO_DEADLINE_PASSED),
            (ph, Vote::Yes)
        );
        // Another's placeholder, a real item: refused.
        assert_eq!(
            prepare(c, ph, T1, Op::Put, &NO_DEADLINE_PASSED),
            (ph, Vote::No)
        );
        assert_eq!(
            prepare(c, free(), T0, Op::Put, &NO_DEADLINE_PASSED).1,
            Vote::No
        );
        // A tombstone: taken, fence and horizon kept, unless its fence or horizon covers the
        // put.
        let mut tomb = shaped(Shape::Tombstone);
        tomb.fence[0] = Some(Fence::Committed);
        let (taken, vote) = prepare(c, tomb, T1, Op::Put, &NO_DEADLINE_PASSED);
        assert_eq!(vote, Vote::Yes);
        assert_eq!(
            (taken.shape, taken.fence, taken.horizon),
            (Shape::Placeholder, tomb.fence, None)
        );
        assert_eq!(
            prepare(c, tomb, T0, Op::Put, &NO_DEADLINE_PASSED),
            (tomb, Vote::No)
        );
        let covered = ItemState {
            fence: [None, None],
            horizon: Some(T1),
            ..tomb
        };
        assert_eq!(
            prepare(c, covered, T1, Op::Put, &NO_DEADLINE_PASSED),
            (covered, Vote::No)
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
        for item in [shaped(Shape::Absent), shaped(Shape::Tombstone), ph] {
            for op in [Op::Update, Op::Delete] {
                assert_eq!(
                    prepare(Variant::Correct, item, T1, op, &NO_DEADLINE_PASSED),
                    (item, Vote::No)
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
        assert_eq!(real.applied[0], Applied::Once);
        let (tomb, _) = abort(Variant::Correct, ph, T0, PLAIN);
        assert_eq!(tomb.shape, Shape::Tombstone);
        assert_eq!(tomb.fence, [Some(Fence::Aborted), None]);
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
        assert_eq!(tomb.fence, [Some(Fence::Committed), None]);
        assert_eq!(tomb.applied[0], Applied::Once);
        assert_eq!(
            commit(Variant::Correct, tomb, T0, Op::Delete, PLAIN),
            (tomb, Reply::AlreadyDone)
        );
        // A late put of a transaction the tombstone fences is refused.
        assert_eq!(
            prepare(Variant::Correct, tomb, T0, Op::Put, &NO_DEADLINE_PASSED).1,
            Vote::No
        );
        // The old design removes the item: the retried delete is "already done" all the same,
        // but the late put recreates the item.
        let (gone, _) = commit(Variant::DeleteRemoves, locked_by(T0), T0, Op::Delete, PLAIN);
        assert_eq!(gone.shape, Shape::Absent);
        assert_eq!(gone.fence, [None, None]);
        assert_eq!(gone.applied[0], Applied::Once);
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
            Vote::Yes
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
        assert_eq!(tomb.fence, [Some(Fence::Aborted), None]);
        // A commit that finds no item: a violation, but for a delete (its item went with it).
        assert_eq!(
            commit(Variant::Correct, absent, T0, Op::Put, PLAIN).1,
            Reply::Violation
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
}
