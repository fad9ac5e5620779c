//! Reservations (escrow) as conditional writes: what `rules::reserve` and `rules::escrow` mean,
//! spelled as DynamoDB expressions.
//!
//! A reservation of transaction `T` is the map `txRes:<T>` (a lock's fields). Per reserved
//! attribute `a`: `txN:a` (reservations standing), `txNf:a` / `txNc:a` (of those, the ones
//! keeping a floor / a ceiling), `txLo:a` / `txHi:a` (the lowest and highest value `a` could
//! reach), `txFl:a` / `txCe:a` (the floor and ceiling the keepers keep `a` within); `txResN`
//! counts the item's reservations (a lock needs it at 0). Names with `:` never collide with
//! business attributes. DynamoDB conditions compare but cannot add, so the extremes are stored
//! and kept by the update expressions. The escrow stays when the last reservation goes (idle:
//! the extremes back at the value), so a reservation and a release are each one write shape,
//! whatever else stands; an idle escrow out of step with the value (written outside the
//! protocol) refuses the next reservation until `reset_escrow` removes it.
use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use twopc_core::decimal::Decimal;
use twopc_core::item::{Key, Lock, StoredReservation};
use twopc_core::layout::{
    FENCE, HORIZON, LOCK, LOCK_EXPIRES_AT, LOCK_OP, LOCK_SHARD, PAUSED_UNTIL, PLACEHOLDER,
    RESERVATIONS, TOMBSTONE,
};
use twopc_core::op::Escrowed;
use twopc_core::ports::{CompleteWrite, Completion, PortError, PrepareWrite};
use twopc_core::rules::{self, PrepareStep, Seen};

use crate::clauses::{
    Names, add_to, commit_marks, decimal, entry_write, first_key_name, format_mark, hot_mark,
    names, no_own_entry, number, prune_clauses, reservation_name, reserved_by,
};
use crate::codec::to_attr;
use crate::error::corrupt;
use crate::expr::{Expr, update_with_add};
use crate::state::item_state;
use crate::tables::shard_of;
use crate::write::{Write, WriteOutcome, write};

/// What a release of a reservation does with the reserved changes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Give {
    /// Commit: apply them.
    Apply,
    /// Abort: give them back, with the `aborted` entry.
    Back,
    /// A stale duplicate of a committed owner: give them back, no entry.
    Drop,
}

/// The condition and update of one reserved attribute (`rules::escrow` as expressions): its
/// type; an idle escrow at the value (else it is stale); its bounds against the escrowed extreme
/// (or the value, if nothing was ever escrowed: an absent attribute counts as 0); the agreement
/// of its floor and ceiling with the keepers'; the new extremes and counts.
fn reserve_attribute(
    e: &mut Expr,
    attr: &str,
    x: &Escrowed,
    conds: &mut Vec<String>,
    set: &mut Vec<String>,
    add: &mut Vec<String>,
) {
    let a = e.name(attr);
    let n = names(attr);
    let zero = e.value(AttributeValue::N("0".into()));
    let one = e.value(AttributeValue::N("1".into()));
    conds.push(format!(
        "(attribute_not_exists({a}) OR attribute_type({a}, {}))",
        e.value(AttributeValue::S("N".into()))
    ));
    let (count, low, high) = (e.name(&n.count), e.name(&n.low), e.name(&n.high));
    conds.push(format!(
        "(attribute_not_exists({count}) OR {count} > {zero} OR ({low} = {a} AND {high} = {a}) OR (attribute_not_exists({a}) AND {low} = {zero} AND {high} = {zero}))"
    ));
    bound_conditions(e, &a, x, &low, &high, conds);
    keeper_clauses(e, x, &n, (&zero, &one), conds, set, add);
    let start = format!("if_not_exists({a}, {zero})");
    let (dneg, dpos) = (
        e.value(decimal(&x.delta.min_zero())),
        e.value(decimal(&x.delta.max_zero())),
    );
    set.push(format!("{low} = if_not_exists({low}, {start}) + {dneg}"));
    set.push(format!("{high} = if_not_exists({high}, {start}) + {dpos}"));
    add.push(format!("{count} {one}"));
}

