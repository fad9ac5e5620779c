//! The conditions and effects of the in-memory writes, evaluated as DynamoDB evaluates them:
//! comparisons, exact sums, an operation's effects, the commit marks, a holder's release, a
//! reservation's changes given back.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::decimal::Decimal;
use crate::ids::TxId;
use crate::item::{FenceEntry, ItemState, Key, Lock, canonical_key};
use crate::layout::{LAST_TX, VERSION};
use crate::message::Prune;
use crate::op::{Comparator, Condition, Operation};
use crate::ports::{Completion, PortError};
use crate::rules::{self, EscrowSeen, Seen};

pub(super) fn poisoned(what: &str) -> PortError {
    PortError::Fatal {
        context: format!("in-memory {what}"),
        source: "a lock was poisoned by a panic".into(),
    }
}

/// Where an item is kept: its canonical key, as DynamoDB keys items (a number by its value, so
/// `{"id": 1}` and `{"id": 1.0}` are one item).
pub(super) fn key_id(key: &Key) -> String {
    serde_json::to_string(&canonical_key(key)).unwrap_or_default()
}

/// The item as a step of `tx` sees it at `now` (holders' expiry does not matter to admission;
/// a pause of reservations does).
pub(super) fn seen(item: Option<&ItemState>, tx: &TxId, began: u64, now: u64) -> Seen {
    item.map_or(Seen::ABSENT, |i| Seen::of(i, tx, began, now))
}

