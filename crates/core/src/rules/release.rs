//! What a commit or abort does on an item as found ([`commit`], [`abort`]), the lock-free
//! abort's write ([`fence_out`]), and which fence entries a holder's release prunes
//! ([`plan_prune`]).

use std::collections::BTreeMap;

use crate::ids::TxId;
use crate::item::{FenceEntry, FenceOutcome};
use crate::message::Prune;

use super::{Seen, Shape};

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
    /// The lock is the transaction's, and a former transaction's entry under its id
    /// ([`Seen::former_entry`]) stands where its own is to go: retire that entry first (remove
    /// it, raising the horizon over its `began`), then apply.
    Retire,
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
    if seen.held_by_me() && seen.former_entry {
        return CommitStep::Retire;
    }
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
    /// `Release` or `FenceOut`, but a former transaction's entry under its id
    /// ([`Seen::former_entry`]) stands where its own is to go: retire that entry first.
    Retire,
    /// Answer without writing.
    Answer(Reply),
}

/// The abort rule. Without the lock: no item means nothing to do (nothing to fence: a late
/// prepare finds nothing to lock unless someone creates the item first; accepted, see
/// `docs/protocol.md`); an `aborted` entry or a covering horizon means done; a `committed` entry
/// contradicts the decision; otherwise fence the transaction out.
pub fn abort(seen: Seen) -> AbortStep {
    let answer = AbortStep::Answer;
    let write = |step| {
        if seen.former_entry {
            AbortStep::Retire
        } else {
            step
        }
    };
    if seen.held_by_me() {
        return write(AbortStep::Release);
    }
    if seen.shape == Shape::Absent {
        return answer(Reply::AlreadyDone);
    }
    match seen.entry {
        Some(FenceOutcome::Aborted) => answer(Reply::AlreadyDone),
        Some(FenceOutcome::Committed) => answer(Reply::Violation(Violation::AbortOfCommitted)),
        None if seen.covered => answer(Reply::AlreadyDone),
        None => write(AbortStep::FenceOut),
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
    use crate::rules::fixtures::*;
    use crate::rules::*;

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
}