/// Each bound of `x` held against the escrowed extreme it limits (`low` the lower bound,
/// `high` the upper), or against the value `a` when nothing was ever escrowed.
fn bound_conditions(
    e: &mut Expr,
    a: &str,
    x: &Escrowed,
    low: &str,
    high: &str,
    conds: &mut Vec<String>,
) {
    for (b, extreme, lower) in [(&x.lower, low, true), (&x.upper, high, false)] {
        let Some(b) = b else {
            continue;
        };
        let symbol = match (lower, b.strict) {
            (true, false) => ">=",
            (true, true) => ">",
            (false, false) => "<=",
            (false, true) => "<",
        };
        // An absent attribute counts as 0: does 0 meet the bound?
        let zero = Decimal::zero().cmp_value(&b.value);
        let absent_ok = match (lower, b.strict) {
            (true, false) => zero.is_ge(),
            (true, true) => zero.is_gt(),
            (false, false) => zero.is_le(),
            (false, true) => zero.is_lt(),
        };
        let v = e.value(decimal(&b.value));
        let fresh = if absent_ok {
            format!("({a} {symbol} {v} OR attribute_not_exists({a}))")
        } else {
            format!("{a} {symbol} {v}")
        };
        conds.push(format!(
            "((attribute_exists({extreme}) AND {extreme} {symbol} {v}) OR (attribute_not_exists({extreme}) AND {fresh}))"
        ));
    }
}

/// The floor and ceiling `x` keeps: each agrees with the keepers' and is counted among them;
/// moving toward a bound others keep, without one of its own, is refused. `(zero, one)` are
/// the placeholders of 0 and 1.
fn keeper_clauses(
    e: &mut Expr,
    x: &Escrowed,
    n: &Names,
    (zero, one): (&str, &str),
    conds: &mut Vec<String>,
    set: &mut Vec<String>,
    add: &mut Vec<String>,
) {
    for (mine, keepers, theirs, moves) in [
        (&x.floor, &n.floors, &n.floor, x.delta.is_negative()),
        (
            &x.ceiling,
            &n.ceilings,
            &n.ceiling,
            x.delta.max_zero() != Decimal::zero(),
        ),
    ] {
        // Placeholders only for what the expression uses: DynamoDB refuses unused ones.
        let none_keep = |e: &mut Expr| {
            let keepers = e.name(keepers);
            let cond = format!("attribute_not_exists({keepers}) OR {keepers} = {zero}");
            (keepers, cond)
        };
        match mine {
            Some(b) => {
                let (keepers, none) = none_keep(e);
                let stored = AttributeValue::S(b.stored(theirs == &n.floor));
                let (theirs, b) = (e.name(theirs), e.value(stored));
                conds.push(format!("({none} OR {theirs} = {b})"));
                set.push(format!("{theirs} = {b}"));
                add.push(format!("{keepers} {one}"));
            }
            // Moving toward a bound others keep, without a bound of its own: refused.
            None if moves => conds.push(format!("({})", none_keep(e).1)),
            None => {}
        }
    }
}

/// A reservation to write: the lock's fields, and the heat mark to write with it.
pub(crate) struct Hold<'a> {
    pub(crate) lock: &'a Lock,
    pub(crate) hot_until: Option<u64>,
}

/// `ParticipantStore::reserve`: one conditional write; refused, a reservation already ours
/// answers as reserved.
pub(crate) async fn reserve(
    client: &Client,
    table: &str,
    key: &Key,
    hold: &Hold<'_>,
    now: u64,
    most: usize,
) -> Result<PrepareWrite, PortError> {
    let lock = hold.lock;
    let escrowed = lock.op.escrow().ok_or_else(|| PortError::Invalid {
        context: format!("reserving for {} in {table}", lock.tx_id),
        message: "the operation does not commute: it must lock".into(),
    })?;
    let (e, w) = reservation_write(key, hold, now, most, &escrowed)?;
    let ctx = || format!("reserving for {} in {table}", lock.tx_id);
    let item = match write(client, table, key, e, w, ctx).await? {
        WriteOutcome::Written(old) => {
            let state = item_state(&old.unwrap_or_default())?;
            return Ok(PrepareWrite::Locked {
                fence: state.fence,
                horizon: state.horizon,
            });
        }
        WriteOutcome::Refused(None) => return Ok(PrepareWrite::Refused(None)),
        WriteOutcome::Refused(Some(item)) => item_state(&item)?,
    };
    let seen = Seen::preparing(Some(&item), lock, now);
    if seen.reserved_by_me && rules::reserve(seen, false) == PrepareStep::Lock {
        // A retry: the reservation stands already, with this operation (with another, the
        // rule refuses it: the classification of the refused write says why).
        return Ok(PrepareWrite::Locked {
            fence: item.fence,
            horizon: item.horizon,
        });
    }
    Ok(PrepareWrite::Refused(Some(Box::new(item))))
}

