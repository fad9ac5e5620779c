//! The clauses every participant write shares, as DynamoDB expressions: where a fence entry or
//! a reservation is, who owns the lock, a holder's release and its pruning, an operation's own
//! conditions and effects, the commit marks, and the names of a reserved attribute's escrow.
//! The items, the reservations and the native transactions spell their writes with these.

use aws_sdk_dynamodb::types::AttributeValue;
use twopc_core::decimal::Decimal;
use twopc_core::ids::TxId;
use twopc_core::item::{FenceEntry, FenceOutcome, Key, StoredReservation};
use twopc_core::layout::{
    ESCROW_CEILING_PREFIX, ESCROW_CEILINGS_PREFIX, ESCROW_COUNT_PREFIX, ESCROW_FLOOR_PREFIX,
    ESCROW_FLOORS_PREFIX, ESCROW_HIGH_PREFIX, ESCROW_LOW_PREFIX, FENCE, FORMAT, FORMAT_VERSION,
    HORIZON, HOT_UNTIL, LAST_TX, LOCK, LOCK_BEGAN, LOCK_EXPIRES_AT, LOCK_SHARD, LOCK_TX,
    RESERVATION_BEGAN, VERSION, prefixed,
};
use twopc_core::message::Prune;
use twopc_core::op::{Condition, Operation};

use crate::codec::{Item, to_attr, to_item};
use crate::expr::Expr;

/// `a = a + d`, an absent attribute counting as 0.
pub(crate) fn add_to(e: &mut Expr, attr: &str, d: &Decimal) -> String {
    let a = e.name(attr);
    format!(
        "{a} = if_not_exists({a}, {}) + {}",
        e.value(AttributeValue::N("0".into())),
        e.value(AttributeValue::N(d.to_string()))
    )
}

/// What every commit writes beside its operation, for readers and the stream: `txVersion` + 1,
/// `lastTx`.
pub(crate) fn commit_marks(e: &mut Expr, tx: &TxId) -> [String; 2] {
    let ver = e.name(VERSION);
    [
        format!(
            "{ver} = if_not_exists({ver}, {}) + {}",
            e.value(AttributeValue::N("0".into())),
            e.value(AttributeValue::N("1".into()))
        ),
        format!(
            "{} = {}",
            e.name(LAST_TX),
            e.value(AttributeValue::S(tx.to_string()))
        ),
    ]
}

pub(crate) fn key_item(key: &Key) -> Item {
    to_item(key)
}

pub(crate) fn first_key_name(key: &Key) -> &str {
    key.keys().next().map_or("", String::as_str)
}

/// A fence entry's stored number ([`FenceEntry::stored`]).
pub(crate) fn entry(e: &FenceEntry) -> AttributeValue {
    AttributeValue::N(e.stored())
}

/// `txFence.<tx's short id>`: where `tx`'s fence entry is.
pub(crate) fn fence_path(e: &mut Expr, tx: &TxId) -> String {
    e.path(&[FENCE, &tx.short()])
}

/// The fence holds no entry of `tx` that began at `began` (`rules::Seen::entry`): none under
/// its id, or a former transaction's (another `began`, either outcome).
pub(crate) fn no_own_entry(e: &mut Expr, tx: &TxId, began: u64) -> String {
    let path = fence_path(e, tx);
    let [committed, aborted] = [FenceOutcome::Committed, FenceOutcome::Aborted]
        .map(|outcome| e.value(entry(&FenceEntry { outcome, began })));
    format!("(attribute_not_exists({path}) OR NOT ({path} IN ({committed}, {aborted})))")
}

/// Writing `entry` as `tx`'s fence entry: the `SET` clause, and its condition that no entry
/// stands under the id (a former transaction's is retired first: `ParticipantStore::retire`),
/// so that no entry is ever overwritten without raising the horizon over it.
pub(crate) fn entry_write(e: &mut Expr, tx: &TxId, entry_: &FenceEntry) -> (String, String) {
    let path = fence_path(e, tx);
    let set = format!("{path} = {}", e.value(entry(entry_)));
    (set, format!("attribute_not_exists({path})"))
}

/// `txRes:<tx's short id>`: where `tx`'s reservation is ([`StoredReservation::attribute`]).
pub(crate) fn reservation_name(e: &mut Expr, tx: &TxId) -> String {
    e.name(&StoredReservation::attribute(tx))
}

/// `txHot = <until>`: the heat mark a prepare writes where its coordinator saw the item
/// contended (`rules::heat`); nothing without one.
pub(crate) fn hot_mark(e: &mut Expr, hot_until: Option<u64>) -> Option<String> {
    hot_until.map(|until| format!("{} = {}", e.name(HOT_UNTIL), e.value(number(until))))
}

/// `txFmt = 2`: the format marker every write that may create a fence writes with it (see
/// `write::write`, whose condition refuses a fence without it).
pub(crate) fn format_mark(e: &mut Expr) -> String {
    format!("{} = {}", e.name(FORMAT), e.value(number(FORMAT_VERSION)))
}

