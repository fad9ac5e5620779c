//! The participant's conditional writes on one item, as pure functions: each takes the item as it
//! is and returns the item as it becomes plus the answer, exactly one DynamoDB conditional write
//! (or a refused one) per call. They mirror `twopc_core::participant::Participant` and the
//! conditions of `twopc_dynamo::items::DynamoItems`; the [`Variant`] switches in the two
//! mistakes the model is meant to catch.

use crate::state::{Clock, Decision, Fence, ItemState, Status, Tx};

/// Which protocol the model runs: the real one, or one with a known mistake put back in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The protocol of DESIGN.md §3 as `crates/core` implements it.
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
}

impl Variant {
    /// Whether items keep a fence.
    pub fn fences(self) -> bool {
        self != Variant::NoFence
    }
}

/// A participant's answer to prepare (`twopc_core::model::Vote`, reasons folded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vote {
    /// Locked for the transaction (now, or already by an earlier copy of this prepare).
    Yes,
    /// Refused: deadline passed, fenced, or locked by another transaction.
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

/// Prepare `tx` on `item`: one conditional write that sets the lock if the item is unlocked or
/// already locked by `tx` and the fence has no entry for `tx` (`DynamoItems::prepare`). A lock of
/// another transaction is a `No` here even when expired: resolving its owner is the separate step
/// [`resolution`], after which a redelivered prepare can lock.
///
/// The deadline is not checked here. `Participant::prepare` checks it *before* sending this
/// write, so the write itself can land after the deadline (a slow or retried request); the model
/// therefore applies the check when the prepares are sent (see `Action::SendPrepares`) and lets a
/// prepare sent in time land at any later moment.
///
/// `deadline_passed[t]` says whether transaction `t`'s deadline (and lock) has expired; only the
/// [`Variant::BlindTakeover`] variant reads it, for the lock holder.
pub fn prepare<const TXS: usize>(
    variant: Variant,
    item: ItemState<TXS>,
    tx: Tx,
    deadline_passed: &[bool; TXS],
) -> (ItemState<TXS>, Vote) {
    if variant.fences() && item.fence[tx.ix()].is_some() {
        return (item, Vote::No);
    }
    match item.lock {
        None => (
            ItemState {
                lock: Some(tx),
                ..item
            },
            Vote::Yes,
        ),
        Some(owner) if owner == tx => (item, Vote::Yes),
        Some(owner) if variant == Variant::BlindTakeover && deadline_passed[owner.ix()] => (
            ItemState {
                lock: Some(tx),
                ..item
            },
            Vote::Yes,
        ),
        Some(_) => (item, Vote::No),
    }
}

/// Commit `tx` on `item`: if the lock is `tx`'s, apply the operation, release the lock and write
/// the `committed` fence entry in one conditional write. Otherwise read the refusal
/// (`Participant::commit`): a `committed` entry → already done; an `aborted` entry → a protocol
/// violation; no entry → a violation while `tx`'s entries cannot have been pruned yet, but
/// "already done" once `clock` is past the deadline plus the fence margin (entries are pruned
/// then, and a decided commit's lock is removed by nobody but that commit: the rule of
/// `docs/architecture.md`, "A re-driven commit past the fence's retention is taken as applied").
pub fn commit<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
    clock: Clock,
) -> (ItemState<TXS>, Reply) {
    let t = tx.ix();
    if item.lock == Some(tx) {
        item.lock = None;
        item.applied[t] = item.applied[t].bump();
        if variant.fences() {
            item.fence[t] = Some(Fence::Committed);
        }
        return (item, Reply::Done);
    }
    if !variant.fences() {
        // The naive reading of a refused commit: "someone already committed it".
        return (item, Reply::AlreadyDone);
    }
    match item.fence[t] {
        Some(Fence::Committed) => (item, Reply::AlreadyDone),
        None if clock == Clock::PastMargin => (item, Reply::AlreadyDone),
        Some(Fence::Aborted) | None => (item, Reply::Violation),
    }
}

