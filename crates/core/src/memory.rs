//! In-memory stores with DynamoDB's conditional semantics, for fast tests of the async protocol
//! logic (feature `memory`). Each method is one atomic step, as one conditional DynamoDB request
//! is: a refused write changes nothing and returns the item as it was. Admission is the rules of
//! [`crate::rules`] plus the operation's own conditions, evaluated as DynamoDB evaluates them;
//! `tests/tests/contract.rs` runs one suite against these and against DynamoDB Local, so the two
//! cannot drift apart.
//!
//! Numbers are exact: `add` and the comparisons of `require` use decimal arithmetic (the
//! `bigdecimal` crate), and a sum DynamoDB could not store (more than 38 significant digits) is
//! refused as DynamoDB refuses it.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::decimal::Decimal;
use crate::ids::TxId;
use crate::item::{Escrow, FenceEntry, ItemState, Key, Lock, StoredReservation};
use crate::layout::{LAST_TX, VERSION};
use crate::message::Prune;
use crate::op::{Comparator, Condition, Operation};
use crate::ports::{
    CompleteWrite, Completion, Created, NativeFuture, NativeItem, NativeOutcome, NativeStore,
    NativeWrite, ParticipantStore, PortError, PrepareWrite, Swapped, TxLog, check_transition,
};
use crate::record::{TxRecord, Vote};
use crate::request::KeySchema;
use crate::rules::{self, AbortStep, EscrowSeen, FenceOut, NativeStep, PrepareStep, Seen};
use crate::status::TxStatus;

/// Participant items in memory, any number of tables. Clones share the items.
#[derive(Clone, Debug, Default)]
pub struct MemoryItems {
    tables: Arc<Mutex<HashMap<String, BTreeMap<String, ItemState>>>>,
}

/// The transaction log in memory. Clones share the records.
#[derive(Clone, Debug, Default)]
pub struct MemoryTxLog {
    records: Arc<Mutex<BTreeMap<TxId, TxRecord>>>,
}

/// The in-memory stores' all-or-nothing write across the log and the items (what DynamoDB's
/// `TransactWriteItems` is to the DynamoDB adapters): both locked for the whole step.
#[derive(Clone, Debug, Default)]
pub struct MemoryNative {
    log: MemoryTxLog,
    items: MemoryItems,
}

impl MemoryNative {
    /// Over these stores (clones share their contents).
    pub fn new(log: MemoryTxLog, items: MemoryItems) -> Self {
        MemoryNative { log, items }
    }

    fn commit_now(
        &self,
        record: &TxRecord,
        writes: &[NativeWrite<'_>],
    ) -> Result<NativeOutcome, PortError> {
        // Always the log first, then the items: nothing else holds both.
        let mut records = self.log.records.lock().map_err(|_| poisoned("log"))?;
        let mut tables = self.items.tables.lock().map_err(|_| poisoned("items"))?;
        let tx = &record.tx_id;
        let found: Vec<NativeItem> = writes
            .iter()
            .map(|w| {
                let item = tables.get(w.table).and_then(|t| t.get(&key_id(w.key)));
                let empty = BTreeMap::new();
                let attrs = item.map_or(&empty, |i| &i.attributes);
                let seen = seen(item, tx, record.created_at, record.created_at);
                if rules::native_write(seen, w.op.creates()) == NativeStep::Apply
                    && business_holds(w.op, w.key, attrs)
                {
                    NativeItem::Held
                } else {
                    NativeItem::Refused(item.cloned().map(Box::new))
                }
            })
            .collect();
        let existing = records.get(tx).cloned().map(Box::new);
        if existing.is_some() || found.iter().any(|f| *f != NativeItem::Held) {
            return Ok(NativeOutcome::Cancelled {
                record: existing,
                items: found,
            });
        }
        // Every write on a copy first: one that fails (a sum DynamoDB cannot store) changes
        // nothing.
        let mut next = Vec::with_capacity(writes.len());
        for w in writes {
            let mut item = tables
                .get(w.table)
                .and_then(|t| t.get(&key_id(w.key)))
                .cloned()
                .unwrap_or_else(|| ItemState {
                    attributes: w.key.clone(),
                    ..ItemState::default()
                });
            item.tombstone = false;
            // No reservation stands: the escrow of what it adds to is idle, and goes.
            for name in w.op.add.keys() {
                item.escrow.remove(name);
            }
            apply(&mut item, w.key, tx, w.op)?;
            next.push((w, item));
        }
        for (w, item) in next {
            tables
                .entry(w.table.to_owned())
                .or_default()
                .insert(key_id(w.key), item);
        }
        records.insert(tx.clone(), record.clone());
        Ok(NativeOutcome::Committed)
    }
}

impl NativeStore for MemoryNative {
    fn commit_at_once<'a>(
        &'a self,
        record: &'a TxRecord,
        writes: &'a [NativeWrite<'a>],
    ) -> NativeFuture<'a> {
        Box::pin(std::future::ready(self.commit_now(record, writes)))
    }
}

