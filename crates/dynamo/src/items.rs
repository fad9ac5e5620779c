//! Participant items as the core's [`ParticipantStore`]: one conditional write per step.
//!
//! The item layout is [`twopc_core::layout`]'s; what each write's condition means is the rule
//! of [`twopc_core::rules`] it spells (`prepare`, `commit`, `abort`, `fence_out`).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use serde_json::Value;
use twopc_core::decimal::Decimal;
use twopc_core::ids::TxId;
use twopc_core::item::{
    Escrow, FenceEntry, FenceOutcome, ItemState, Key, Lock, StoredReservation, fence_from_stored,
};
use twopc_core::layout::{
    ESCROW_CEILING_PREFIX, ESCROW_CEILINGS_PREFIX, ESCROW_COUNT_PREFIX, ESCROW_FLOOR_PREFIX,
    ESCROW_FLOORS_PREFIX, ESCROW_HIGH_PREFIX, ESCROW_LOW_PREFIX, FENCE, HORIZON,
    ITEM_VISIBLE_ATTRIBUTES, LAST_TX, LOCK, LOCK_EXPIRES_AT, LOCK_SHARD, LOCK_TX, PAUSED_UNTIL,
    PLACEHOLDER, RESERVATION_PREFIX, RESERVATIONS, TOMBSTONE, VERSION, is_protocol_attribute,
};
use twopc_core::message::Prune;
use twopc_core::op::{Bound, Condition, Mode, Operation};
use twopc_core::ports::{CompleteWrite, Completion, ParticipantStore, PortError, PrepareWrite};
use twopc_core::request::KeySchema;

use crate::codec::{Item, from_attr, from_item, to_attr, to_item};
use crate::error::{classify, corrupt};
use crate::expr::{Expr, update_expression};
use crate::reservations::Give;
use crate::tables::{INDEX_SHARDS, LOCK_INDEX, shard_of};

/// Participant items in any table, through one DynamoDB client.
#[derive(Clone, Debug)]
pub struct DynamoItems {
    client: Client,
}

impl DynamoItems {
    /// Items reached through `client`.
    pub fn new(client: Client) -> Self {
        DynamoItems { client }
    }
}

/// Reads the protocol's view of an item.
pub fn item_state(item: &Item) -> Result<ItemState, PortError> {
    let bad = |why: String| corrupt("reading a participant item", why);
    let mut attrs = from_item(item).map_err(|e| bad(e.to_string()))?;
    let lock = match attrs.remove(LOCK) {
        Some(v) => Some(serde_json::from_value::<Lock>(v).map_err(|e| bad(format!("lock: {e}")))?),
        None => None,
    };
    let fence = match attrs.remove(FENCE) {
        Some(v) => fence_from_stored(&v).map_err(|e| bad(format!("{FENCE}: {e}")))?,
        None => BTreeMap::new(),
    };
    let horizon = match attrs.remove(HORIZON) {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| bad(format!("{HORIZON} is not a whole number: {v}")))?,
        None => 0,
    };
    let placeholder = attrs.remove(PLACEHOLDER).is_some();
    let tombstone = attrs.remove(TOMBSTONE).is_some();
    let paused_until = attrs.get(PAUSED_UNTIL).and_then(Value::as_u64).unwrap_or(0);
    let mut reservations = BTreeMap::new();
    let mut escrow: BTreeMap<String, Escrow> = BTreeMap::new();
    let number = |v: &Value, what: &str| {
        Decimal::parse(&v.to_string()).map_err(|e| bad(format!("{what}: {e}")))
    };
    for (name, v) in &attrs {
        if let Some(tx) = name.strip_prefix(RESERVATION_PREFIX) {
            let id = TxId::from_short(tx).map_err(|e| bad(format!("reservation {tx}: {e}")))?;
            let r: StoredReservation = serde_json::from_value(v.clone())
                .map_err(|e| bad(format!("reservation {tx}: {e}")))?;
            reservations.insert(id.clone(), r.into_lock(id));
            continue;
        }
        let field = [
            ESCROW_COUNT_PREFIX,
            ESCROW_FLOORS_PREFIX,
            ESCROW_CEILINGS_PREFIX,
            ESCROW_LOW_PREFIX,
            ESCROW_HIGH_PREFIX,
            ESCROW_FLOOR_PREFIX,
            ESCROW_CEILING_PREFIX,
        ]
        .into_iter()
        .find_map(|p| name.strip_prefix(p).map(|a| (p, a)));
        let Some((prefix, attr)) = field else {
            continue;
        };
        let s = escrow
            .entry(attr.to_owned())
            .or_insert_with(|| Escrow::at(Decimal::zero()));
        let count = || {
            v.as_u64()
                .ok_or_else(|| bad(format!("{name} is not a count")))
        };
        match prefix {
            ESCROW_COUNT_PREFIX => s.count = count()?,
            ESCROW_FLOORS_PREFIX => s.floors = count()?,
            ESCROW_CEILINGS_PREFIX => s.ceilings = count()?,
            ESCROW_LOW_PREFIX => s.low = number(v, name)?,
            ESCROW_HIGH_PREFIX => s.high = number(v, name)?,
            ESCROW_FLOOR_PREFIX => s.floor = Some(stored_bound(v, name)?),
            _ => s.ceiling = Some(stored_bound(v, name)?),
        }
    }
    attrs.retain(|name, _| {
        !is_protocol_attribute(name) || ITEM_VISIBLE_ATTRIBUTES.contains(&name.as_str())
    });
    Ok(ItemState {
        lock,
        fence,
        horizon,
        placeholder,
        tombstone,
        attributes: attrs.into_iter().collect(),
        reservations,
        escrow,
        paused_until,
    })
}

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

