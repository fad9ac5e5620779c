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
//! | [`too_far_ahead`], [`age`] | whether a prepare's `began` is further ahead of the participant's clock than the margin, and its age there |
//! | [`stages`] | whether a protocol transaction is staged (one round) or classic (five) in the default mode |

mod admit;
mod clock;
mod decide;
mod native;
mod path;
mod release;
mod staged;

pub use admit::{
    EscrowRefusal, EscrowSeen, Keeps, PrepareRefusal, PrepareStep, escrow, prepare, reserve,
};
pub use clock::{age, too_far_ahead};
pub use decide::{
    AfterLostSwap, Recovery, Resolution, after_lost_decide, after_lost_finalize,
    completer_recovers, decision, recovery, resolve,
};
pub use native::{
    NATIVE_MAX_ACTIONS, NATIVE_MAX_BYTES, NativeFacts, NativeStep, NotNative, native, native_write,
};
pub use path::{NotStaged, Reach, StageFacts, stages};
pub use release::{
    AbortStep, CommitStep, FenceOut, Reply, Violation, abort, commit, fence_out, plan_prune,
};
pub use staged::{InquiryStep, StagedDecision, inquire, staged_decision};

use crate::ids::TxId;
use crate::item::{FenceOutcome, ItemState, Lock};

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
    /// Whether the transaction's own hold (lock or reservation) carries another operation than
    /// the one it prepares now: not a retry, but one item named twice (two spellings of one
    /// key). Only a prepare knows its operation ([`Seen::preparing`]); false for other steps.
    pub other_op: bool,
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
        other_op: false,
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
            other_op: false,
        }
    }

    /// What a prepare (or reservation) of `lock` reads of `item` at `now` (no item:
    /// [`Seen::ABSENT`]): [`Seen::of`], and whether the transaction's own hold carries another
    /// operation ([`Operation::same_as`](crate::op::Operation::same_as): numbers by value, as
    /// the store gives them back).
    pub fn preparing(item: Option<&ItemState>, lock: &Lock, now: u64) -> Seen {
        let Some(item) = item else {
            return Seen::ABSENT;
        };
        let tx = &lock.tx_id;
        let own = item
            .lock
            .iter()
            .filter(|l| &l.tx_id == tx)
            .chain(item.reservations.get(tx));
        let other_op = own.into_iter().any(|held| !held.op.same_as(&lock.op));
        Seen {
            other_op,
            ..Seen::of(item, tx, lock.began, now)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;
    use std::collections::BTreeMap;

    use super::*;
    use crate::item::FenceEntry;
    use crate::status::{Decision, TxStatus};

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
    fn its_own_hold_with_another_operation_refuses_a_prepare_and_a_reservation() {
        use PrepareRefusal::*;
        let other_op = |s: Seen| Seen {
            other_op: true,
            ..s
        };
        let locked = seen(Shape::Real, Holder::Me);
        let reserved = Seen {
            reserved_by_me: true,
            ..REAL
        };
        for held in [locked, reserved] {
            assert_eq!(
                prepare(other_op(held), false),
                PrepareStep::Refuse(OtherOperation)
            );
            assert_eq!(
                reserve(other_op(held), false),
                PrepareStep::Refuse(OtherOperation)
            );
        }
        assert_eq!(
            prepare(other_op(seen(Shape::Placeholder, Holder::Me)), true),
            PrepareStep::Refuse(OtherOperation)
        );
        // The same operation is a retry; and with no hold of its own, nothing to compare.
        assert_eq!(prepare(locked, false), PrepareStep::Lock);
        assert_eq!(reserve(reserved, false), PrepareStep::Lock);
        assert_eq!(prepare(other_op(REAL), false), PrepareStep::Lock);
        // Its own fence entry still comes first.
        let ended = Seen {
            entry: Some(FenceOutcome::Committed),
            ..other_op(locked)
        };
        assert_eq!(
            prepare(ended, false),
            PrepareStep::Refuse(Fenced(FenceOutcome::Committed))
        );
    }

    #[test]
    fn preparing_tells_a_retry_from_another_operation_by_value() {
        let tx = TxId::random();
        let lock = |op: &str| Lock {
            tx_id: tx.clone(),
            expires_at: 10,
            began: 5,
            op: crate::op::Operation::from_json("op", &serde_json::from_str(op).expect("json"))
                .expect("op"),
            coordinator: "c".into(),
        };
        let item = ItemState {
            lock: Some(lock(r#"{"add": {"n": -10.50}, "set": {"m": 1}}"#)),
            ..ItemState::default()
        };
        let same = Seen::preparing(
            Some(&item),
            &lock(r#"{"add": {"n": -10.5}, "set": {"m": 1.0}}"#),
            0,
        );
        assert!(same.holder == Holder::Me && !same.other_op);
        let other = Seen::preparing(
            Some(&item),
            &lock(r#"{"add": {"n": 10.5}, "set": {"m": 1}}"#),
            0,
        );
        assert!(other.other_op);
        let reserved = ItemState {
            reservations: [(tx.clone(), lock(r#"{"add": {"n": -1}}"#))].into(),
            ..ItemState::default()
        };
        assert!(Seen::preparing(Some(&reserved), &lock(r#"{"add": {"n": -2}}"#), 0).other_op);
        assert!(!Seen::preparing(None, &lock(r#"{"add": {"n": -2}}"#), 0).other_op);
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
