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
pub fn show_key(key: &Key) -> String {
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
/// would get; where the protocol holds the item, [`Refusal::Held`] (the transaction takes the
/// protocol path).
pub fn classify_native_refusal(item: Option<&ItemState>, lock: &Lock, now: u64) -> Refusal {
    let seen = Seen::preparing(item, lock, now);
    let step = match rules::native_write(seen, lock.op.creates()) {
        rules::NativeStep::Apply => PrepareStep::Lock,
        rules::NativeStep::Refuse(r) => PrepareStep::Refuse(r),
        rules::NativeStep::Protocol => {
            return Refusal::Held {
                owners: vec![],
                waiting: false,
            };
        }
    };
    classify_step(item, lock, now, seen, Mode::Exclusive, step)
}

/// The one classification of a refused write, once its rule has said why.
fn classify_step(
    item: Option<&ItemState>,
    lock: &Lock,
    now: u64,
    seen: Seen,
    mode: Mode,
    step: PrepareStep,
) -> Refusal {
    let vote = |reason, message: String| Refusal::Vote(reason, message);
    let refusal = match step {
        PrepareStep::Refuse(r) => r,
        // The protocol admits it, so one of the operation's own conditions failed.
        PrepareStep::Lock => PrepareRefusal::Business,
    };
    let reservations = |expired_only: bool| -> Vec<Lock> {
        item.map(|i| {
            i.reservations
                .iter()
                .filter(|(id, r)| **id != lock.tx_id && (!expired_only || now > r.expires_at))
                .map(|(_, r)| r.clone())
                .collect()
        })
        .unwrap_or_default()
    };
    let lock_owner = || {
        item.and_then(|i| i.lock.clone())
            .into_iter()
            .collect::<Vec<_>>()
    };
    match refusal {
        PrepareRefusal::Fenced(outcome) => vote(
            VoteReason::Fenced,
            format!(
                "transaction {} already {} on this item",
                lock.tx_id,
                match outcome {
                    FenceOutcome::Committed => "committed",
                    FenceOutcome::Aborted => "aborted",
                }
            ),
        ),
        PrepareRefusal::BelowHorizon => vote(
            VoteReason::Fenced,
            format!(
                "transaction {} began at or before this item's fence horizon ({} ms): it ended here already, or more than the fence's capacity of later transactions ended here before this prepare",
                lock.tx_id,
                item.map_or(0, |i| i.horizon)
            ),
        ),
        // A live lock's owner may already have decided: settling it here is the lock rule's
        // answer too, and it spares the newcomer a wait for the lease.
        PrepareRefusal::Locked => Refusal::Held {
            owners: lock_owner(),
            waiting: false,
        },
        PrepareRefusal::ResolveOwner => {
            let mut owners = lock_owner();
            if owners.is_empty() {
                owners = reservations(true);
            }
            Refusal::Held {
                owners,
                waiting: false,
            }
        }
        PrepareRefusal::Reserved => Refusal::Held {
            owners: reservations(false),
            waiting: true,
        },
        PrepareRefusal::Full => vote(
            VoteReason::Conflict,
            format!(
                "{} transactions hold reservations on this item, the most it takes (TWOPC_MAX_RESERVATIONS): retry",
                item.map_or(0, |i| i.reservations.len())
            ),
        ),
        PrepareRefusal::Paused => vote(
            VoteReason::Conflict,
            "new reservations of this item are paused while an exclusive operation waits for it: retry".to_owned(),
        ),
        PrepareRefusal::NotFound(shape) => vote(
            VoteReason::NotFound,
            match shape {
                Shape::Tombstone => "no such item (it was deleted)",
                Shape::Placeholder => "no such item (it is being created)",
                Shape::Absent | Shape::Real => "no such item",
            }
            .to_owned(),
        ),
        PrepareRefusal::OtherOperation => vote(
            VoteReason::Invalid,
            format!(
                "transaction {} already holds this item with another operation: one item named twice (two spellings of its key?); refused, the hold keeps its operation",
                lock.tx_id
            ),
        ),
        PrepareRefusal::Exists => vote(
            VoteReason::Condition,
            "put: the item already exists".to_owned(),
        ),
        PrepareRefusal::Business => match mode {
            Mode::Exclusive => business_refusal(item, lock),
            Mode::Reserved => escrow_refusal(item, lock, seen, &reservations(true)),
        },
    }
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
