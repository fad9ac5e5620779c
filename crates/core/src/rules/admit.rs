//! Whether a step may take an item: [`prepare`] (the exclusive lock), [`reserve`] and
//! [`escrow`] (a commuting operation's reservation and its bounds).

use std::cmp::Ordering;

use crate::decimal::Decimal;
use crate::item::{Escrow, FenceOutcome, ItemState};
use crate::op::{Bound, Escrowed};

use super::{Holder, Others, Seen, Shape};

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
    /// ([`resolve`](super::resolve)), then try again.
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
    /// The transaction holds the item already (its lock or reservation) with another
    /// operation: not a retry but the same item named twice (two spellings of one key). Refused,
    /// never overwritten: the hold keeps its operation and the transaction cannot vote yes here.
    OtherOperation,
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

/// The prepare rule. Checked in this order: the transaction's own fence entry; its own hold
/// with another operation (refused); its own lock (a retried prepare); the horizon; another's lock (live: `Locked`, whose owner the participant still settles by its record if it has decided; expired: resolve the owner);
/// then the item's shape against the operation (`creates`: a `put`, which needs the item absent
/// or a tombstone; anything else needs a real item). A refused write reads as
/// [`PrepareRefusal::Business`] when this says `Lock`: the operation's own conditions failed.
pub fn prepare(seen: Seen, creates: bool) -> PrepareStep {
    use PrepareRefusal::*;
    let refuse = PrepareStep::Refuse;
    if let Some(outcome) = seen.entry {
        return refuse(Fenced(outcome));
    }
    if seen.held_by_me() && seen.other_op {
        return refuse(OtherOperation);
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

/// The reservation rule, for a commuting operation: like [`prepare`] (its own hold with another
/// operation refused, its own reservation a retry), but other reservations may
/// stand beside it, only a lock (or a former transaction's reservation under its id:
/// [`Seen::former_reservation`]) excludes it, and it waits while an exclusive operation does or
/// while the item holds as many reservations as it takes (`full`). Its own bounds against the
/// escrowed extremes are the operation's own conditions ([`escrow`]): a refused write that this
/// admits failed one of them (`Business`).
pub fn reserve(seen: Seen, full: bool) -> PrepareStep {
    use PrepareRefusal::*;
    let refuse = PrepareStep::Refuse;
    if let Some(outcome) = seen.entry {
        return refuse(Fenced(outcome));
    }
    if seen.held_by_me() && seen.other_op {
        return refuse(OtherOperation);
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
    if seen.former_reservation {
        // A former transaction under this id holds the one reservation the id has room for:
        // the lock rule settles it (its record is gone, or a later transaction's) first.
        return refuse(ResolveOwner);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::fixtures::*;
    use crate::rules::*;

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
}