/// A floor or ceiling as `Bound::stored` spells it.
fn stored_bound(v: &Value, name: &str) -> Result<Bound, PortError> {
    v.as_str()
        .and_then(Bound::parse_stored)
        .ok_or_else(|| corrupt("reading an item", format!("{name} is not a bound: {v}")))
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

/// `txRes:<tx's short id>`: where `tx`'s reservation is ([`StoredReservation::attribute`]).
pub(crate) fn reservation_name(e: &mut Expr, tx: &TxId) -> String {
    e.name(&StoredReservation::attribute(tx))
}

pub(crate) fn number(n: u64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

/// `#lock.#txId = :tx`
pub(crate) fn owned_by(e: &mut Expr, tx: &TxId) -> String {
    let path = e.path(&[LOCK, LOCK_TX]);
    format!("{path} = {}", e.value(AttributeValue::S(tx.to_string())))
}

/// A lock holder's release: `tx` holds the lock; the lock and its index attributes go, and the
/// fence is pruned with the horizon raised, never lowered (the write is then also conditional
/// on the horizon being at most the new one: a lock-free abort may have raised it).
pub(crate) struct Release {
    pub(crate) set: Vec<String>,
    pub(crate) remove: Vec<String>,
    pub(crate) condition: String,
}

pub(crate) fn release_clauses(e: &mut Expr, tx: &TxId, prune: Option<&Prune>) -> Release {
    let owned = owned_by(e, tx);
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

/// One conditional `UpdateItem`.
pub(crate) struct Write {
    pub(crate) update: String,
    pub(crate) condition: String,
    pub(crate) returns: ReturnValue,
}

pub(crate) enum Outcome {
    Written(Option<Item>),
    Refused(Option<Item>),
}

impl DynamoItems {
    pub(crate) async fn write(
        &self,
        table: &str,
        key: &Key,
        e: Expr,
        w: Write,
        context: impl Fn() -> String,
    ) -> Result<Outcome, PortError> {
        let Write {
            update,
            condition,
            returns,
        } = w;
        let r = self
            .client
            .update_item()
            .table_name(table)
            .set_key(Some(key_item(key)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values(returns)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match r {
            Ok(out) => Ok(Outcome::Written(out.attributes)),
            Err(err) => match err.as_service_error() {
                Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c)) => Ok(Outcome::Refused(c.item.clone())),
                _ => Err(classify(context(), err)),
            },
        }
    }

    /// The raw item (strongly consistent read).
    pub(crate) async fn get(
        &self,
        table: &str,
        key: &Key,
        context: impl Fn() -> String,
    ) -> Result<Option<Item>, PortError> {
        Ok(self
            .client
            .get_item()
            .table_name(table)
            .set_key(Some(key_item(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| classify(context(), err))?
            .item)
    }

    fn refused(item: Option<Item>) -> Result<CompleteWrite, PortError> {
        Ok(CompleteWrite::Refused(
            item.as_ref().map(item_state).transpose()?.map(Box::new),
        ))
    }

    /// Releases `tx`'s lock (optionally writing its fence entry, pruning as planned). A real
    /// item stays; `tx`'s placeholder becomes a tombstone, keeping its fence and horizon.
    async fn release(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        fence: Option<&FenceEntry>,
        prune: Option<&Prune>,
    ) -> Result<CompleteWrite, PortError> {
        let mut placeholder = false;
        loop {
            let mut e = Expr::new();
            let Release {
                mut set,
                mut remove,
                condition,
            } = release_clauses(&mut e, tx, prune);
            if let Some(f) = fence {
                set.push(format!(
                    "{} = {}",
                    fence_path(&mut e, &tx),
                    e.value(entry(f))
                ));
            }
            let ph = e.name(PLACEHOLDER);
            let condition = if placeholder {
                remove.push(ph.clone());
                set.push(format!(
                    "{} = {}",
                    e.name(TOMBSTONE),
                    e.value(AttributeValue::Bool(true))
                ));
                format!("{condition} AND attribute_exists({ph})")
            } else {
                format!("{condition} AND attribute_not_exists({ph})")
            };
            let w = Write {
                update: update_expression(&set, &remove),
                condition,
                returns: ReturnValue::None,
            };
            match self
                .write(table, key, e, w, || {
                    format!("releasing the lock of {tx} in {table}")
                })
                .await?
            {
                Outcome::Written(_) => return Ok(CompleteWrite::Done),
                Outcome::Refused(Some(item)) => {
                    let state = item_state(&item)?;
                    let ours = state.lock.as_ref().is_some_and(|l| &l.tx_id == tx);
                    if ours && state.placeholder != placeholder {
                        placeholder = state.placeholder;
                        continue;
                    }
                    return Ok(CompleteWrite::Refused(Some(Box::new(state))));
                }
                Outcome::Refused(None) => return Ok(CompleteWrite::Refused(None)),
            }
        }
    }

    /// Commits `tx`'s delete: the item becomes a tombstone (key, fence with `tx`'s entry,
    /// horizon, `txVersion` + 1), so a late prepare of an earlier transaction is still refused.
    /// Read, then replace conditional on the lock and on the fence being as read (only
    /// lock-free aborts can change it meanwhile: then read again).
    async fn bury(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        fence: &FenceEntry,
        prune: Option<&Prune>,
    ) -> Result<CompleteWrite, PortError> {
        let ctx = || format!("committing the delete of {tx} in {table}");
        for _ in 0..4 {
            let Some(item) = self.get(table, key, ctx).await? else {
                return Ok(CompleteWrite::Refused(None));
            };
            let state = item_state(&item)?;
            if state.lock.as_ref().is_none_or(|l| &l.tx_id != tx) {
                return Ok(CompleteWrite::Refused(Some(Box::new(state))));
            }
            let mut entries = match item.get(FENCE) {
                Some(AttributeValue::M(m)) => m.clone(),
                _ => Default::default(),
            };
            let mut horizon = state.horizon;
            if let Some(p) = prune {
                for id in &p.ids {
                    entries.remove(id.as_str());
                }
                horizon = horizon.max(p.horizon);
            }
            let read_size = state.fence.len();
            entries.insert(tx.short(), entry(fence));
            let version = match item.get(VERSION) {
                Some(AttributeValue::N(n)) => n
                    .parse::<u64>()
                    .map_err(|_| corrupt(ctx(), format!("{VERSION} is not a whole number: {n}")))?,
                _ => 0,
            };
            let mut tomb = key_item(key);
            tomb.insert(TOMBSTONE.into(), AttributeValue::Bool(true));
            tomb.insert(FENCE.into(), AttributeValue::M(entries));
            tomb.insert(HORIZON.into(), number(horizon));
            tomb.insert(VERSION.into(), number(version + 1));
            tomb.insert(LAST_TX.into(), AttributeValue::S(tx.to_string()));
            let mut e = Expr::new();
            let (f, h) = (e.name(FENCE), e.name(HORIZON));
            let same_fence = if item.contains_key(FENCE) {
                format!("size({f}) = {}", e.value(number(read_size as u64)))
            } else {
                format!("attribute_not_exists({f})")
            };
            let same_horizon = if item.contains_key(HORIZON) {
                format!("{h} = {}", e.value(number(state.horizon)))
            } else {
                format!("attribute_not_exists({h})")
            };
            let condition = format!(
                "{} AND {same_fence} AND {same_horizon}",
                owned_by(&mut e, tx)
            );
            let r = self
                .client
                .put_item()
                .table_name(table)
                .set_item(Some(tomb))
                .condition_expression(condition)
                .set_expression_attribute_names(e.names())
                .set_expression_attribute_values(e.values())
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
                .await;
            match r {
                Ok(_) => return Ok(CompleteWrite::Done),
                Err(err) => match err.as_service_error() {
                    Some(aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(_)) => continue,
                    _ => return Err(classify(ctx(), err)),
                },
            }
        }
        Err(PortError::Retryable {
            context: ctx(),
            source: "the item's fence kept changing under the delete".into(),
        })
    }
}

/// Whether a refused release found the item locked (not reserved) by `tx`.
fn locked_by(w: &CompleteWrite, tx: &TxId) -> bool {
    matches!(w, CompleteWrite::Refused(Some(item)) if item.lock.as_ref().is_some_and(|l| &l.tx_id == tx))
}

impl DynamoItems {
    /// Points the lock index at the earliest standing reservation of an item found there with
    /// nothing expired, or takes the item out of it when nothing stands (only if no lock was
    /// taken and no reservation made meanwhile: both keep the index themselves).
    async fn reindex(&self, table: &str, key: &Key, state: &ItemState) -> Result<(), PortError> {
        if state.lock.is_some() {
            return Ok(());
        }
        let mut e = Expr::new();
        let (lock, n) = (e.name(LOCK), e.name(RESERVATIONS));
        let count = e.value(number(state.reservations.len() as u64));
        let unchanged = if state.reservations.is_empty() {
            format!("attribute_not_exists({lock}) AND (attribute_not_exists({n}) OR {n} = {count})")
        } else {
            format!("attribute_not_exists({lock}) AND {n} = {count}")
        };
        let (shard, expires) = (e.name(LOCK_SHARD), e.name(LOCK_EXPIRES_AT));
        let update = match state.reservations.values().map(|r| r.expires_at).min() {
            None => format!("REMOVE {shard}, {expires}"),
            Some(x) => format!("SET {expires} = {}", e.value(number(x))),
        };
        let w = Write {
            update,
            condition: unchanged,
            returns: ReturnValue::None,
        };
        // Refused: the item changed meanwhile, and whoever changed it kept the index.
        self.write(table, key, e, w, || {
            format!("reindexing an item of {table}")
        })
        .await
        .map(|_| ())
    }
}

impl ParticipantStore for DynamoItems {
    async fn prepare(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
    ) -> Result<PrepareWrite, PortError> {
        let mut e = Expr::new();
        let op = &lock.op;
        let lock_value = serde_json::to_value(lock)
            .map_err(|err| corrupt("encoding a lock", err.to_string()))?;
        let fence = e.name(FENCE);
        let mut set = vec![
            format!("{} = {}", e.name(LOCK), e.value(to_attr(&lock_value))),
            format!(
                "{} = {}",
                e.name(LOCK_EXPIRES_AT),
                e.value(AttributeValue::N(lock.expires_at.to_string()))
            ),
            format!(
                "{} = {}",
                e.name(LOCK_SHARD),
                e.value(AttributeValue::S(shard_of(lock.tx_id.as_str(), "L")))
            ),
            // Commit and abort write `txFence.<tx>`, which needs the map to exist; the horizon
            // is set too (to itself), so that the reply carries both.
            format!(
                "{fence} = if_not_exists({fence}, {})",
                e.value(AttributeValue::M(Default::default()))
            ),
        ];
        let horizon = e.name(HORIZON);
        set.push(format!(
            "{horizon} = if_not_exists({horizon}, {})",
            e.value(number(0))
        ));
        let k = e.name(first_key_name(key));
        let ph = e.name(PLACEHOLDER);
        let mine = owned_by(&mut e, &lock.tx_id);
        let lock_name = e.name(LOCK);
        let mut conds = vec![];
        let tomb = e.name(TOMBSTONE);
        let mut remove = vec![];
        if op.creates() {
            // Absent, or a tombstone (never locked) the transaction began after, or already
            // our placeholder.
            set.push(format!("{ph} = {}", e.value(AttributeValue::Bool(true))));
            remove.push(tomb.clone());
            let began = e.value(number(lock.began));
            conds.push(format!(
                "(attribute_not_exists({k}) OR (attribute_exists({tomb}) AND attribute_not_exists({lock_name}) AND (attribute_not_exists({horizon}) OR {horizon} < {began})) OR (attribute_exists({ph}) AND {mine}))"
            ));
        } else {
            conds.push(format!(
                "attribute_exists({k}) AND attribute_not_exists({ph}) AND attribute_not_exists({tomb})"
            ));
            let began = e.value(number(lock.began));
            conds.push(format!(
                "((attribute_not_exists({lock_name}) AND (attribute_not_exists({horizon}) OR {horizon} < {began})) OR {mine})"
            ));
            // No reservation stands beside a lock.
            let n = e.name(RESERVATIONS);
            conds.push(format!(
                "(attribute_not_exists({n}) OR {n} = {})",
                e.value(number(0))
            ));
        }
        conds.push(format!(
            "attribute_not_exists({})",
            fence_path(&mut e, &lock.tx_id)
        ));
        conds.extend(op_conditions(&mut e, key, op));
        let w = Write {
            update: update_expression(&set, &remove),
            condition: conds.join(" AND "),
            // The old values of what this write sets: the fence and the horizon as they were
            // (prepare changes neither), without the lock it just wrote (absent before, unless
            // a retried prepare) or anything else.
            returns: ReturnValue::UpdatedOld,
        };
        match self
            .write(table, key, e, w, || {
                format!("preparing {} in {table}", lock.tx_id)
            })
            .await?
        {
            Outcome::Written(attrs) => {
                let state = item_state(&attrs.unwrap_or_default())?;
                Ok(PrepareWrite::Locked {
                    fence: state.fence,
                    horizon: state.horizon,
                })
            }
            Outcome::Refused(item) => Ok(PrepareWrite::Refused(
                item.as_ref().map(item_state).transpose()?.map(Box::new),
            )),
        }
    }

    async fn commit(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
    ) -> Result<CompleteWrite, PortError> {
        let (tx, op, fence, prune) = (c.tx, c.op, c.entry, c.prune);
        if op.mode() == Mode::Reserved {
            let done = self.release_reservation(table, key, c, Give::Apply).await?;
            if !locked_by(&done, tx) {
                return Ok(done);
            }
            // A commuting operation held under a lock (prepared as exclusive): release the lock.
        }
        let mut e = Expr::new();
        let ctx = || format!("committing {tx} in {table}");
        if op.delete {
            return self.bury(table, key, tx, &fence, prune).await;
        }
        let Release {
            mut set,
            mut remove,
            condition,
        } = release_clauses(&mut e, tx, prune);
        op_effects(&mut e, key, op, &mut set, &mut remove);
        if op.creates() {
            remove.push(e.name(PLACEHOLDER));
        }
        set.extend(commit_marks(&mut e, tx));
        set.push(format!(
            "{} = {}",
            fence_path(&mut e, &tx),
            e.value(entry(&fence))
        ));
        let w = Write {
            update: update_expression(&set, &remove),
            condition,
            returns: ReturnValue::None,
        };
        match self.write(table, key, e, w, ctx).await? {
            Outcome::Written(_) => Ok(CompleteWrite::Done),
            Outcome::Refused(item) => Self::refused(item),
        }
    }

    async fn abort(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
    ) -> Result<CompleteWrite, PortError> {
        if c.op.mode() == Mode::Reserved {
            let done = self.release_reservation(table, key, c, Give::Back).await?;
            if !locked_by(&done, c.tx) {
                return Ok(done);
            }
        }
        self.release(table, key, c.tx, Some(&c.entry), c.prune)
            .await
    }

    async fn reserve(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
        now: u64,
        most: usize,
    ) -> Result<PrepareWrite, PortError> {
        self.reserve_item(table, key, lock, now, most).await
    }

    async fn reset_escrow(
        &self,
        table: &str,
        key: &Key,
        attributes: &[&str],
    ) -> Result<(), PortError> {
        self.reset_escrow_of(table, key, attributes).await
    }

    async fn pause_reservations(
        &self,
        table: &str,
        key: &Key,
        until: u64,
    ) -> Result<(), PortError> {
        let mut e = Expr::new();
        let (k, pause) = (e.name(first_key_name(key)), e.name(PAUSED_UNTIL));
        let until = e.value(number(until));
        let w = Write {
            update: format!("SET {pause} = {until}"),
            condition: format!(
                "attribute_exists({k}) AND (attribute_not_exists({pause}) OR {pause} < {until})"
            ),
            returns: ReturnValue::None,
        };
        // Refused: no item, or paused as long already. Either way, nothing more to do.
        self.write(table, key, e, w, || {
            format!("pausing reservations in {table}")
        })
        .await
        .map(|_| ())
    }

    async fn fence_aborted(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        fence: FenceEntry,
        capacity: usize,
    ) -> Result<CompleteWrite, PortError> {
        // Three shapes: add the entry to a fence with room; create the fence with it; or, the
        // fence being full, raise the horizon to the transaction's begin instead.
        #[derive(PartialEq)]
        enum Shape {
            Add,
            Create,
            Raise,
        }
        let mut shape = Shape::Add;
        loop {
            let mut e = Expr::new();
            let k = e.name(first_key_name(key));
            let map = e.name(FENCE);
            let horizon = e.name(HORIZON);
            let lock = e.name(LOCK);
            let lock_tx = e.path(&[LOCK, LOCK_TX]);
            let txv = e.value(AttributeValue::S(tx.to_string()));
            let path = fence_path(&mut e, &tx);
            let began = e.value(number(fence.began));
            let res = reservation_name(&mut e, tx);
            // Exists, not ours (lock or reservation), not fenced yet (no entry, horizon below
            // its begin).
            let base = format!(
                "attribute_exists({k}) AND (attribute_not_exists({lock}) OR {lock_tx} <> {txv}) AND attribute_not_exists({res}) AND attribute_not_exists({path}) AND (attribute_not_exists({horizon}) OR {horizon} < {began})"
            );
            let (set, condition) = match shape {
                Shape::Add => (
                    format!("{path} = {}", e.value(entry(&fence))),
                    format!(
                        "{base} AND attribute_exists({map}) AND size({map}) < {}",
                        e.value(number(capacity as u64))
                    ),
                ),
                Shape::Create => (
                    format!(
                        "{map} = {}",
                        e.value(AttributeValue::M([(tx.short(), entry(&fence))].into()))
                    ),
                    format!("{base} AND attribute_not_exists({map})"),
                ),
                Shape::Raise => (format!("{horizon} = {began}"), base),
            };
            let w = Write {
                update: format!("SET {set}"),
                condition,
                returns: ReturnValue::None,
            };
            let (has_map, refused) = match self
                .write(table, key, e, w, || format!("fencing out {tx} in {table}"))
                .await?
            {
                Outcome::Written(_) => return Ok(CompleteWrite::Done),
                Outcome::Refused(None) => return Ok(CompleteWrite::Refused(None)),
                Outcome::Refused(Some(item)) => (item.contains_key(FENCE), item_state(&item)?),
            };
            let fenced = refused.fence.contains_key(tx) || fence.began <= refused.horizon;
            let ours = refused.lock.as_ref().is_some_and(|l| &l.tx_id == tx)
                || refused.reservations.contains_key(tx);
            let next = if fenced || ours {
                None
            } else if !has_map && shape == Shape::Add {
                Some(Shape::Create)
            } else if refused.fence.len() >= capacity && shape != Shape::Raise {
                Some(Shape::Raise)
            } else {
                None
            };
            match next {
                Some(s) => shape = s,
                None => return Ok(CompleteWrite::Refused(Some(Box::new(refused)))),
            }
        }
    }

    async fn bury_aborted(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        fence: FenceEntry,
    ) -> Result<CompleteWrite, PortError> {
        // An update of a key that does not exist creates it: the tombstone, its fence holding
        // the one `aborted` entry, only while the key is still absent.
        let mut e = Expr::new();
        let k = e.name(first_key_name(key));
        let update = format!(
            "SET {} = {}, {} = {}",
            e.name(TOMBSTONE),
            e.value(AttributeValue::Bool(true)),
            e.name(FENCE),
            e.value(AttributeValue::M([(tx.short(), entry(&fence))].into())),
        );
        let w = Write {
            update,
            condition: format!("attribute_not_exists({k})"),
            returns: ReturnValue::None,
        };
        match self
            .write(table, key, e, w, || {
                format!("preventing {tx} on an absent key in {table}")
            })
            .await?
        {
            Outcome::Written(_) => Ok(CompleteWrite::Done),
            Outcome::Refused(None) => Ok(CompleteWrite::Refused(None)),
            Outcome::Refused(Some(item)) => {
                Ok(CompleteWrite::Refused(Some(Box::new(item_state(&item)?))))
            }
        }
    }

    async fn drop_lock(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        op: &Operation,
    ) -> Result<CompleteWrite, PortError> {
        if op.mode() == Mode::Reserved {
            let c = Completion {
                tx,
                op,
                entry: FenceEntry {
                    outcome: FenceOutcome::Aborted,
                    began: 0,
                },
                prune: None,
            };
            let done = self.release_reservation(table, key, &c, Give::Drop).await?;
            if !locked_by(&done, tx) {
                return Ok(done);
            }
        }
        self.release(table, key, tx, None, None).await
    }

    async fn expired_locks(
        &self,
        table: &str,
        schema: &KeySchema,
        now: u64,
        limit: usize,
    ) -> Result<Vec<(Key, Lock)>, PortError> {
        let mut found = vec![];
        for shard in 0..INDEX_SHARDS {
            let mut start = None;
            while found.len() < limit {
                let mut e = Expr::new();
                let kc = format!(
                    "{} = {} AND {} < {}",
                    e.name(LOCK_SHARD),
                    e.value(AttributeValue::S(format!("L{shard}"))),
                    e.name(LOCK_EXPIRES_AT),
                    e.value(AttributeValue::N(now.to_string()))
                );
                let out = self
                    .client
                    .query()
                    .table_name(table)
                    .index_name(LOCK_INDEX)
                    .key_condition_expression(kc)
                    .set_expression_attribute_names(e.names())
                    .set_expression_attribute_values(e.values())
                    .set_exclusive_start_key(start)
                    .limit((limit - found.len()).clamp(1, 1000) as i32)
                    .send()
                    .await
                    .map_err(|err| classify(format!("querying expired locks of {table}"), err))?;
                for entry in out.items() {
                    let mut key = Key::new();
                    for attr in schema.attributes() {
                        let v = entry.get(&attr.name).ok_or_else(|| {
                            corrupt(
                                format!("expired lock in {table}"),
                                format!("item without key attribute {}", attr.name),
                            )
                        })?;
                        key.insert(
                            attr.name.clone(),
                            from_attr(v)
                                .map_err(|err| corrupt("reading a key", err.to_string()))?,
                        );
                    }
                    // The index holds keys only: read the item itself (gone since: nothing
                    // to do).
                    let Some(state) = self.read(table, &key).await? else {
                        continue;
                    };
                    let expired: Vec<Lock> = state
                        .lock
                        .iter()
                        .chain(state.reservations.values())
                        .filter(|l| l.expires_at < now)
                        .cloned()
                        .collect();
                    if expired.is_empty() {
                        // Reservations leave the index attributes behind (a release does not
                        // know it is the last): bring them up to date.
                        self.reindex(table, &key, &state).await?;
                    }
                    found.extend(expired.into_iter().map(|l| (key.clone(), l)));
                }
                start = out.last_evaluated_key().cloned();
                if start.is_none() {
                    break;
                }
            }
        }
        found.truncate(limit);
        Ok(found)
    }

    async fn read(&self, table: &str, key: &Key) -> Result<Option<ItemState>, PortError> {
        self.get(table, key, || format!("reading an item of {table}"))
            .await?
            .as_ref()
            .map(item_state)
            .transpose()
    }
}

/// The business view of an item: protocol attributes removed; a placeholder or a tombstone
/// reads as absent.
pub fn business_view(state: &ItemState) -> Option<BTreeMap<String, Value>> {
    (!state.placeholder && !state.tombstone).then(|| state.attributes.clone())
}