/// DynamoDB's comparison of an attribute with a value: numbers numerically, strings by their
/// UTF-8 bytes; `=` and `<>` also for other values of the same type. Values of different types,
/// and a missing attribute, are unequal to anything and unordered (so `<>` holds for them; the
/// contract suite found this on DynamoDB Local).
pub(super) fn compares(attr: Option<&Value>, c: Comparator, v: &Value) -> bool {
    let Some(a) = attr else {
        return c == Comparator::Ne;
    };
    let order = match (a, v) {
        (Value::Number(_), Value::Number(_)) => {
            number_of(a).zip(number_of(v)).map(|(x, y)| x.cmp_value(&y))
        }
        (Value::String(x), Value::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ if std::mem::discriminant(a) == std::mem::discriminant(v) => {
            return match c {
                Comparator::Eq => a == v,
                Comparator::Ne => a != v,
                _ => false,
            };
        }
        _ => return c == Comparator::Ne,
    };
    let Some(o) = order else { return false };
    match c {
        Comparator::Eq => o == Ordering::Equal,
        Comparator::Ne => o != Ordering::Equal,
        Comparator::Lt => o == Ordering::Less,
        Comparator::Lte => o != Ordering::Greater,
        Comparator::Gt => o == Ordering::Greater,
        Comparator::Gte => o != Ordering::Less,
    }
}

/// The operation's own conditions on the item as it is (what prepare's condition adds to the
/// protocol's): every `add` target absent or a number, every `require` holding (for a creating
/// operation, those on key attributes are implied by the create).
pub(super) fn business_holds(op: &Operation, key: &Key, attrs: &BTreeMap<String, Value>) -> bool {
    op.add
        .keys()
        .all(|n| attrs.get(n).is_none_or(Value::is_number))
        && op
            .require
            .iter()
            .filter(|(n, _)| !(op.creates() && key.contains_key(*n)))
            .all(|(n, c)| match c {
                Condition::Exists => attrs.contains_key(n),
                Condition::NotExists => !attrs.contains_key(n),
                Condition::Compare(cmp, v) => compares(attrs.get(n), *cmp, v),
            })
}

/// `if_not_exists(attr, 0) + delta`, exactly, or DynamoDB's refusal of a result it cannot store.
pub(super) fn add(current: Option<&Value>, delta: &Decimal) -> Result<Value, String> {
    let base = current.and_then(number_of).unwrap_or_else(Decimal::zero);
    base.checked_add(delta)
        .map(|d| d.to_json())
        .map_err(|e| format!("Number overflow: {e}"))
}

pub(super) fn apply(
    item: &mut ItemState,
    key: &Key,
    tx: &TxId,
    op: &Operation,
) -> Result<(), PortError> {
    let attrs = &mut item.attributes;
    for (n, v) in &op.set {
        attrs.insert(n.clone(), v.clone());
    }
    for (n, v) in op
        .put
        .iter()
        .flatten()
        .filter(|(n, _)| !key.contains_key(*n))
    {
        attrs.insert(n.clone(), v.clone());
    }
    for (n, d) in &op.add {
        let sum = add(attrs.get(n), d).map_err(|message| PortError::Invalid {
            context: format!("committing {tx}"),
            message,
        })?;
        attrs.insert(n.clone(), sum);
    }
    for n in &op.remove {
        attrs.remove(n);
    }
    bump(item, tx);
    item.placeholder = false; // a put's placeholder is now the item
    Ok(())
}

pub(super) fn bump(item: &mut ItemState, tx: &TxId) {
    let version = item
        .attributes
        .get(VERSION)
        .and_then(Value::as_u64)
        .unwrap_or(0);
    item.attributes
        .insert(VERSION.into(), Value::from(version + 1));
    item.attributes
        .insert(LAST_TX.into(), Value::String(tx.to_string()));
}

/// The holder's release: the lock or reservation goes (a reservation's escrow with it, as
/// `applied` says whether its changes were just applied), the entry (if any) is written, the
/// pruned entries go and the horizon rises to the prune's; a placeholder becomes a tombstone.
pub(super) fn release(
    item: &mut ItemState,
    tx: &TxId,
    applied: bool,
    entry: Option<FenceEntry>,
    prune: Option<&Prune>,
) {
    item.lock = None;
    if let Some(r) = item.reservations.remove(tx) {
        give_back(item, &r.op, applied);
    }
    if let Some(p) = prune {
        for id in p.ids.iter().filter(|id| *id != tx) {
            item.fence.remove(id);
        }
        item.horizon = item.horizon.max(p.horizon);
    }
    if let Some(e) = entry {
        item.fence.insert(tx.clone(), e);
    }
    if item.placeholder {
        item.placeholder = false;
        item.tombstone = true;
    }
}

/// Whether `tx`, begun at `began`, holds the item (its lock or a reservation).
pub(super) fn held(item: &ItemState, tx: &TxId, began: u64) -> bool {
    let mine = |l: &Lock| l.is_of(tx, began);
    item.lock.as_ref().is_some_and(mine) || item.reservations.get(tx).is_some_and(mine)
}

/// Whether the holder's release of `c` may write: `c.tx` holds the item, and no fence entry
/// stands under its id where its own is to go (a former transaction's is retired first).
pub(super) fn releases(item: &ItemState, c: &Completion<'_>) -> bool {
    held(item, c.tx, c.entry.began) && !item.fence.contains_key(c.tx)
}

/// The escrow of a released reservation of `op`, whose changes the value now holds (`applied`:
/// committed just before) or never will: each extreme keeps only what the remaining
/// reservations could still do (the last leaves them at the value, idle).
pub(super) fn give_back(item: &mut ItemState, op: &Operation, applied: bool) {
    let escrowed = op.escrow().unwrap_or_default();
    for (name, d) in &op.add {
        let Some(s) = item.escrow.get_mut(name) else {
            continue;
        };
        s.count = s.count.saturating_sub(1);
        if let Some(e) = escrowed.get(name) {
            s.floors = s.floors.saturating_sub(u64::from(e.floor.is_some()));
            s.ceilings = s.ceilings.saturating_sub(u64::from(e.ceiling.is_some()));
        }
        let (low, high) = if applied {
            (d.max_zero(), d.min_zero())
        } else {
            (d.min_zero().neg(), d.max_zero().neg())
        };
        s.low = s.low.checked_add(&low).unwrap_or_else(|_| s.low.clone());
        s.high = s.high.checked_add(&high).unwrap_or_else(|_| s.high.clone());
    }
}

/// Whether a reservation of `op` may stand beside what `item` holds: each reserved attribute
/// absent or a number, and admitted by [`rules::escrow`] (the conditions the DynamoDB adapter
/// spells).
pub(super) fn escrow_admits(item: &ItemState, op: &Operation) -> bool {
    op.escrow().is_some_and(|escrowed| {
        escrowed.iter().all(|(name, e)| {
            EscrowSeen::of(item, name, e).is_some_and(|seen| rules::escrow(seen).is_ok())
        })
    })
}

pub(super) fn number_of(v: &Value) -> Option<Decimal> {
    match v {
        Value::Number(n) => Decimal::parse(&n.to_string()).ok(),
        _ => None,
    }
}

/// Whether the holder's pruning release may write: the horizon is not above the planned one (a
/// lock-free abort may have raised it since the prepare).
pub(super) fn prune_fits(item: &ItemState, prune: Option<&Prune>) -> bool {
    prune.is_none_or(|p| item.horizon <= p.horizon)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A JSON number from its text (a `json!` literal would pass through `f64`).
    fn n(text: &str) -> Value {
        serde_json::from_str(text).expect("number")
    }

    #[test]
    fn sums_are_exact_and_overflow_is_refused_as_dynamodb_refuses_it() {
        let d = |s: &str| Decimal::parse(s).expect("decimal");
        assert_eq!(add(Some(&n("0.1")), &d("0.2")), Ok(n("0.3")));
        let debit = add(None, &d("-2.50")).expect("sum");
        assert_eq!(
            number_of(&debit).map(|x| x.cmp_value(&d("-2.5"))),
            Some(Ordering::Equal)
        );
        let big = "99999999999999999999999999999999999999";
        assert!(
            add(Some(&n("0.1")), &d(big)).is_err(),
            "39 significant digits"
        );
        let sum = add(Some(&n("1")), &d(big)).expect("one significant digit");
        assert_eq!(
            number_of(&sum).map(|x| x.cmp_value(&d("1E+38"))),
            Some(Ordering::Equal)
        );
    }

    #[test]
    fn comparisons_follow_dynamodb() {
        assert!(compares(Some(&n("1.50")), Comparator::Eq, &n("1.5")));
        assert!(compares(Some(&json!(10)), Comparator::Gt, &n("9.99")));
        assert!(compares(Some(&json!("b")), Comparator::Gt, &json!("a")));
        assert!(!compares(Some(&json!("1")), Comparator::Eq, &json!(1)));
        assert!(compares(Some(&json!("1")), Comparator::Ne, &json!(1)));
        assert!(compares(None, Comparator::Ne, &json!(1)));
        assert!(!compares(None, Comparator::Eq, &json!(1)));
    }
}