/// The reservation's write: on an item that exists, is not locked, created or buried, does not
/// fence the transaction, is not paused and has room for one more (`most`), each reserved
/// attribute's escrow ([`reserve_attribute`]); it sets the reservation, the fence map and the
/// horizon if missing, the lock index's entry if missing, and counts it.
fn reservation_write(
    key: &Key,
    hold: &Hold<'_>,
    now: u64,
    most: usize,
    escrowed: &BTreeMap<String, Escrowed>,
) -> Result<(Expr, Write), PortError> {
    let lock = hold.lock;
    let mut e = Expr::new();
    let res = reservation_name(&mut e, &lock.tx_id);
    let lock_value = serde_json::to_value(StoredReservation::of(lock))
        .map_err(|err| corrupt("encoding a reservation", err.to_string()))?;
    let (k, ph, tomb, lk) = (
        e.name(first_key_name(key)),
        e.name(PLACEHOLDER),
        e.name(TOMBSTONE),
        e.name(LOCK),
    );
    let (fence, horizon, pause) = (e.name(FENCE), e.name(HORIZON), e.name(PAUSED_UNTIL));
    let began = e.value(number(lock.began));
    let now_v = e.value(number(now));
    let mut conds = vec![
        format!(
            "attribute_exists({k}) AND attribute_not_exists({ph}) AND attribute_not_exists({tomb})"
        ),
        format!("attribute_not_exists({lk}) AND attribute_not_exists({res})"),
        no_own_entry(&mut e, &lock.tx_id, lock.began),
        format!("(attribute_not_exists({horizon}) OR {horizon} < {began})"),
        format!("(attribute_not_exists({pause}) OR {pause} <= {now_v})"),
        format!(
            "(attribute_not_exists({n}) OR {n} < {})",
            e.value(number(most as u64)),
            n = e.name(RESERVATIONS)
        ),
    ];
    let (shard, expires) = (e.name(LOCK_SHARD), e.name(LOCK_EXPIRES_AT));
    let mut set = vec![
        format!("{res} = {}", e.value(to_attr(&lock_value))),
        format!(
            "{fence} = if_not_exists({fence}, {})",
            e.value(AttributeValue::M(Default::default()))
        ),
        format!(
            "{horizon} = if_not_exists({horizon}, {})",
            e.value(number(0))
        ),
        format_mark(&mut e),
        format!(
            "{shard} = if_not_exists({shard}, {})",
            e.value(AttributeValue::S(shard_of(lock.tx_id.as_str(), "L")))
        ),
        format!(
            "{expires} = if_not_exists({expires}, {})",
            e.value(number(lock.expires_at))
        ),
    ];
    set.extend(hot_mark(&mut e, hold.hot_until));
    let one = e.value(AttributeValue::N("1".into()));
    let mut add = vec![format!("{} {one}", e.name(RESERVATIONS))];
    for (attr, x) in escrowed {
        reserve_attribute(&mut e, attr, x, &mut conds, &mut set, &mut add);
    }
    let w = Write {
        update: update_with_add(&set, &[], &add),
        condition: conds.join(" AND "),
        // The fence and horizon as they were.
        returns: ReturnValue::UpdatedOld,
    };
    Ok((e, w))
}

