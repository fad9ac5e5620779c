//! Participant items as the core's [`ParticipantStore`]: one conditional write per step.
//!
//! The item layout is [`twopc_core::layout`]'s; what each write's condition means is the rule
//! of [`twopc_core::rules`] it spells (`prepare`, `commit`, `abort`, `fence_out`).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use twopc_core::ids::TxId;
use twopc_core::item::{FenceEntry, FenceOutcome, ItemState, Key, Lock};
use twopc_core::layout::{
    FENCE, HORIZON, LOCK, LOCK_EXPIRES_AT, LOCK_OP, LOCK_SHARD, PAUSED_UNTIL, PLACEHOLDER,
    RESERVATIONS, TOMBSTONE,
};
use twopc_core::op::{Mode, Operation};
use twopc_core::ports::{CompleteWrite, Completion, ParticipantStore, PortError, PrepareWrite};
use twopc_core::service::KeySchema;

use crate::clauses::{
    Release, commit_marks, entry, entry_write, fence_path, first_key_name, format_mark, hot_mark,
    no_own_entry, number, op_conditions, op_effects, owned_by, release_clauses, reservation_name,
    reserved_by,
};
use crate::codec::{from_attr, to_attr};
use crate::error::{classify, corrupt};
use crate::expr::{Expr, update_expression};
use crate::release::{self, locked_by};
use crate::reservations::{self, Give};
use crate::tables::{INDEX_SHARDS, LOCK_INDEX, shard_of};
use crate::write::{Write, WriteOutcome, get, refused, write};

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

