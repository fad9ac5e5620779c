//! Reservations (escrow) as conditional writes: what `rules::reserve` and the bounds of
//! `Operation::escrow` mean, spelled as DynamoDB expressions.
//!
//! A reservation of transaction `T` is the map `txRes:<T>` (a lock's fields). Per reserved
//! attribute `a`: `txN:a` (reservations standing), `txLo:a` / `txHi:a` (the lowest and highest
//! value `a` could reach), `txFl:a` / `txCe:a` (the floor and ceiling they keep `a` within);
//! `txResN` counts the item's reservations (a lock needs it at 0). Names with `:` never collide
//! with business attributes. DynamoDB conditions compare but cannot add, so the extremes are
//! stored and kept by the update expressions; the last release on an attribute removes its
//! escrow, so a first reservation starts from the value (`if_not_exists`): one write shape for a
//! reservation whether or not others stand.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use twopc_core::decimal::Decimal;
use twopc_core::item::{ItemState, Key, Lock};
use twopc_core::layout::{
    ESCROW_CEILING_PREFIX, ESCROW_COUNT_PREFIX, ESCROW_FLOOR_PREFIX, ESCROW_HIGH_PREFIX,
    ESCROW_LOW_PREFIX, FENCE, HORIZON, LAST_TX, LOCK, LOCK_EXPIRES_AT, LOCK_SHARD, PAUSED_UNTIL,
    PLACEHOLDER, RESERVATION_PREFIX, RESERVATIONS, TOMBSTONE, VERSION, prefixed,
};
use twopc_core::op::{Comparator, Condition, Escrowed, Operation};
use twopc_core::ports::{CompleteWrite, Completion, PortError, PrepareWrite};

use crate::codec::to_attr;
use crate::error::corrupt;
use crate::expr::{Expr, update_with_add};
use crate::items::{
    DynamoItems, Outcome, Write, entry, first_key_name, item_state, number, prune_clauses,
};
use crate::tables::shard_of;

/// How many writes a release makes before it leaves the transaction to the sweeper, when its
/// guess of whether it is the last reservation on an attribute keeps proving wrong. Each refusal
/// returns the counts as they stand, so a retry is wrong only if a reservation came or went in
/// the round trip since. On a hot item (the bench's hot keys: tens of reservations a second on
/// one item) four attempts ran out for about one transaction in a thousand, leaving it
/// `COMMITTING` until the sweeper's next pass; sixteen did not run out once in the same runs, and
/// the extra attempts cost nothing unless they are needed.
const RELEASE_ATTEMPTS: usize = 16;

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

fn decimal(d: &Decimal) -> AttributeValue {
    AttributeValue::N(d.to_string())
}

/// The attribute names of one reserved attribute's escrow (placeholders are made only for the
/// ones an expression uses: DynamoDB refuses unused ones).
struct Names {
    count: String,
    low: String,
    high: String,
    floor: String,
    ceiling: String,
}

fn names(attr: &str) -> Names {
    Names {
        count: prefixed(ESCROW_COUNT_PREFIX, attr),
        low: prefixed(ESCROW_LOW_PREFIX, attr),
        high: prefixed(ESCROW_HIGH_PREFIX, attr),
        floor: prefixed(ESCROW_FLOOR_PREFIX, attr),
        ceiling: prefixed(ESCROW_CEILING_PREFIX, attr),
    }
}

/// A `require` value of `attr` with comparator `cmp`, if the operation has one.
fn bound(op: &Operation, attr: &str, cmp: Comparator) -> Option<AttributeValue> {
    match op.require.get(attr) {
        Some(Condition::Compare(c, v)) if *c == cmp => Some(to_attr(v)),
        _ => None,
    }
}