/// Releases `c.tx`'s reservation: applies its changes or gives them back, in one conditional
/// write (the reservation of `c.op` must stand: another op's is refused), whatever else stands: the escrow moves by this
/// reservation's own changes and counts, and is left idle at the value by the last.
pub(crate) async fn release(
    client: &Client,
    table: &str,
    key: &Key,
    c: &Completion<'_>,
    give: Give,
) -> Result<CompleteWrite, PortError> {
    let ctx = || format!("releasing the reservation of {} in {table}", c.tx);
    let escrowed = c.op.escrow().unwrap_or_default();
    let mut e = Expr::new();
    let res = reservation_name(&mut e, c.tx);
    // What a reservation gives back is its hold's: the write stands only on a reservation of
    // `c.op` (one item named twice may send the abort of the other name's op).
    let op = serde_json::to_value(c.op)
        .map_err(|err| corrupt("encoding an operation", err.to_string()))?;
    let held_op = e.path(&[&StoredReservation::attribute(c.tx), LOCK_OP]);
    let mine = format!(
        "{} AND {held_op} = {}",
        reserved_by(&mut e, c.tx, c.entry.began),
        e.value(to_attr(&op))
    );
    let pruning = prune_clauses(&mut e, c.tx, c.prune, mine);
    let (mut set, mut remove, condition) = (pruning.set, pruning.remove, pruning.condition);
    remove.push(res);
    let minus = e.value(AttributeValue::N("-1".into()));
    let mut add = vec![format!("{} {minus}", e.name(RESERVATIONS))];
    for (attr, d) in &c.op.add {
        let n = names(attr);
        add.push(format!("{} {minus}", e.name(&n.count)));
        if let Some(x) = escrowed.get(attr) {
            if x.floor.is_some() {
                add.push(format!("{} {minus}", e.name(&n.floors)));
            }
            if x.ceiling.is_some() {
                add.push(format!("{} {minus}", e.name(&n.ceilings)));
            }
        }
        if give == Give::Apply {
            set.push(add_to(&mut e, attr, d));
        }
        let (to_low, to_high) = if give == Give::Apply {
            (d.max_zero(), d.min_zero())
        } else {
            (d.min_zero().neg(), d.max_zero().neg())
        };
        let (low, high) = (e.name(&n.low), e.name(&n.high));
        set.push(format!("{low} = {low} + {}", e.value(decimal(&to_low))));
        set.push(format!("{high} = {high} + {}", e.value(decimal(&to_high))));
    }
    let mut condition = condition;
    if give != Give::Drop {
        let (entry_set, no_entry) = entry_write(&mut e, c.tx, &c.entry);
        set.push(entry_set);
        condition = format!("{condition} AND {no_entry}");
    }
    if give == Give::Apply {
        set.extend(commit_marks(&mut e, c.tx));
    }
    let w = Write {
        update: update_with_add(&set, &remove, &add),
        condition,
        returns: ReturnValue::None,
    };
    match write(client, table, key, e, w, ctx).await? {
        WriteOutcome::Written(_) => Ok(CompleteWrite::Done),
        WriteOutcome::Refused(None) => Ok(CompleteWrite::Refused(None)),
        WriteOutcome::Refused(Some(item)) => {
            Ok(CompleteWrite::Refused(Some(Box::new(item_state(&item)?))))
        }
    }
}

/// `ParticipantStore::reset_escrow`: one write removing the escrow of each attribute on
/// which no reservation stands.
pub(crate) async fn reset_escrow(
    client: &Client,
    table: &str,
    key: &Key,
    attributes: &[&str],
) -> Result<(), PortError> {
    let mut e = Expr::new();
    let zero = e.value(AttributeValue::N("0".into()));
    let (mut remove, mut conds) = (vec![], vec![]);
    for attr in attributes {
        let n = names(attr);
        let count = e.name(&n.count);
        conds.push(format!(
            "(attribute_not_exists({count}) OR {count} = {zero})"
        ));
        remove.push(count);
        for name in [
            &n.floors,
            &n.ceilings,
            &n.low,
            &n.high,
            &n.floor,
            &n.ceiling,
        ] {
            remove.push(e.name(name));
        }
    }
    if remove.is_empty() {
        return Ok(());
    }
    let k = e.name(first_key_name(key));
    conds.push(format!("attribute_exists({k})"));
    let w = Write {
        update: format!("REMOVE {}", remove.join(", ")),
        condition: conds.join(" AND "),
        returns: ReturnValue::None,
    };
    // Refused: a reservation stands again, or the item is gone; either way nothing to do.
    write(client, table, key, e, w, || {
        format!("resetting the escrow of an item of {table}")
    })
    .await
    .map(|_| ())
}