/// Abort `tx` on `item`: if the lock is `tx`'s, release it and write the `aborted` fence entry.
/// If not, an `aborted` entry means already done, a `committed` one is a violation, and no entry
/// gets an `aborted` entry written anyway (`fence_aborted`), so that a prepare arriving later is
/// refused — whoever else holds the lock keeps it (`Participant::abort`).
pub fn abort<const TXS: usize>(
    variant: Variant,
    mut item: ItemState<TXS>,
    tx: Tx,
) -> (ItemState<TXS>, Reply) {
    let t = tx.ix();
    if item.lock == Some(tx) {
        item.lock = None;
        if variant.fences() {
            item.fence[t] = Some(Fence::Aborted);
        }
        return (item, Reply::Done);
    }
    if !variant.fences() {
        return (item, Reply::AlreadyDone);
    }
    match item.fence[t] {
        Some(Fence::Aborted) => (item, Reply::AlreadyDone),
        Some(Fence::Committed) => (item, Reply::Violation),
        None => {
            item.fence[t] = Some(Fence::Aborted);
            (item, Reply::Done)
        }
    }
}

/// Remove `tx`'s lock without applying anything and without a fence entry: the lock rule's
/// answer to a stale lock of a `COMMITTED` owner (`ParticipantStore::drop_lock`).
pub fn drop_stale_lock<const TXS: usize>(mut item: ItemState<TXS>, tx: Tx) -> ItemState<TXS> {
    if item.lock == Some(tx) {
        item.lock = None;
    }
    item
}

/// Commit or abort, by decision.
pub fn complete<const TXS: usize>(
    variant: Variant,
    item: ItemState<TXS>,
    tx: Tx,
    decision: Decision,
    clock: Clock,
) -> (ItemState<TXS>, Reply) {
    match decision {
        Decision::Commit => commit(variant, item, tx, clock),
        Decision::Abort => abort(variant, item, tx),
    }
}

/// Whether `item` is finished for `tx` under `decision`: sending the commit or abort again would
/// change nothing and be acknowledged. A finished item stays finished in the correct protocol (a
/// fence entry blocks a new lock while one could land, and a pruned `committed` entry is answered
/// "already done"), so "every item acknowledged" in `Coordinator::complete` is the same as "every
/// item is finished now".
pub fn finished<const TXS: usize>(
    variant: Variant,
    item: ItemState<TXS>,
    tx: Tx,
    decision: Decision,
    clock: Clock,
) -> bool {
    let (after, reply) = complete(variant, item, tx, decision, clock);
    after == item && reply.acknowledged()
}

