//! Participant items as the core's [`ParticipantStore`]: one conditional write per step.
//!
//! The item layout is [`twopc_core::layout`]'s; what each write's condition means is the rule
//! of [`twopc_core::rules`] it spells (`prepare`, `commit`, `abort`, `fence_out`).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use serde_json::Value;
use twopc_core::ids::TxId;
use twopc_core::item::{FenceEntry, FenceOutcome, ItemState, Key, Lock};
use twopc_core::layout::{
    ABORTED, COMMITTED, ENTRY_BEGAN, ENTRY_OUTCOME, ENTRY_STALE, FENCE, HORIZON,
    ITEM_PROTOCOL_ATTRIBUTES, ITEM_VISIBLE_ATTRIBUTES, LAST_TX, LOCK, LOCK_EXPIRES_AT, LOCK_SHARD,
    LOCK_TX, PLACEHOLDER, TOMBSTONE, VERSION,
};
use twopc_core::message::Prune;
use twopc_core::op::{Condition, Operation};
use twopc_core::ports::{CompleteWrite, ParticipantStore, PortError, PrepareWrite};
use twopc_core::request::KeySchema;

use crate::codec::{Item, from_attr, from_item, to_attr, to_item};
use crate::error::{classify, corrupt};
use crate::expr::{Expr, update_expression};
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
        Some(v) => serde_json::from_value::<BTreeMap<TxId, FenceEntry>>(v)
            .map_err(|e| bad(format!("{FENCE}: {e}")))?,
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
    for name in ITEM_PROTOCOL_ATTRIBUTES {
        if !ITEM_VISIBLE_ATTRIBUTES.contains(name) {
            attrs.remove(*name);
        }
    }
    Ok(ItemState {
        lock,
        fence,
        horizon,
        placeholder,
        tombstone,
        attributes: attrs.into_iter().collect(),
    })
}

fn key_item(key: &Key) -> Item {
    to_item(key)
}

fn first_key_name(key: &Key) -> &str {
    key.keys().next().map_or("", String::as_str)
}

fn entry(e: &FenceEntry) -> AttributeValue {
    let o = match e.outcome {
        FenceOutcome::Committed => COMMITTED,
        FenceOutcome::Aborted => ABORTED,
    };
    AttributeValue::M(
        [
            (ENTRY_OUTCOME.to_owned(), AttributeValue::S(o.into())),
            (
                ENTRY_BEGAN.to_owned(),
                AttributeValue::N(e.began.to_string()),
            ),
            (
                ENTRY_STALE.to_owned(),
                AttributeValue::N(e.expires_at.to_string()),
            ),
        ]
        .into(),
    )
}

fn number(n: u64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

/// `#lock.#txId = :tx`
fn owned_by(e: &mut Expr, tx: &TxId) -> String {
    let path = e.path(&[LOCK, LOCK_TX]);
    format!("{path} = {}", e.value(AttributeValue::S(tx.to_string())))
}

/// A lock holder's release: `tx` holds the lock; the lock and its index attributes go, and the
/// fence is pruned with the horizon raised, never lowered (the write is then also conditional
/// on the horizon being at most the new one: a lock-free abort may have raised it).
struct Release {
    set: Vec<String>,
    remove: Vec<String>,
    condition: String,
}

fn release_clauses(e: &mut Expr, tx: &TxId, prune: Option<&Prune>) -> Release {
    let mut remove = vec![e.name(LOCK), e.name(LOCK_EXPIRES_AT), e.name(LOCK_SHARD)];
    let mut set = vec![];
    let mut condition = owned_by(e, tx);
    if let Some(p) = prune {
        for id in p.ids.iter().filter(|id| *id != tx) {
            remove.push(e.path(&[FENCE, id.as_str()]));
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

/// One conditional `UpdateItem`.
struct Write {
    update: String,
    condition: String,
    returns: ReturnValue,
}

enum Outcome {
    Written(Option<Item>),
    Refused(Option<Item>),
}

impl DynamoItems {
    async fn write(
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
    async fn get(
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
                    e.path(&[FENCE, tx.as_str()]),
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
            entries.insert(tx.to_string(), entry(fence));
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
        }
        conds.push(format!(
            "attribute_not_exists({})",
            e.path(&[FENCE, lock.tx_id.as_str()])
        ));
        for name in op.add.keys() {
            // An add to a non-number would fail at commit, after the decision: refuse it now.
            let n = e.name(name);
            conds.push(format!(
                "(attribute_not_exists({n}) OR attribute_type({n}, {}))",
                e.value(AttributeValue::S("N".into()))
            ));
        }
        for (name, cond) in &op.require {
            if op.creates() && key.contains_key(name) {
                continue; // implied by the create condition (and true of our own placeholder)
            }
            conds.push(require_clause(&mut e, name, cond));
        }
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
        tx: &TxId,
        op: &Operation,
        fence: FenceEntry,
        prune: Option<&Prune>,
    ) -> Result<CompleteWrite, PortError> {
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
        for (name, v) in &op.set {
            set.push(format!("{} = {}", e.name(name), e.value(to_attr(v))));
        }
        for (name, v) in op
            .put
            .iter()
            .flatten()
            .filter(|(n, _)| !key.contains_key(*n))
        {
            set.push(format!("{} = {}", e.name(name), e.value(to_attr(v))));
        }
        if op.creates() {
            remove.push(e.name(PLACEHOLDER));
        }
        for (name, d) in &op.add {
            let n = e.name(name);
            set.push(format!(
                "{n} = if_not_exists({n}, {}) + {}",
                e.value(AttributeValue::N("0".into())),
                e.value(AttributeValue::N(d.to_string()))
            ));
        }
        for name in &op.remove {
            remove.push(e.name(name));
        }
        let ver = e.name(VERSION);
        set.push(format!(
            "{ver} = if_not_exists({ver}, {}) + {}",
            e.value(AttributeValue::N("0".into())),
            e.value(AttributeValue::N("1".into()))
        ));
        set.push(format!(
            "{} = {}",
            e.name(LAST_TX),
            e.value(AttributeValue::S(tx.to_string()))
        ));
        set.push(format!(
            "{} = {}",
            e.path(&[FENCE, tx.as_str()]),
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
        tx: &TxId,
        fence: FenceEntry,
        prune: Option<&Prune>,
    ) -> Result<CompleteWrite, PortError> {
        self.release(table, key, tx, Some(&fence), prune).await
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
            let path = e.path(&[FENCE, tx.as_str()]);
            let began = e.value(number(fence.began));
            // Exists, not ours, not fenced yet (no entry, horizon below its begin).
            let base = format!(
                "attribute_exists({k}) AND (attribute_not_exists({lock}) OR {lock_tx} <> {txv}) AND attribute_not_exists({path}) AND (attribute_not_exists({horizon}) OR {horizon} < {began})"
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
                        e.value(AttributeValue::M([(tx.to_string(), entry(&fence))].into()))
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
            let ours = refused.lock.as_ref().is_some_and(|l| &l.tx_id == tx);
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

    async fn drop_lock(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
    ) -> Result<CompleteWrite, PortError> {
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
                for item in out.items() {
                    let state = item_state(item)?;
                    let Some(lock) = state.lock else { continue };
                    let mut key = Key::new();
                    for attr in schema.attributes() {
                        let v = item.get(&attr.name).ok_or_else(|| {
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
                    found.push((key, lock));
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
