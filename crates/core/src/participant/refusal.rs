//! Why a prepare was refused, in words a client can act on: the refusal the rules gave, read
//! against the item as found ([`classify_refusal`], [`classify_native_refusal`]).

use crate::decimal::Decimal;
use crate::item::{Escrow, FenceOutcome, ItemState, Key, Lock};
use crate::op::{Condition, Mode};
use crate::record::VoteReason;
use crate::rules::{
    self, EscrowRefusal, EscrowSeen, Others, PrepareRefusal, PrepareStep, Seen, Shape,
};

/// Renders a key for messages.
pub(crate) fn show_key(key: &Key) -> String {
    serde_json::to_string(key).unwrap_or_else(|_| "?".to_owned())
}

/// Why a conditional prepare was refused, read off the item as it was.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// Vote no.
    Vote(VoteReason, String),
    /// Other transactions hold the item: settle each by the lock rule where it may be (expired,
    /// or already decided), then try again. `waiting`: they are reservations an exclusive
    /// operation waits for (if some are live, it pauses new ones).
    Held {
        /// The holders.
        owners: Vec<Lock>,
        /// An exclusive operation waits for these reservations.
        waiting: bool,
    },
    /// The idle escrow of these attributes is stale (written outside the protocol since):
    /// reset it, then try again.
    Stale(Vec<String>),
}

/// Reads a refused prepare or reservation off the item it found (`None`: no item) by the rule
/// of its mode ([`rules::prepare`], [`rules::reserve`]), with a message for people.
/// `full` says whether an item holds as many reservations as it takes.
pub fn classify_refusal(
    item: Option<&ItemState>,
    lock: &Lock,
    now: u64,
    full: impl Fn(&ItemState) -> bool,
) -> Refusal {
    let seen = Seen::preparing(item, lock, now);
    let mode = lock.op.mode();
    let step = match mode {
        Mode::Exclusive => rules::prepare(seen, lock.op.creates()),
        Mode::Reserved => rules::reserve(seen, item.is_some_and(full)),
    };
    classify_step(item, lock, now, seen, mode, step)
}

/// Reads a refused native write (`docs/protocol.md`, "Native transactions") off the item it
/// found, by [`rules::native_write`], into the vote a prepare refused for the same reason
/// would get; where the protocol holds the item, or it is marked hot, [`Refusal::Held`] (the
/// transaction takes the protocol path).
pub fn classify_native_refusal(item: Option<&ItemState>, lock: &Lock, now: u64) -> Refusal {
    let seen = Seen::preparing(item, lock, now);
    let step = match rules::native_write(seen, lock.op.creates()) {
        rules::NativeStep::Apply => PrepareStep::Lock,
        rules::NativeStep::Refuse(r) => PrepareStep::Refuse(r),
        rules::NativeStep::Protocol | rules::NativeStep::Heated => {
            return Refusal::Held {
                owners: vec![],
                waiting: false,
            };
        }
    };
    classify_step(item, lock, now, seen, Mode::Exclusive, step)
}

/// The one classification of a refused write, once its rule has said why: a vote for a
/// refusal of the protocol's own ([`protocol_vote`]), the holders to settle, or the operation's
/// own conditions.
fn classify_step(
    item: Option<&ItemState>,
    lock: &Lock,
    now: u64,
    seen: Seen,
    mode: Mode,
    step: PrepareStep,
) -> Refusal {
    let refusal = match step {
        PrepareStep::Refuse(r) => r,
        // The protocol admits it, so one of the operation's own conditions failed.
        PrepareStep::Lock => PrepareRefusal::Business,
    };
    if let Some(vote) = protocol_vote(refusal, item, lock) {
        return vote;
    }
    let held = |owners, waiting| Refusal::Held { owners, waiting };
    match refusal {
        // A live lock's owner may already have decided: settling it here is the lock rule's
        // answer too, and it spares the newcomer a wait for the lease.
        PrepareRefusal::Locked => held(lock_owner(item), false),
        PrepareRefusal::ResolveOwner => {
            let mut owners = lock_owner(item);
            if owners.is_empty() {
                owners = reservations(item, lock, now, true);
            }
            held(owners, false)
        }
        PrepareRefusal::Reserved => held(reservations(item, lock, now, false), true),
        // `Business`: the operation's own conditions (the rest are votes, above).
        _ => match mode {
            Mode::Exclusive => business_refusal(item, lock),
            Mode::Reserved => {
                escrow_refusal(item, lock, seen, &reservations(item, lock, now, true))
            }
        },
    }
}