pub use crate::state::{business_view, item_state};

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
        write(&self.client, table, key, e, w, || {
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
        hot_until: Option<u64>,
    ) -> Result<PrepareWrite, PortError> {
        let mut e = Expr::new();
        let mut set = lock_sets(&mut e, lock)?;
        set.extend(hot_mark(&mut e, hot_until));
        let (conds, remove) = prepare_conditions(&mut e, key, lock, &mut set);
        let w = Write {
            update: update_expression(&set, &remove),
            condition: conds.join(" AND "),
            // The old values of what this write sets: the fence and the horizon as they were
            // (prepare changes neither), without the lock it just wrote (absent before, unless
            // a retried prepare) or anything else.
            returns: ReturnValue::UpdatedOld,
        };
        match write(&self.client, table, key, e, w, || {
            format!("preparing {} in {table}", lock.tx_id)
        })
        .await?
        {
            WriteOutcome::Written(attrs) => {
                let state = item_state(&attrs.unwrap_or_default())?;
                Ok(PrepareWrite::Locked {
                    fence: state.fence,
                    horizon: state.horizon,
                })
            }
            WriteOutcome::Refused(item) => Ok(PrepareWrite::Refused(
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
            let done = reservations::release(&self.client, table, key, c, Give::Apply).await?;
            if !locked_by(&done, tx) {
                return Ok(done);
            }
            // A commuting operation held under a lock (prepared as exclusive): release the lock.
        }
        let mut e = Expr::new();
        let ctx = || format!("committing {tx} in {table}");
        if op.delete {
            return release::bury(&self.client, table, key, tx, &fence, prune).await;
        }
        let Release {
            mut set,
            mut remove,
            condition,
        } = release_clauses(&mut e, tx, fence.began, prune);
        op_effects(&mut e, key, op, &mut set, &mut remove);
        if op.creates() {
            remove.push(e.name(PLACEHOLDER));
        }
        set.extend(commit_marks(&mut e, tx));
        let (entry_set, no_entry) = entry_write(&mut e, tx, &fence);
        set.push(entry_set);
        let w = Write {
            update: update_expression(&set, &remove),
            condition: format!("{condition} AND {no_entry}"),
            returns: ReturnValue::None,
        };
        match write(&self.client, table, key, e, w, ctx).await? {
            WriteOutcome::Written(_) => Ok(CompleteWrite::Done),
            WriteOutcome::Refused(item) => refused(item),
        }
    }

    async fn abort(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
    ) -> Result<CompleteWrite, PortError> {
        let done = abort_by(&self.client, table, key, c).await?;
        // A reservation gives back what its hold took, whatever op the message carries (one
        // item named twice: the abort of the other name's op lands first): by the hold's op.
        match held_with_another_op(&done, c) {
            Some(op) => {
                let by_hold = Completion { op: &op, ..*c };
                abort_by(&self.client, table, key, &by_hold).await
            }
            None => Ok(done),
        }
    }

    async fn reserve(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
        hot_until: Option<u64>,
        now: u64,
        most: usize,
    ) -> Result<PrepareWrite, PortError> {
        let hold = reservations::Hold { lock, hot_until };
        reservations::reserve(&self.client, table, key, &hold, now, most).await
    }

    async fn reset_escrow(
        &self,
        table: &str,
        key: &Key,
        attributes: &[&str],
    ) -> Result<(), PortError> {
        reservations::reset_escrow(&self.client, table, key, attributes).await
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
        write(&self.client, table, key, e, w, || {
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
        let mut shape = FenceShape::Add;
        loop {
            let (e, w) = fence_write(key, tx, &fence, capacity, shape);
            let (has_map, refused) = match write(&self.client, table, key, e, w, || {
                format!("fencing out {tx} in {table}")
            })
            .await?
            {
                WriteOutcome::Written(_) => return Ok(CompleteWrite::Done),
                WriteOutcome::Refused(None) => return Ok(CompleteWrite::Refused(None)),
                WriteOutcome::Refused(Some(item)) => (item.contains_key(FENCE), item_state(&item)?),
            };
            match next_shape(shape, has_map, &refused, tx, &fence, capacity) {
                Some(next) => shape = next,
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
            "SET {} = {}, {} = {}, {}",
            e.name(TOMBSTONE),
            e.value(AttributeValue::Bool(true)),
            e.name(FENCE),
            e.value(AttributeValue::M([(tx.short(), entry(&fence))].into())),
            format_mark(&mut e),
        );
        let w = Write {
            update,
            condition: format!("attribute_not_exists({k})"),
            returns: ReturnValue::None,
        };
        match write(&self.client, table, key, e, w, || {
            format!("preventing {tx} on an absent key in {table}")
        })
        .await?
        {
            WriteOutcome::Written(_) => Ok(CompleteWrite::Done),
            WriteOutcome::Refused(None) => Ok(CompleteWrite::Refused(None)),
            WriteOutcome::Refused(Some(item)) => {
                Ok(CompleteWrite::Refused(Some(Box::new(item_state(&item)?))))
            }
        }
    }

    async fn drop_lock(
        &self,
        table: &str,
        key: &Key,
        holder: &Lock,
    ) -> Result<CompleteWrite, PortError> {
        let tx = &holder.tx_id;
        if holder.op.mode() == Mode::Reserved {
            // No entry is written (`Give::Drop`): `entry` only names the holder's `began`.
            let c = Completion {
                tx,
                op: &holder.op,
                entry: FenceEntry {
                    outcome: FenceOutcome::Aborted,
                    began: holder.began,
                },
                prune: None,
            };
            let done = reservations::release(&self.client, table, key, &c, Give::Drop).await?;
            if !locked_by(&done, tx) {
                return Ok(done);
            }
        }
        let holder = (tx, holder.began);
        release::release(&self.client, table, key, holder, None, None).await
    }

    async fn retire(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        former: FenceEntry,
        horizon: u64,
    ) -> Result<CompleteWrite, PortError> {
        let mut e = Expr::new();
        let path = fence_path(&mut e, tx);
        let h = e.name(HORIZON);
        let (stored, to) = (e.value(entry(&former)), e.value(number(horizon)));
        let w = Write {
            update: format!("SET {h} = {to} REMOVE {path}"),
            condition: format!("{path} = {stored} AND (attribute_not_exists({h}) OR {h} <= {to})"),
            returns: ReturnValue::None,
        };
        match write(&self.client, table, key, e, w, || {
            format!("retiring a former transaction's fence entry under {tx} in {table}")
        })
        .await?
        {
            WriteOutcome::Written(_) => Ok(CompleteWrite::Done),
            WriteOutcome::Refused(item) => refused(item),
        }
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
        get(&self.client, table, key, || {
            format!("reading an item of {table}")
        })
        .await?
        .as_ref()
        .map(item_state)
        .transpose()
    }
}

/// What a prepare sets: the lock, its index entry, the fence map and the horizon if missing
/// (commit and abort write `txFence.<tx>`, which needs the map to exist; the horizon is set
/// too, to itself, so that the reply carries both), and the format mark.
fn lock_sets(e: &mut Expr, lock: &Lock) -> Result<Vec<String>, PortError> {
    let lock_value =
        serde_json::to_value(lock).map_err(|err| corrupt("encoding a lock", err.to_string()))?;
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
    set.push(format_mark(e));
    Ok(set)
}

/// When a prepare may lock the item (and, for an operation that creates it, the placeholder
/// it sets and the tombstone it removes): the conditions, and what to remove.
fn prepare_conditions(
    e: &mut Expr,
    key: &Key,
    lock: &Lock,
    set: &mut Vec<String>,
) -> (Vec<String>, Vec<String>) {
    let op = &lock.op;
    let horizon = e.name(HORIZON);
    let k = e.name(first_key_name(key));
    let ph = e.name(PLACEHOLDER);
    // Our own lock is a retry only with the same operation (a map compares equal with its
    // numbers by value, as `Operation::same_as` reads them): one item named twice is refused
    // here, never overwritten (`rules::prepare`, `OtherOperation`).
    let mine = format!(
        "({} AND {} = {})",
        owned_by(e, &lock.tx_id, lock.began),
        e.path(&[LOCK, LOCK_OP]),
        e.value(to_attr(&op.to_json()))
    );
    let lock_name = e.name(LOCK);
    let mut conds = vec![];
    let tomb = e.name(TOMBSTONE);
    let mut remove = vec![];
    if op.creates() {
        // Absent, or a tombstone (never locked) the transaction began after, or already our
        // placeholder.
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
    // No entry of its own; a former transaction's under its id is retired by its release.
    conds.push(no_own_entry(e, &lock.tx_id, lock.began));
    conds.extend(op_conditions(e, key, op));
    (conds, remove)
}

/// The three shapes of an abort's fence write: add the entry to a fence with room; create the
/// fence with it; or, the fence being full, raise the horizon to the transaction's begin
/// instead.
#[derive(Clone, Copy, PartialEq)]
enum FenceShape {
    Add,
    Create,
    Raise,
}

/// The fence write of `shape`: only on an item that exists, is not the transaction's own (lock
/// or reservation: its id and its `began`) and does not fence it yet (no entry under its id,
/// horizon below its begin; a former transaction's entry is retired first).
fn fence_write(
    key: &Key,
    tx: &TxId,
    fence: &FenceEntry,
    capacity: usize,
    shape: FenceShape,
) -> (Expr, Write) {
    let mut e = Expr::new();
    let k = e.name(first_key_name(key));
    let map = e.name(FENCE);
    let horizon = e.name(HORIZON);
    let lock = e.name(LOCK);
    let locked = owned_by(&mut e, tx, fence.began);
    let reserved = reserved_by(&mut e, tx, fence.began);
    let path = fence_path(&mut e, tx);
    let began = e.value(number(fence.began));
    let res = reservation_name(&mut e, tx);
    let base = format!(
        "attribute_exists({k}) AND (attribute_not_exists({lock}) OR NOT ({locked})) AND (attribute_not_exists({res}) OR NOT ({reserved})) AND attribute_not_exists({path}) AND (attribute_not_exists({horizon}) OR {horizon} < {began})"
    );
    let (set, condition) = match shape {
        FenceShape::Add => (
            format!("{path} = {}", e.value(entry(fence))),
            format!(
                "{base} AND attribute_exists({map}) AND size({map}) < {}",
                e.value(number(capacity as u64))
            ),
        ),
        FenceShape::Create => (
            format!(
                "{map} = {}",
                e.value(AttributeValue::M([(tx.short(), entry(fence))].into()))
            ),
            format!("{base} AND attribute_not_exists({map})"),
        ),
        FenceShape::Raise => (format!("{horizon} = {began}"), base),
    };
    let w = Write {
        update: format!("SET {set}, {}", format_mark(&mut e)),
        condition,
        returns: ReturnValue::None,
    };
    (e, w)
}

/// The shape to try after `shape` was refused by the item `refused` (`None`: the refusal is the
/// answer: fenced already, the transaction's own, or no other shape fits).
fn next_shape(
    shape: FenceShape,
    has_map: bool,
    refused: &ItemState,
    tx: &TxId,
    fence: &FenceEntry,
    capacity: usize,
) -> Option<FenceShape> {
    // Any entry under the id: its own (fenced), or a former transaction's (retired first).
    let fenced = refused.fence.contains_key(tx) || fence.began <= refused.horizon;
    let ours = refused
        .lock
        .as_ref()
        .is_some_and(|l| l.is_of(tx, fence.began))
        || refused
            .reservations
            .get(tx)
            .is_some_and(|r| r.began == fence.began);
    if fenced || ours {
        None
    } else if !has_map && shape == FenceShape::Add {
        Some(FenceShape::Create)
    } else if refused.fence.len() >= capacity && shape != FenceShape::Raise {
        Some(FenceShape::Raise)
    } else {
        None
    }
}

/// The abort's one release: of `c.tx`'s reservation of `c.op` (a reserved op), else of its lock.
async fn abort_by(
    client: &Client,
    table: &str,
    key: &Key,
    c: &Completion<'_>,
) -> Result<CompleteWrite, PortError> {
    if c.op.mode() == Mode::Reserved {
        let done = reservations::release(client, table, key, c, Give::Back).await?;
        if !locked_by(&done, c.tx) {
            return Ok(done);
        }
    }
    let holder = (c.tx, c.entry.began);
    release::release(client, table, key, holder, Some(&c.entry), c.prune).await
}

/// The op of `c.tx`'s reservation, when a release of `c` was refused with it standing under
/// another op.
fn held_with_another_op(done: &CompleteWrite, c: &Completion<'_>) -> Option<Operation> {
    let CompleteWrite::Refused(Some(item)) = done else {
        return None;
    };
    let held = item.reservations.get(c.tx)?;
    (held.is_of(c.tx, c.entry.began) && held.op != *c.op).then(|| held.op.clone())
}
