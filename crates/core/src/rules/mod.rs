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
//! | [`heat`], [`heats`] | what a cancelled native attempt teaches about an item's heat, and about every item of it: route around it, and whether to mark it |
//! | [`too_far_ahead`], [`age`], [`prevent_capacity`] | whether a prepare's `began` is further ahead of the participant's clock than the margin, its age there, and the fence capacity a prevent of it works with |
//! | [`route`], [`protocol_path`], [`stages`] | which path a transaction takes: native, staged (one round) or classic (five) |

mod admit;
mod clock;
mod decide;
mod heat;
mod native;
mod path;
mod release;
mod staged;

pub use admit::{
    EscrowRefusal, EscrowSeen, Keeps, PrepareRefusal, PrepareStep, escrow, prepare, reserve,
};
pub(crate) use clock::too_far_ahead;
pub use clock::{age, prevent_capacity};
pub use decide::{
    AfterLostSwap, OwnerRecord, Recovery, Resolution, after_lost_decide, after_lost_finalize,
    completer_recovers, decision, recovery, resolve,
};
pub use heat::{Heat, NativeFinding, heat, heats};
pub use native::{NativeStep, NotNative, native, native_write};
pub use path::{CommitMode, NotStaged, Path, PathFacts, Reach, protocol_path, route, stages};
pub use release::{
    AbortStep, CommitStep, FenceOut, Reply, Violation, abort, commit, fence_out, plan_prune,
};
pub use staged::{InquiryStep, StagedDecision, inquire, staged_decision};

use crate::ids::TxId;
use crate::item::{FenceOutcome, ItemState, Lock};
use crate::op::Operation;

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
    /// the one it prepares now, or holds another part of the request (both parts known, even
    /// with an identical operation): not a retry, but one item named twice (two spellings of
    /// one key, or one table under two names). Only a prepare and an inquiry know their
    /// operation and part ([`Seen::preparing`], [`Seen::inquiring`]); false for other steps.
    pub other_op: bool,
    /// Whether the fence holds an entry under the transaction's id with another `began`: a
    /// *former* transaction's (an idempotency key used again after its record expired; a
    /// transaction is its id and its `began`). Not the transaction's own (`entry` is `None`),
    /// but in the way of the one entry the id has room for: a step that writes the entry
    /// retires it first (removes it and raises the horizon over its `began`, as a prune does).
    pub former_entry: bool,
    /// Whether a former transaction under the same id holds a reservation on the item (the
    /// one attribute its id has, `txRes:<id>`): a holder whose record is gone, which the lock
    /// rule settles before this transaction can reserve.
    pub former_reservation: bool,
    /// Whether the item's heat mark is live: transactions were seen contending for it, so native
    /// writes give way to the protocol on it ([`native_write`], [`heat`]). Only native writes
    /// read it.
    pub hot: bool,
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
        former_entry: false,
        former_reservation: false,
        hot: false,
    };

    /// Whether the transaction holds the item, by lock or by reservation.
    pub fn held_by_me(self) -> bool {
        self.holder == Holder::Me || self.reserved_by_me
    }

    /// What the rules read of `item` for transaction `tx` (which began at `began`) at time
    /// `now` (no item: [`Seen::ABSENT`]). A transaction is its id and its `began`: a lock,
    /// reservation or fence entry under its id with another `began` is a former transaction's
    /// ([`Seen::former_entry`]).
    pub fn of(item: &ItemState, tx: &TxId, began: u64, now: u64) -> Seen {
        let entry = item.fence.get(tx);
        let reservation = item.reservations.get(tx);
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
                Some(l) if l.is_of(tx, began) => Holder::Me,
                Some(l) => Holder::Other {
                    expired: now > l.expires_at,
                },
            },
            entry: entry.filter(|e| e.is_of(began)).map(|e| e.outcome),
            covered: began <= item.horizon,
            reserved_by_me: reservation.is_some_and(|r| r.began == began),
            reserved_by_others: {
                let others = item.reservations.values().filter(|r| !r.is_of(tx, began));
                let mut expired = false;
                let mut any = false;
                for r in others {
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
            former_entry: entry.is_some_and(|e| !e.is_of(began)),
            former_reservation: reservation.is_some_and(|r| r.began != began),
            hot: now < item.hot_until,
        }
    }

    /// What a prepare (or reservation) of `lock` reads of `item` at `now`: as an inquiry
    /// asking about the lock's operation ([`Seen::inquiring`]).
    pub fn preparing(item: Option<&ItemState>, lock: &Lock, now: u64) -> Seen {
        let step = Step {
            op: Some(&lock.op),
            part: lock.part,
        };
        Seen::inquiring(item, &lock.tx_id, lock.began, step, now)
    }

    /// What a step of transaction `tx` (which began at `began`) about its operation and part
    /// (`step`) reads of `item` at `now` (no item: [`Seen::ABSENT`]): [`Seen::of`], and whether
    /// the transaction's own hold carries another operation
    /// ([`Operation::same_as`](crate::op::Operation::same_as): numbers by value, as the store
    /// gives them back; `op` `None`: not compared) or another part (either `None`: not
    /// compared).
    pub fn inquiring(
        item: Option<&ItemState>,
        tx: &TxId,
        began: u64,
        step: Step<'_>,
        now: u64,
    ) -> Seen {
        let Some(item) = item else {
            return Seen::ABSENT;
        };
        let own = item
            .lock
            .iter()
            .chain(item.reservations.get(tx))
            .filter(|l| l.is_of(tx, began));
        let other = |held: &Lock| {
            let other_op = step.op.is_some_and(|op| !held.op.same_as(op));
            let other_part = matches!((held.part, step.part), (Some(h), Some(s)) if h != s);
            other_op || other_part
        };
        let other_op = own.into_iter().any(other);
        Seen {
            other_op,
            ..Seen::of(item, tx, began, now)
        }
    }
}