pub(crate) fn number(n: u64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

/// `#lock.#txId = :tx AND #lock.#began = :b`: the lock is the transaction's, its id and its
/// `began` (an idempotency key's later transaction under the same id is another).
pub(crate) fn owned_by(e: &mut Expr, tx: &TxId, began: u64) -> String {
    let path = e.path(&[LOCK, LOCK_TX]);
    let began_path = e.path(&[LOCK, LOCK_BEGAN]);
    format!(
        "{path} = {} AND {began_path} = {}",
        e.value(AttributeValue::S(tx.to_string())),
        e.value(number(began))
    )
}

/// `#res.#b = :b`: `tx`'s reservation stands, of the transaction that began at `began`.
pub(crate) fn reserved_by(e: &mut Expr, tx: &TxId, began: u64) -> String {
    let path = e.path(&[&StoredReservation::attribute(tx), RESERVATION_BEGAN]);
    format!("{path} = {}", e.value(number(began)))
}

/// A lock holder's release: `tx` holds the lock; the lock and its index attributes go, and the
/// fence is pruned with the horizon raised, never lowered (the write is then also conditional
/// on the horizon being at most the new one: a lock-free abort may have raised it).
pub(crate) struct Release {
    pub(crate) set: Vec<String>,
    pub(crate) remove: Vec<String>,
    pub(crate) condition: String,
}

pub(crate) fn release_clauses(
    e: &mut Expr,
    tx: &TxId,
    began: u64,
    prune: Option<&Prune>,
) -> Release {
    let owned = owned_by(e, tx, began);
    let mut release = prune_clauses(e, tx, prune, owned);
    for name in [LOCK, LOCK_EXPIRES_AT, LOCK_SHARD] {
        release.remove.push(e.name(name));
    }
    release
}

/// The pruning a holder's release carries out (`prune`): the entries go, the horizon is set,
/// and the write is conditional on the horizon not being above the planned one, besides
/// `condition`.
pub(crate) fn prune_clauses(
    e: &mut Expr,
    tx: &TxId,
    prune: Option<&Prune>,
    condition: String,
) -> Release {
    let (mut set, mut remove, mut condition) = (vec![], vec![], condition);
    if let Some(p) = prune {
        for id in p.ids.iter().filter(|id| *id != tx) {
            remove.push(fence_path(e, id));
        }
        let (h, v) = (e.name(HORIZON), e.value(number(p.horizon)));
        set.push(format!("{h} = {v}"));
        condition = format!("{condition} AND (attribute_not_exists({h}) OR {h} <= {v})");
    }
    Release {
        set,
        remove,
        condition,
    }
}

fn require_clause(e: &mut Expr, name: &str, cond: &Condition) -> String {
    let n = e.name(name);
    match cond {
        Condition::Exists => format!("attribute_exists({n})"),
        Condition::NotExists => format!("attribute_not_exists({n})"),
        Condition::Compare(c, v) => format!("{n} {} {}", c.symbol(), e.value(to_attr(v))),
    }
}

/// The operation's own conditions, as its prepare checks them: every `add` target absent or a
/// number (an add to a non-number would fail at commit, after the decision), every `require`
/// (for a creating operation, those on the key are implied by the create condition, and true
/// of a placeholder).
pub(crate) fn op_conditions(e: &mut Expr, key: &Key, op: &Operation) -> Vec<String> {
    let mut conds = vec![];
    for name in op.add.keys() {
        let n = e.name(name);
        conds.push(format!(
            "(attribute_not_exists({n}) OR attribute_type({n}, {}))",
            e.value(AttributeValue::S("N".into()))
        ));
    }
    for (name, cond) in &op.require {
        if !(op.creates() && key.contains_key(name)) {
            conds.push(require_clause(e, name, cond));
        }
    }
    conds
}

/// What applying the operation writes, besides the commit marks: its `set`s, its `put`'s
/// attributes (the key aside), its `add`s, its `remove`s.
pub(crate) fn op_effects(
    e: &mut Expr,
    key: &Key,
    op: &Operation,
    set: &mut Vec<String>,
    remove: &mut Vec<String>,
) {
    let put = op
        .put
        .iter()
        .flatten()
        .filter(|(n, _)| !key.contains_key(*n));
    for (name, v) in op.set.iter().chain(put) {
        set.push(format!("{} = {}", e.name(name), e.value(to_attr(v))));
    }
    for (name, d) in &op.add {
        set.push(add_to(e, name, d));
    }
    for name in &op.remove {
        remove.push(e.name(name));
    }
}

pub(crate) fn decimal(d: &Decimal) -> AttributeValue {
    AttributeValue::N(d.to_string())
}

/// The attribute names of one reserved attribute's escrow (placeholders are made only for the
/// ones an expression uses: DynamoDB refuses unused ones).
pub(crate) struct Names {
    pub(crate) count: String,
    pub(crate) floors: String,
    pub(crate) ceilings: String,
    pub(crate) low: String,
    pub(crate) high: String,
    pub(crate) floor: String,
    pub(crate) ceiling: String,
}

impl Names {
    /// Every attribute of the escrow.
    pub(crate) fn all(&self) -> [&str; 7] {
        [
            &self.count,
            &self.floors,
            &self.ceilings,
            &self.low,
            &self.high,
            &self.floor,
            &self.ceiling,
        ]
    }
}

pub(crate) fn names(attr: &str) -> Names {
    Names {
        count: prefixed(ESCROW_COUNT_PREFIX, attr),
        floors: prefixed(ESCROW_FLOORS_PREFIX, attr),
        ceilings: prefixed(ESCROW_CEILINGS_PREFIX, attr),
        low: prefixed(ESCROW_LOW_PREFIX, attr),
        high: prefixed(ESCROW_HIGH_PREFIX, attr),
        floor: prefixed(ESCROW_FLOOR_PREFIX, attr),
        ceiling: prefixed(ESCROW_CEILING_PREFIX, attr),
    }
}