/// The condition and update of one reserved attribute: its type, its bounds against the
/// escrowed extreme (or the value, if nothing is escrowed yet: an absent attribute counts as 0),
/// the agreement of its floor and ceiling with the standing ones, and the new extremes.
fn reserve_attribute(
    e: &mut Expr,
    op: &Operation,
    attr: &str,
    x: &Escrowed,
    conds: &mut Vec<String>,
    set: &mut Vec<String>,
) {
    let a = e.name(attr);
    let n = names(attr);
    let zero = e.value(AttributeValue::N("0".into()));
    conds.push(format!(
        "(attribute_not_exists({a}) OR attribute_type({a}, {}))",
        e.value(AttributeValue::S("N".into()))
    ));
    let zero_meets = |v: &AttributeValue, want: std::cmp::Ordering| match v {
        AttributeValue::N(text) => Decimal::parse(text)
            .map(|d| Decimal::zero().cmp_value(&d) != want)
            .unwrap_or(false),
        _ => false,
    };
    for (cmp, extreme, symbol, worse) in [
        (Comparator::Gte, &n.low, ">=", std::cmp::Ordering::Less),
        (Comparator::Lte, &n.high, "<=", std::cmp::Ordering::Greater),
    ] {
        let Some(v) = bound(op, attr, cmp) else {
            continue;
        };
        let extreme = e.name(extreme);
        let absent_ok = zero_meets(&v, worse);
        let v = e.value(v);
        let fresh = if absent_ok {
            format!("({a} {symbol} {v} OR attribute_not_exists({a}))")
        } else {
            format!("{a} {symbol} {v}")
        };
        conds.push(format!(
            "((attribute_exists({extreme}) AND {extreme} {symbol} {v}) OR (attribute_not_exists({extreme}) AND {fresh}))"
        ));
    }
    for (mine, theirs, moves) in [
        (&x.floor, &n.floor, x.delta.is_negative()),
        (
            &x.ceiling,
            &n.ceiling,
            x.delta.max_zero() != Decimal::zero(),
        ),
    ] {
        match mine {
            Some(b) => {
                let (theirs, b) = (e.name(theirs), e.value(decimal(b)));
                conds.push(format!(
                    "(attribute_not_exists({theirs}) OR {theirs} = {b})"
                ));
                set.push(format!("{theirs} = {b}"));
            }
            // Moving toward a bound others keep, without a bound of its own: refused.
            None if moves => conds.push(format!("attribute_not_exists({})", e.name(theirs))),
            None => {}
        }
    }
    let start = format!("if_not_exists({a}, {zero})");
    let (dneg, dpos) = (
        e.value(decimal(&x.delta.min_zero())),
        e.value(decimal(&x.delta.max_zero())),
    );
    let (low, high) = (e.name(&n.low), e.name(&n.high));
    set.push(format!("{low} = if_not_exists({low}, {start}) + {dneg}"));
    set.push(format!("{high} = if_not_exists({high}, {start}) + {dpos}"));
}