/// What a prepare or inquiry is about, as [`Seen::inquiring`] compares it with the
/// transaction's own hold: its operation (a table's) and its part of the request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Step<'a> {
    /// The operation (`None`: not compared, a custom participant's or an older coordinator's).
    pub op: Option<&'a Operation>,
    /// The index of its participant entry in the request (`None`: not compared).
    pub part: Option<u32>,
}

/// Items as the rules' tests find them.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{Holder, Seen, Shape};

    pub(crate) const REAL: Seen = Seen {
        shape: Shape::Real,
        ..Seen::ABSENT
    };

    pub(crate) const LIVE_OTHER: Holder = Holder::Other { expired: false };

    pub(crate) const EXPIRED_OTHER: Holder = Holder::Other { expired: true };

    pub(crate) fn seen(shape: Shape, holder: Holder) -> Seen {
        Seen {
            shape,
            holder,
            ..Seen::ABSENT
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            part: None,
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
    fn a_hold_of_another_part_is_another_operation_even_when_identical() {
        // One table reached `direct` and through a function, the same credit under both: the
        // second prepare meets the hold of the first part, which comparing operations cannot
        // tell from a retry.
        let tx = TxId::random();
        let op = crate::op::Operation::from_json("op", &serde_json::json!({"add": {"n": 5}}))
            .expect("op");
        let lock = |part| Lock {
            tx_id: tx.clone(),
            expires_at: 10,
            began: 5,
            op: op.clone(),
            coordinator: "c".into(),
            part,
        };
        let locked = |part| ItemState {
            lock: Some(lock(part)),
            ..ItemState::default()
        };
        let reserved = |part| ItemState {
            reservations: [(tx.clone(), lock(part))].into(),
            ..ItemState::default()
        };
        for item in [locked(Some(0)), reserved(Some(0))] {
            let other = Seen::preparing(Some(&item), &lock(Some(1)), 0);
            assert!(other.held_by_me() && other.other_op, "{item:?}");
            assert!(
                !Seen::preparing(Some(&item), &lock(Some(0)), 0).other_op,
                "a retry"
            );
            // A prepare of an older coordinator names no part: compared as before.
            assert!(!Seen::preparing(Some(&item), &lock(None), 0).other_op);
            let inquiry = Step {
                op: None,
                part: Some(1),
            };
            assert!(Seen::inquiring(Some(&item), &tx, 5, inquiry, 0).other_op);
        }
        // A hold of an older participant records no part: compared as before.
        assert!(!Seen::preparing(Some(&locked(None)), &lock(Some(1)), 0).other_op);
        assert_eq!(
            prepare(
                Seen::preparing(Some(&locked(Some(0))), &lock(Some(1)), 0),
                false
            ),
            PrepareStep::Refuse(PrepareRefusal::OtherOperation)
        );
    }
}