fn poisoned(what: &str) -> PortError {
    PortError::Fatal {
        context: format!("in-memory {what}"),
        source: "a lock was poisoned by a panic".into(),
    }
}

fn key_id(key: &Key) -> String {
    serde_json::to_string(key).unwrap_or_default()
}

/// The item as a step of `tx` sees it at `now` (holders' expiry does not matter to admission;
/// a pause of reservations does).
fn seen(item: Option<&ItemState>, tx: &TxId, began: u64, now: u64) -> Seen {
    item.map_or(Seen::ABSENT, |i| Seen::of(i, tx, began, now))
}

/// DynamoDB's comparison of an attribute with a value: numbers numerically, strings by their
/// UTF-8 bytes; `=` and `<>` also for other values of the same type. Values of different types,
/// and a missing attribute, are unequal to anything and unordered (so `<>` holds for them; the
/// contract suite found this on DynamoDB Local).
fn compares(attr: Option<&Value>, c: Comparator, v: &Value) -> bool {
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
fn business_holds(op: &Operation, key: &Key, attrs: &BTreeMap<String, Value>) -> bool {
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
fn add(current: Option<&Value>, delta: &Decimal) -> Result<Value, String> {
    let base = current.and_then(number_of).unwrap_or_else(Decimal::zero);
    base.checked_add(delta)
        .map(|d| d.to_json())
        .map_err(|e| format!("Number overflow: {e}"))
}

fn apply(item: &mut ItemState, key: &Key, tx: &TxId, op: &Operation) -> Result<(), PortError> {
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

fn bump(item: &mut ItemState, tx: &TxId) {
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
fn release(
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

/// Whether `tx` holds the item (its lock or a reservation).
fn held(item: &ItemState, tx: &TxId) -> bool {
    item.lock.as_ref().is_some_and(|l| &l.tx_id == tx) || item.reservations.contains_key(tx)
}

/// The escrow of a released reservation of `op`, whose changes the value now holds (`applied`:
/// committed just before) or never will: each extreme keeps only what the remaining
/// reservations could still do (the last leaves them at the value, idle).
fn give_back(item: &mut ItemState, op: &Operation, applied: bool) {
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
fn escrow_admits(item: &ItemState, op: &Operation) -> bool {
    op.escrow().is_some_and(|escrowed| {
        escrowed.iter().all(|(name, e)| {
            EscrowSeen::of(item, name, e).is_some_and(|seen| rules::escrow(seen).is_ok())
        })
    })
}

fn number_of(v: &Value) -> Option<Decimal> {
    match v {
        Value::Number(n) => Decimal::parse(&n.to_string()).ok(),
        _ => None,
    }
}

/// Whether the holder's pruning release may write: the horizon is not above the planned one (a
/// lock-free abort may have raised it since the prepare).
fn prune_fits(item: &ItemState, prune: Option<&Prune>) -> bool {
    prune.is_none_or(|p| item.horizon <= p.horizon)
}

impl MemoryItems {
    fn with_table<T>(
        &self,
        table: &str,
        f: impl FnOnce(&mut BTreeMap<String, ItemState>) -> T,
    ) -> Result<T, PortError> {
        let mut tables = self.tables.lock().map_err(|_| poisoned("items"))?;
        Ok(f(tables.entry(table.to_owned()).or_default()))
    }

    /// Writes an item outside the protocol (a seed), replacing any.
    pub fn put(&self, table: &str, key: &Key, attributes: BTreeMap<String, Value>) {
        let mut attrs: BTreeMap<String, Value> = key.clone();
        attrs.extend(attributes);
        let _ = self.with_table(table, |t| {
            t.insert(
                key_id(key),
                ItemState {
                    attributes: attrs,
                    ..ItemState::default()
                },
            )
        });
    }

    /// Sets one business attribute of an existing item outside the protocol (as the service
    /// itself may), leaving everything else as it is.
    pub fn set_attribute(&self, table: &str, key: &Key, name: &str, value: Value) {
        let _ = self.with_table(table, |t| {
            if let Some(item) = t.get_mut(&key_id(key)) {
                item.attributes.insert(name.to_owned(), value);
            }
        });
    }

    /// One conditional write on an existing item: refused (changing nothing, returning the
    /// item as it was) unless `admit` holds; otherwise `write` runs on a copy that replaces the
    /// item only if it succeeds, so a failed write changes nothing either.
    fn write(
        &self,
        table: &str,
        key: &Key,
        admit: impl FnOnce(&ItemState) -> bool,
        write: impl FnOnce(&mut ItemState) -> Result<(), PortError>,
    ) -> Result<CompleteWrite, PortError> {
        self.with_table(table, |t| {
            let Some(item) = t.get_mut(&key_id(key)) else {
                return Ok(CompleteWrite::Refused(None));
            };
            if !admit(item) {
                return Ok(CompleteWrite::Refused(Some(Box::new(item.clone()))));
            }
            let mut next = item.clone();
            write(&mut next)?;
            *item = next;
            Ok(CompleteWrite::Done)
        })?
    }
}

impl ParticipantStore for MemoryItems {
    async fn prepare(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
    ) -> Result<PrepareWrite, PortError> {
        self.with_table(table, |t| {
            let id = key_id(key);
            let item = t.get(&id);
            let op = &lock.op;
            let empty = BTreeMap::new();
            let attrs = item.map_or(&empty, |i| &i.attributes);
            let admitted = rules::prepare(seen(item, &lock.tx_id, lock.began, 0), op.creates())
                == PrepareStep::Lock
                && business_holds(op, key, attrs);
            if !admitted {
                return PrepareWrite::Refused(item.cloned().map(Box::new));
            }
            let (fence, horizon) =
                item.map_or_else(Default::default, |i| (i.fence.clone(), i.horizon));
            let item = t.entry(id).or_insert_with(|| ItemState {
                attributes: key.clone(),
                ..ItemState::default()
            });
            item.lock = Some(lock.clone());
            if op.creates() {
                item.placeholder = true;
                item.tombstone = false;
            }
            PrepareWrite::Locked { fence, horizon }
        })
    }

    async fn commit(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
    ) -> Result<CompleteWrite, PortError> {
        let op = c.op;
        // A delete's tombstone takes the higher horizon (read, then replace); any other commit
        // is refused if the horizon rose above the planned one.
        let admit = |i: &ItemState| held(i, c.tx) && (op.delete || prune_fits(i, c.prune));
        self.write(table, key, admit, |item| {
            if op.delete {
                let version = item.attributes.get(VERSION).cloned();
                item.attributes = key.clone();
                item.attributes
                    .extend(version.map(|v| (VERSION.to_owned(), v)));
                bump(item, c.tx);
                release(item, c.tx, true, Some(c.entry), c.prune);
                item.tombstone = true;
            } else {
                apply(item, key, c.tx, op)?;
                release(item, c.tx, true, Some(c.entry), c.prune);
            }
            Ok(())
        })
    }

    async fn abort(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
    ) -> Result<CompleteWrite, PortError> {
        let admit = |i: &ItemState| held(i, c.tx) && prune_fits(i, c.prune);
        self.write(table, key, admit, |item| {
            release(item, c.tx, false, Some(c.entry), c.prune);
            Ok(())
        })
    }

    async fn reserve(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
        now: u64,
        most: usize,
    ) -> Result<PrepareWrite, PortError> {
        self.with_table(table, |t| {
            let Some(item) = t.get_mut(&key_id(key)) else {
                return PrepareWrite::Refused(None);
            };
            let locked = |i: &ItemState| PrepareWrite::Locked {
                fence: i.fence.clone(),
                horizon: i.horizon,
            };
            if item.reservations.contains_key(&lock.tx_id) {
                return locked(item); // a retry: reserved already
            }
            let full = item.reservations.len() >= most;
            let admitted = rules::reserve(seen(Some(item), &lock.tx_id, lock.began, now), full)
                == PrepareStep::Lock
                && escrow_admits(item, &lock.op);
            if !admitted {
                return PrepareWrite::Refused(Some(Box::new(item.clone())));
            }
            let reply = locked(item);
            for (name, e) in lock.op.escrow().into_iter().flatten() {
                let value = item
                    .attributes
                    .get(&name)
                    .and_then(number_of)
                    .unwrap_or_else(Decimal::zero);
                let s = item.escrow.entry(name).or_insert_with(|| Escrow::at(value));
                s.count += 1;
                s.floors += u64::from(e.floor.is_some());
                s.ceilings += u64::from(e.ceiling.is_some());
                s.low = s
                    .low
                    .checked_add(&e.delta.min_zero())
                    .unwrap_or_else(|_| s.low.clone());
                s.high = s
                    .high
                    .checked_add(&e.delta.max_zero())
                    .unwrap_or_else(|_| s.high.clone());
                if e.floor.is_some() {
                    s.floor = e.floor;
                }
                if e.ceiling.is_some() {
                    s.ceiling = e.ceiling;
                }
            }
            // As the DynamoDB adapter stores it.
            let stored = StoredReservation::of(lock).into_lock(lock.tx_id.clone());
            item.reservations.insert(lock.tx_id.clone(), stored);
            reply
        })
    }

    async fn reset_escrow(
        &self,
        table: &str,
        key: &Key,
        attributes: &[&str],
    ) -> Result<(), PortError> {
        self.with_table(table, |t| {
            if let Some(item) = t.get_mut(&key_id(key)) {
                for name in attributes {
                    if item.escrow.get(*name).is_some_and(|s| s.count == 0) {
                        item.escrow.remove(*name);
                    }
                }
            }
        })
    }

    async fn pause_reservations(
        &self,
        table: &str,
        key: &Key,
        until: u64,
    ) -> Result<(), PortError> {
        self.with_table(table, |t| {
            if let Some(item) = t.get_mut(&key_id(key)) {
                item.paused_until = item.paused_until.max(until);
            }
        })
    }

    async fn fence_aborted(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        entry: FenceEntry,
        capacity: usize,
    ) -> Result<CompleteWrite, PortError> {
        let admit =
            |i: &ItemState| rules::abort(seen(Some(i), tx, entry.began, 0)) == AbortStep::FenceOut;
        self.write(table, key, admit, |item| {
            match rules::fence_out(item.fence.len(), capacity) {
                FenceOut::Entry => {
                    item.fence.insert(tx.clone(), entry);
                }
                FenceOut::RaiseHorizon => item.horizon = entry.began,
            }
            Ok(())
        })
    }

    async fn bury_aborted(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        entry: FenceEntry,
    ) -> Result<CompleteWrite, PortError> {
        self.with_table(table, |t| {
            let id = key_id(key);
            if let Some(item) = t.get(&id) {
                return CompleteWrite::Refused(Some(Box::new(item.clone())));
            }
            t.insert(
                id,
                ItemState {
                    attributes: key.clone(),
                    tombstone: true,
                    fence: [(tx.clone(), entry)].into(),
                    ..ItemState::default()
                },
            );
            CompleteWrite::Done
        })
    }

    async fn drop_lock(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        _op: &Operation,
    ) -> Result<CompleteWrite, PortError> {
        self.write(
            table,
            key,
            |i| held(i, tx),
            |item| {
                release(item, tx, false, None, None);
                Ok(())
            },
        )
    }

    async fn expired_locks(
        &self,
        table: &str,
        schema: &KeySchema,
        now: u64,
        limit: usize,
    ) -> Result<Vec<(Key, Lock)>, PortError> {
        self.with_table(table, |t| {
            let mut found: Vec<(Key, Lock)> = t
                .values()
                .flat_map(|i| {
                    let key = schema
                        .attributes()
                        .map(|a| Some((a.name.clone(), i.attributes.get(&a.name)?.clone())))
                        .collect::<Option<Key>>();
                    let holders = i.lock.iter().chain(i.reservations.values());
                    holders
                        .filter(|l| l.expires_at < now)
                        .filter_map(move |l| Some((key.clone()?, l.clone())))
                        .collect::<Vec<_>>()
                })
                .collect();
            found.sort_by_key(|(_, l)| l.expires_at);
            found.truncate(limit);
            found
        })
    }

    async fn read(&self, table: &str, key: &Key) -> Result<Option<ItemState>, PortError> {
        self.with_table(table, |t| t.get(&key_id(key)).cloned())
    }
}

impl MemoryTxLog {
    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<TxId, TxRecord>) -> T) -> Result<T, PortError> {
        let mut records = self.records.lock().map_err(|_| poisoned("log"))?;
        Ok(f(&mut records))
    }
}

impl TxLog for MemoryTxLog {
    async fn create(&self, record: &TxRecord) -> Result<Created, PortError> {
        self.with(|r| match r.get(&record.tx_id) {
            Some(existing) => Created::Exists(Box::new(existing.clone())),
            None => {
                r.insert(record.tx_id.clone(), record.clone());
                Created::New
            }
        })
    }

    async fn get(&self, tx: &TxId) -> Result<Option<TxRecord>, PortError> {
        self.with(|r| r.get(tx).cloned())
    }

    async fn transition(
        &self,
        record: &TxRecord,
        to: TxStatus,
        votes: Option<&[Vote]>,
        now: u64,
    ) -> Result<Swapped, PortError> {
        check_transition(record, to)?;
        let (tx, from) = (&record.tx_id, record.status);
        self.with(|r| match r.get_mut(tx) {
            Some(stored) if stored.status == from => {
                // The swap writes only the status, the time, the votes and (terminal) clears
                // the backoff: the rest of the stored record stays as it is.
                let moved = stored.moved(to, votes, now);
                *stored = moved;
                Swapped::Done(Box::new(record.moved(to, votes, now)))
            }
            Some(stored) => Swapped::Lost(Some(Box::new(stored.clone()))),
            None => Swapped::Lost(None),
        })
    }

    async fn create_aborted(&self, tx: &TxId, now: u64) -> Result<Created, PortError> {
        self.create(&TxRecord::never_began(tx, now)).await
    }

    async fn overdue(&self, now: u64, limit: usize) -> Result<Vec<TxRecord>, PortError> {
        self.with(|r| {
            let mut found: Vec<TxRecord> = r
                .values()
                .filter(|x| !x.status.is_terminal() && x.deadline < now)
                .filter(|x| x.retry_after.is_none_or(|t| t < now))
                .cloned()
                .collect();
            found.sort_by_key(|x| x.deadline);
            found.truncate(limit);
            found
        })
    }

    async fn oldest_pending_deadline(&self) -> Result<Option<u64>, PortError> {
        self.with(|r| {
            r.values()
                .filter(|x| !x.status.is_terminal())
                .map(|x| x.deadline)
                .min()
        })
    }

    async fn note_failed_attempt(
        &self,
        tx: &TxId,
        retry_after: u64,
        now: u64,
    ) -> Result<(), PortError> {
        self.with(|r| {
            if let Some(x) = r.get_mut(tx).filter(|x| !x.status.is_terminal()) {
                x.attempts += 1;
                x.retry_after = Some(retry_after);
                x.updated_at = now;
            }
        })
    }

    async fn ask_recovery(&self, tx: &TxId, now: u64) -> Result<bool, PortError> {
        self.with(|r| match r.get_mut(tx) {
            Some(x) if x.status == TxStatus::Staging && x.recovery_asked.is_none() => {
                x.recovery_asked = Some(now);
                x.updated_at = now;
                true
            }
            _ => false,
        })
    }
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