impl DynamoItems {
    /// `ParticipantStore::reserve`: one conditional write; refused, a reservation already ours
    /// answers as reserved.
    pub(crate) async fn reserve_item(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
        now: u64,
    ) -> Result<PrepareWrite, PortError> {
        let escrowed = lock.op.escrow().ok_or_else(|| PortError::Invalid {
            context: format!("reserving for {} in {table}", lock.tx_id),
            message: "the operation does not commute: it must lock".into(),
        })?;
        let mut e = Expr::new();
        let res = e.name(&prefixed(RESERVATION_PREFIX, lock.tx_id.as_str()));
        let lock_value = serde_json::to_value(lock)
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
            format!(
                "attribute_not_exists({})",
                e.path(&[FENCE, lock.tx_id.as_str()])
            ),
            format!("(attribute_not_exists({horizon}) OR {horizon} < {began})"),
            format!("(attribute_not_exists({pause}) OR {pause} <= {now_v})"),
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
            format!(
                "{shard} = if_not_exists({shard}, {})",
                e.value(AttributeValue::S(shard_of(lock.tx_id.as_str(), "L")))
            ),
            format!(
                "{expires} = if_not_exists({expires}, {})",
                e.value(number(lock.expires_at))
            ),
        ];
        let one = e.value(AttributeValue::N("1".into()));
        let mut add = vec![format!("{} {one}", e.name(RESERVATIONS))];
        for (attr, x) in &escrowed {
            reserve_attribute(&mut e, &lock.op, attr, x, &mut conds, &mut set);
            add.push(format!("{} {one}", e.name(&names(attr).count)));
        }
        let w = Write {
            update: update_with_add(&set, &[], &add),
            condition: conds.join(" AND "),
            // The fence and horizon as they were, and how many reservations stood.
            returns: ReturnValue::UpdatedOld,
        };
        let ctx = || format!("reserving for {} in {table}", lock.tx_id);
        let item = match self.write(table, key, e, w, ctx).await? {
            Outcome::Written(old) => {
                let old = old.unwrap_or_default();
                let shared =
                    matches!(old.get(RESERVATIONS), Some(AttributeValue::N(n)) if n != "0");
                let state = item_state(&old)?;
                return Ok(PrepareWrite::Locked {
                    fence: state.fence,
                    horizon: state.horizon,
                    shared,
                });
            }
            Outcome::Refused(None) => return Ok(PrepareWrite::Refused(None)),
            Outcome::Refused(Some(item)) => item_state(&item)?,
        };
        if item.reservations.contains_key(&lock.tx_id) {
            // A retry: the reservation stands already.
            return Ok(PrepareWrite::Locked {
                shared: item.reservations.len() > 1,
                fence: item.fence,
                horizon: item.horizon,
            });
        }
        Ok(PrepareWrite::Refused(Some(Box::new(item))))
    }

    /// Releases `c.tx`'s reservation: applies its changes or gives them back, in one conditional
    /// write. Whether it is the last reservation on each attribute decides the write's shape
    /// (the last removes the attribute's escrow); the first attempt guesses from `c.shared`, a
    /// refusal that still finds the reservation tells the counts, and the write is made again.
    pub(crate) async fn release_reservation(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
        give: Give,
    ) -> Result<CompleteWrite, PortError> {
        let ctx = || format!("releasing the reservation of {} in {table}", c.tx);
        let mut last: BTreeMap<&String, bool> = c.op.add.keys().map(|a| (a, !c.shared)).collect();
        for _ in 0..RELEASE_ATTEMPTS {
            let mut e = Expr::new();
            let res = e.name(&prefixed(RESERVATION_PREFIX, c.tx.as_str()));
            let pruning = prune_clauses(&mut e, c.tx, c.prune, format!("attribute_exists({res})"));
            let (mut set, mut remove, mut condition) =
                (pruning.set, pruning.remove, pruning.condition);
            remove.push(res);
            let minus = e.value(AttributeValue::N("-1".into()));
            let mut add = vec![format!("{} {minus}", e.name(RESERVATIONS))];
            for (attr, d) in &c.op.add {
                let n = names(attr);
                let count = e.name(&n.count);
                let is_last = last.get(attr).copied().unwrap_or(true);
                let one = e.value(AttributeValue::N("1".into()));
                condition = format!(
                    "{condition} AND {count} {} {one}",
                    if is_last { "=" } else { ">" }
                );
                if give == Give::Apply {
                    let a = e.name(attr);
                    let zero = e.value(AttributeValue::N("0".into()));
                    set.push(format!(
                        "{a} = if_not_exists({a}, {zero}) + {}",
                        e.value(decimal(d))
                    ));
                }
                if is_last {
                    remove.push(count);
                    for name in [&n.low, &n.high, &n.floor, &n.ceiling] {
                        remove.push(e.name(name));
                    }
                    continue;
                }
                let (to_low, to_high) = if give == Give::Apply {
                    (d.max_zero(), d.min_zero())
                } else {
                    (d.min_zero().neg(), d.max_zero().neg())
                };
                let (low, high) = (e.name(&n.low), e.name(&n.high));
                set.push(format!("{low} = {low} + {}", e.value(decimal(&to_low))));
                set.push(format!("{high} = {high} + {}", e.value(decimal(&to_high))));
                add.push(format!("{count} {minus}"));
            }
            if give != Give::Drop {
                set.push(format!(
                    "{} = {}",
                    e.path(&[FENCE, c.tx.as_str()]),
                    e.value(entry(&c.entry))
                ));
            }
            if give == Give::Apply {
                let ver = e.name(VERSION);
                set.push(format!(
                    "{ver} = if_not_exists({ver}, {}) + {}",
                    e.value(AttributeValue::N("0".into())),
                    e.value(AttributeValue::N("1".into()))
                ));
                set.push(format!(
                    "{} = {}",
                    e.name(LAST_TX),
                    e.value(AttributeValue::S(c.tx.to_string()))
                ));
            }
            let w = Write {
                update: update_with_add(&set, &remove, &add),
                condition,
                returns: ReturnValue::None,
            };
            let refused = match self.write(table, key, e, w, ctx).await? {
                Outcome::Written(_) => return Ok(CompleteWrite::Done),
                Outcome::Refused(None) => return Ok(CompleteWrite::Refused(None)),
                Outcome::Refused(Some(item)) => item_state(&item)?,
            };
            if !retry_with_counts(&refused, c, &mut last) {
                return Ok(CompleteWrite::Refused(Some(Box::new(refused))));
            }
        }
        Err(PortError::Retryable {
            context: ctx(),
            source: "the reservation counts kept changing under the release".into(),
        })
    }
}

/// After a refused release: whether the reservation still stands with a horizon the prune fits
/// (so only the guess of which releases are last was wrong), and the right guess from the counts.
fn retry_with_counts(
    item: &ItemState,
    c: &Completion<'_>,
    last: &mut BTreeMap<&String, bool>,
) -> bool {
    let stands = item.reservations.contains_key(c.tx);
    let prune_fits = c.prune.is_none_or(|p| item.horizon <= p.horizon);
    if !stands || !prune_fits {
        return false;
    }
    for (attr, is_last) in last.iter_mut() {
        *is_last = item.escrow.get(*attr).is_none_or(|s| s.count <= 1);
    }
    true
}