/// Prune `tx`'s `committed` fence entry, as a later write to the item does once the entry has
/// expired (deadline plus margin; `ParticipantStore::commit`/`abort` with a `prune` list).
/// `aborted` entries are not pruned in the model: no prepare can land any more, so dropping
/// one changes no decision, while a re-sent abort would write it back and make the state graph
/// cyclic for nothing.
pub fn prune_committed_entry<const TXS: usize>(
    mut item: ItemState<TXS>,
    tx: Tx,
    clock: Clock,
) -> ItemState<TXS> {
    if clock == Clock::PastMargin && item.fence[tx.ix()] == Some(Fence::Committed) {
        item.fence[tx.ix()] = None;
    }
    item
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
    const LIVE: Clock = Clock::BeforeDeadline;
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
        let (item, vote) = prepare(Variant::Correct, free(), T0, &NO_DEADLINE_PASSED);
        assert_eq!((item.lock, vote), (Some(T0), Vote::Yes));
        assert_eq!(
            prepare(Variant::Correct, item, T0, &NO_DEADLINE_PASSED),
            (item, Vote::Yes)
        );
    }

    #[test]
    fn late_prepare_after_commit_or_abort_is_fenced_out() {
        for decision in [Decision::Commit, Decision::Abort] {
            let (done, _) = complete(Variant::Correct, locked_by(T0), T0, decision, LIVE);
            assert_eq!(
                prepare(Variant::Correct, done, T0, &NO_DEADLINE_PASSED),
                (done, Vote::No)
            );
        }
        // An abort that found no lock still fences: the prepare that lands afterwards is refused.
        let (fenced, reply) = abort(Variant::Correct, free(), T0);
        assert_eq!(reply, Reply::Done);
        assert_eq!(
            prepare(Variant::Correct, fenced, T0, &NO_DEADLINE_PASSED).1,
            Vote::No
        );
    }

    #[test]
    fn without_a_fence_a_late_prepare_locks_again() {
        let (done, _) = commit(Variant::NoFence, locked_by(T0), T0, LIVE);
        assert_eq!(
            prepare(Variant::NoFence, done, T0, &NO_DEADLINE_PASSED).1,
            Vote::Yes
        );
    }

    #[test]
    fn expired_lock_is_a_no_unless_taken_over_blindly() {
        let expired_owner = [true, false];
        let item = locked_by(T0);
        assert_eq!(
            prepare(Variant::Correct, item, T1, &expired_owner),
            (item, Vote::No)
        );
        let (taken, vote) = prepare(Variant::BlindTakeover, item, T1, &expired_owner);
        assert_eq!((taken.lock, vote), (Some(T1), Vote::Yes));
        // A live lock is never taken, even by the blind variant.
        assert_eq!(
            prepare(Variant::BlindTakeover, item, T1, &NO_DEADLINE_PASSED),
            (item, Vote::No)
        );
    }

    #[test]
    fn commit_applies_once_and_a_retry_is_already_done() {
        let (item, reply) = commit(Variant::Correct, locked_by(T0), T0, LIVE);
        assert_eq!(reply, Reply::Done);
        assert_eq!(item.applied[0], Applied::Once);
        assert_eq!(item.fence[0], Some(Fence::Committed));
        assert_eq!(item.lock, None);
        assert_eq!(
            commit(Variant::Correct, item, T0, LIVE),
            (item, Reply::AlreadyDone)
        );
    }

    #[test]
    fn commit_without_lock_or_fence_entry_is_a_violation() {
        let other = locked_by(T1);
        assert_eq!(
            commit(Variant::Correct, other, T0, LIVE),
            (other, Reply::Violation)
        );
        let (aborted, _) = abort(Variant::Correct, free(), T0);
        assert_eq!(
            commit(Variant::Correct, aborted, T0, LIVE).1,
            Reply::Violation
        );
    }

    #[test]
    fn commit_past_the_fence_retention_takes_a_missing_entry_as_applied() {
        let (done, _) = commit(Variant::Correct, locked_by(T0), T0, LIVE);
        let pruned = prune_committed_entry(done, T0, Clock::PastMargin);
        assert_eq!(pruned.fence[0], None);
        assert_eq!(pruned.applied[0], Applied::Once);
        assert_eq!(
            commit(Variant::Correct, pruned, T0, Clock::PastMargin),
            (pruned, Reply::AlreadyDone)
        );
        // Within the retention nothing may have pruned it: still a violation.
        assert_eq!(
            commit(Variant::Correct, pruned, T0, Clock::PastDeadline).1,
            Reply::Violation
        );
        // And nothing is pruned before the margin has passed.
        assert_eq!(prune_committed_entry(done, T0, Clock::PastDeadline), done);
    }

    #[test]
    fn abort_leaves_another_transactions_lock_alone() {
        let (item, reply) = abort(Variant::Correct, locked_by(T1), T0);
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
        let item = drop_stale_lock(locked_by(T0), T0);
        assert_eq!(item, free());
    }

    #[test]
    fn finished_means_a_resend_changes_nothing() {
        let (done, _) = commit(Variant::Correct, locked_by(T0), T0, LIVE);
        assert!(finished(Variant::Correct, done, T0, Decision::Commit, LIVE));
        assert!(!finished(
            Variant::Correct,
            locked_by(T0),
            T0,
            Decision::Commit,
            LIVE
        ));
        assert!(!finished(
            Variant::Correct,
            free(),
            T0,
            Decision::Abort,
            LIVE
        ));
    }
}