/// The no vote for a refusal of the protocol's own, in words a client can act on (`None`: a
/// holder to settle, or the operation's own conditions).
fn protocol_vote(
    refusal: PrepareRefusal,
    item: Option<&ItemState>,
    lock: &Lock,
) -> Option<Refusal> {
    let (reason, message) = match refusal {
        PrepareRefusal::Fenced(outcome) => (
            VoteReason::Fenced,
            format!("transaction {} already {} on this item", lock.tx_id, ended(outcome)),
        ),
        PrepareRefusal::BelowHorizon => (
            VoteReason::Fenced,
            format!(
                "transaction {} began at or before this item's fence horizon ({} ms): it ended here already, or more than the fence's capacity of later transactions ended here before this prepare",
                lock.tx_id,
                item.map_or(0, |i| i.horizon)
            ),
        ),
        PrepareRefusal::Full => (
            VoteReason::Conflict,
            format!(
                "{} transactions hold reservations on this item, the most it takes (TWOPC_MAX_RESERVATIONS): retry",
                item.map_or(0, |i| i.reservations.len())
            ),
        ),
        PrepareRefusal::Paused => (
            VoteReason::Conflict,
            "new reservations of this item are paused while an exclusive operation waits for it: retry".to_owned(),
        ),
        PrepareRefusal::NotFound(shape) => (
            VoteReason::NotFound,
            match shape {
                Shape::Tombstone => "no such item (it was deleted)",
                Shape::Placeholder => "no such item (it is being created)",
                Shape::Absent | Shape::Real => "no such item",
            }
            .to_owned(),
        ),
        PrepareRefusal::OtherOperation => (
            VoteReason::Invalid,
            format!(
                "transaction {} already holds this item with another operation: one item named twice (two spellings of its key?); refused, the hold keeps its operation",
                lock.tx_id
            ),
        ),
        PrepareRefusal::Exists => (
            VoteReason::Condition,
            "put: the item already exists".to_owned(),
        ),
        PrepareRefusal::Locked
        | PrepareRefusal::ResolveOwner
        | PrepareRefusal::Reserved
        | PrepareRefusal::Business => return None,
    };
    Some(Refusal::Vote(reason, message))
}

/// How a fence entry says its transaction ended.
fn ended(outcome: FenceOutcome) -> &'static str {
    match outcome {
        FenceOutcome::Committed => "committed",
        FenceOutcome::Aborted => "aborted",
    }
}

/// The item's lock, as the one holder to settle (none: nobody).
fn lock_owner(item: Option<&ItemState>) -> Vec<Lock> {
    item.and_then(|i| i.lock.clone()).into_iter().collect()
}

/// Other transactions' reservations on the item (only the expired ones, if `expired_only`, and
/// a former transaction's under the lock's id, which must go for it to reserve).
fn reservations(item: Option<&ItemState>, lock: &Lock, now: u64, expired_only: bool) -> Vec<Lock> {
    item.map(|i| {
        i.reservations
            .values()
            .filter(|r| !r.is_of(&lock.tx_id, lock.began))
            .filter(|r| !expired_only || now > r.expires_at || r.tx_id == lock.tx_id)
            .cloned()
            .collect()
    })
    .unwrap_or_default()
}

/// Which of the operation's own conditions failed: an `add` to a non-number, or the `require`s,
/// each with the value it found.
fn business_refusal(item: Option<&ItemState>, lock: &Lock) -> Refusal {
    let attribute = |name: &str| item.and_then(|i| i.attributes.get(name));
    for name in lock.op.add.keys() {
        if let Some(v) = attribute(name).filter(|v| !v.is_number()) {
            return Refusal::Vote(
                VoteReason::Invalid,
                format!("add: attribute {name:?} is not a number (it is {v})"),
            );
        }
    }
    let failed: Vec<String> = lock
        .op
        .require
        .iter()
        .map(|(name, cond)| {
            let current = attribute(name).map_or_else(|| "absent".to_owned(), |v| v.to_string());
            let want = match cond {
                Condition::Exists => "exists".to_owned(),
                Condition::NotExists => "notExists".to_owned(),
                Condition::Compare(c, v) => format!("{} {v}", c.name()),
            };
            format!("{name} {want} (is {current})")
        })
        .collect();
    Refusal::Vote(
        VoteReason::Condition,
        format!("a required condition does not hold: {}", failed.join(", ")),
    )
}

/// Why a reservation's own conditions failed, by [`rules::escrow`] on the first attribute it
/// refuses: the committed value breaks a bound (`condition`: no outcome of the transactions in
/// flight helps), in-flight reservations keep the attribute to another bound (`conflict`), or a
/// bound holds for the committed value but not for every outcome of the reservations in flight
/// (`conflict`, or settle the expired ones first).
fn escrow_refusal(item: Option<&ItemState>, lock: &Lock, seen: Seen, expired: &[Lock]) -> Refusal {
    let (Some(escrowed), Some(found)) = (lock.op.escrow(), item) else {
        return business_refusal(item, lock);
    };
    let conflict = |m: String| Refusal::Vote(VoteReason::Conflict, m);
    for (name, e) in &escrowed {
        let Some(escrow) = EscrowSeen::of(found, name, e) else {
            return business_refusal(item, lock); // not a number
        };
        let standing = found.escrow.get(name).filter(|s| s.count > 0);
        let show = |d: Option<&Decimal>| d.map_or("none".to_owned(), Decimal::to_string);
        match rules::escrow(escrow) {
            Ok(()) => continue,
            Err(EscrowRefusal::Stale) => {
                let stale = escrowed
                    .iter()
                    .filter(|(n, e)| EscrowSeen::of(found, n, e).is_some_and(|s| s.stale))
                    .map(|(n, _)| n.clone())
                    .collect();
                return Refusal::Stale(stale);
            }
            Err(EscrowRefusal::Breaks) => return business_refusal(item, lock),
            Err(EscrowRefusal::Disagrees) => {
                return conflict(format!(
                    "transactions in flight keep {name} within other bounds (floor {}, ceiling {}): retry when they end",
                    standing
                        .and_then(Escrow::standing_floor)
                        .map_or("none".to_owned(), |b| b.stored(true)),
                    standing
                        .and_then(Escrow::standing_ceiling)
                        .map_or("none".to_owned(), |b| b.stored(false)),
                ));
            }
            Err(EscrowRefusal::InFlight) => {
                if seen.reserved_by_others == Others::Expired && !expired.is_empty() {
                    return Refusal::Held {
                        owners: expired.to_vec(),
                        waiting: false,
                    };
                }
                return conflict(format!(
                    "{name} meets its bound for the committed value but not if every transaction in flight on it commits (lowest {}, highest {}): retry",
                    show(standing.map(|s| &s.low)),
                    show(standing.map(|s| &s.high)),
                ));
            }
        }
    }
    business_refusal(item, lock)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ids::TxId;
    use crate::item::FenceEntry;
    use crate::op::Operation;

    fn lock(tx: &TxId, expires_at: u64, op: serde_json::Value) -> Lock {
        Lock {
            tx_id: tx.clone(),
            expires_at,
            began: expires_at - 5,
            op: Operation::from_json("op", &op).expect("op"),
            coordinator: "t".into(),
        }
    }

    #[test]
    fn fence_entry_refuses_a_late_prepare() {
        let tx = TxId::random();
        let mut item = ItemState::default();
        item.fence.insert(
            tx.clone(),
            FenceEntry {
                outcome: FenceOutcome::Committed,
                began: 95, // the lock's: its own entry
            },
        );
        let r = classify_refusal(
            Some(&item),
            &lock(&tx, 100, json!({"set": {"b": 1}})),
            5,
            |_| false,
        );
        assert!(matches!(r, Refusal::Vote(VoteReason::Fenced, _)), "{r:?}");
    }

    #[test]
    fn the_horizon_refuses_a_prepare_that_began_at_or_before_it_unless_the_lock_is_its_own() {
        let tx = TxId::random();
        let mine = lock(&tx, 100, json!({"set": {"b": 1}})); // began 95
        let mut item = ItemState {
            horizon: 95,
            ..Default::default()
        };
        let r = classify_refusal(Some(&item), &mine, 5, |_| false);
        assert!(
            matches!(&r, Refusal::Vote(VoteReason::Fenced, m) if m.contains("horizon")),
            "{r:?}"
        );
        item.horizon = 94;
        assert!(
            !matches!(
                classify_refusal(Some(&item), &mine, 5, |_| false),
                Refusal::Vote(VoteReason::Fenced, _)
            ),
            "a transaction that began after the horizon is not fenced by it"
        );
        item.horizon = 99;
        item.lock = Some(mine.clone());
        assert!(
            !matches!(
                classify_refusal(Some(&item), &mine, 5, |_| false),
                Refusal::Vote(VoteReason::Fenced, _)
            ),
            "a retried prepare finding its own lock is not fenced by a horizon raised meanwhile"
        );
    }

    #[test]
    fn another_lock_is_settled_through_its_owner_never_taken() {
        // Live or expired, the holder is handed to the lock rule (which settles a live one only
        // if its owner decided); the prepare never writes over it.
        let (me, other) = (TxId::random(), TxId::random());
        let item = ItemState {
            lock: Some(lock(&other, 50, json!({"set": {"b": 1}}))),
            ..Default::default()
        };
        let mine = lock(&me, 100, json!({"set": {"b": 1}}));
        for now in [49, 51] {
            assert!(
                matches!(classify_refusal(Some(&item), &mine, now, |_| false),
                    Refusal::Held { owners, waiting: false } if owners.len() == 1 && owners[0].tx_id == other),
                "at {now}"
            );
        }
    }

    #[test]
    fn an_exclusive_operation_waits_for_reservations_and_a_reservation_for_nothing_but_a_lock() {
        let (me, other) = (TxId::random(), TxId::random());
        let item = ItemState {
            attributes: [("b".to_owned(), json!(10))].into(),
            reservations: [(other.clone(), lock(&other, 50, json!({"add": {"b": -1}})))].into(),
            ..Default::default()
        };
        let exclusive = lock(&me, 100, json!({"set": {"b": 1}}));
        assert!(matches!(
            classify_refusal(Some(&item), &exclusive, 10, |_| false),
            Refusal::Held { waiting: true, .. }
        ));
        let paused = ItemState {
            paused_until: 20,
            ..item
        };
        let reserving = lock(&me, 100, json!({"add": {"b": 1}}));
        assert!(matches!(
            classify_refusal(Some(&paused), &reserving, 10, |_| false),
            Refusal::Vote(VoteReason::Conflict, m) if m.contains("paused")
        ));
    }

    #[test]
    fn failed_require_names_the_current_value() {
        let tx = TxId::random();
        let item = ItemState {
            attributes: [("balance".to_owned(), json!(50))].into(),
            ..Default::default()
        };
        let r = classify_refusal(
            Some(&item),
            &lock(
                &tx,
                100,
                json!({"add": {"balance": -100}, "require": {"balance": {"gte": 100}}}),
            ),
            1,
            |_| false,
        );
        match r {
            Refusal::Vote(VoteReason::Condition, m) => {
                assert!(m.contains("balance gte 100 (is 50)"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn add_to_a_non_number_is_invalid() {
        let tx = TxId::random();
        let item = ItemState {
            attributes: [("balance".to_owned(), json!("x"))].into(),
            ..Default::default()
        };
        let r = classify_refusal(
            Some(&item),
            &lock(&tx, 100, json!({"add": {"balance": 1}})),
            1,
            |_| false,
        );
        assert!(matches!(r, Refusal::Vote(VoteReason::Invalid, _)), "{r:?}");
    }

    #[test]
    fn put_on_an_existing_item_fails_its_condition() {
        let tx = TxId::random();
        let r = classify_refusal(
            Some(&ItemState::default()),
            &lock(&tx, 100, json!({"put": {"a": 1}})),
            1,
            |_| false,
        );
        assert!(
            matches!(r, Refusal::Vote(VoteReason::Condition, _)),
            "{r:?}"
        );
    }
}
