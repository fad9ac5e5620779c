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

mod eval;
mod native;
mod txlog;

use eval::{
    apply, bump, business_holds, escrow_admits, held, key_id, number_of, poisoned, prune_fits,
    release, releases, seen,
};
pub use native::MemoryNative;
pub use txlog::MemoryTxLog;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::decimal::Decimal;
use crate::ids::TxId;
use crate::item::{Escrow, FenceEntry, ItemState, Key, Lock, StoredReservation};
use crate::layout::VERSION;
use crate::ports::{CompleteWrite, Completion, ParticipantStore, PortError, PrepareWrite};
use crate::rules::{self, AbortStep, FenceOut, PrepareStep, Seen};
use crate::service::KeySchema;

/// Participant items in memory, any number of tables. Clones share the items.
#[derive(Clone, Debug, Default)]
pub struct MemoryItems {
    tables: Arc<Mutex<HashMap<String, BTreeMap<String, ItemState>>>>,
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
        hot_until: Option<u64>,
    ) -> Result<PrepareWrite, PortError> {
        self.with_table(table, |t| {
            let id = key_id(key);
            let item = t.get(&id);
            let op = &lock.op;
            let empty = BTreeMap::new();
            let attrs = item.map_or(&empty, |i| &i.attributes);
            let admitted = rules::prepare(Seen::preparing(item, lock, 0), op.creates())
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
            if let Some(until) = hot_until {
                item.hot_until = until;
            }
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
        let admit = |i: &ItemState| releases(i, c) && (op.delete || prune_fits(i, c.prune));
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
        let admit = |i: &ItemState| releases(i, c) && prune_fits(i, c.prune);
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
        hot_until: Option<u64>,
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
            let full = item.reservations.len() >= most;
            let seen = Seen::preparing(Some(item), lock, now);
            let step = rules::reserve(seen, full);
            if step == PrepareStep::Lock && seen.reserved_by_me {
                return locked(item); // a retry: reserved already, with this operation
            }
            let admitted = step == PrepareStep::Lock && escrow_admits(item, &lock.op);
            if !admitted {
                return PrepareWrite::Refused(Some(Box::new(item.clone())));
            }
            let reply = locked(item);
            if let Some(until) = hot_until {
                item.hot_until = until;
            }
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
        holder: &Lock,
    ) -> Result<CompleteWrite, PortError> {
        let tx = &holder.tx_id;
        self.write(
            table,
            key,
            |i| held(i, tx, holder.began),
            |item| {
                release(item, tx, false, None, None);
                Ok(())
            },
        )
    }

    async fn retire(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        former: FenceEntry,
        horizon: u64,
    ) -> Result<CompleteWrite, PortError> {
        let admit = |i: &ItemState| i.fence.get(tx) == Some(&former) && i.horizon <= horizon;
        self.write(table, key, admit, |item| {
            item.fence.remove(tx);
            item.horizon = horizon;
            Ok(())
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::{NativeStore, NativeWrite};
    use crate::record::TxRecord;

    fn number_key(text: &str) -> Key {
        [(
            "id".to_owned(),
            serde_json::from_str(text).expect("a number"),
        )]
        .into()
    }

    #[tokio::test]
    async fn items_are_keyed_by_value_as_dynamodb_keys_them() {
        let items = MemoryItems::default();
        items.put("ledger", &number_key("1"), BTreeMap::new());
        for spelling in ["1", "1.0", "10e-1", "1.000"] {
            assert!(
                items
                    .read("ledger", &number_key(spelling))
                    .await
                    .expect("read")
                    .is_some(),
                "{spelling} names the item"
            );
        }
        assert!(
            items
                .read("ledger", &number_key("2"))
                .await
                .expect("read")
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_native_transaction_naming_one_item_twice_is_invalid_and_writes_nothing() {
        let (log, items) = (MemoryTxLog::default(), MemoryItems::default());
        items.put("ledger", &number_key("1"), BTreeMap::new());
        let native = MemoryNative::new(log.clone(), items.clone());
        let op = crate::op::Operation::from_json("op", &serde_json::json!({"add": {"n": 1}}))
            .expect("op");
        let (a, b) = (number_key("1"), number_key("1.0"));
        let writes = [
            NativeWrite {
                table: "ledger",
                key: &a,
                op: &op,
            },
            NativeWrite {
                table: "ledger",
                key: &b,
                op: &op,
            },
        ];
        let record = TxRecord::never_began(&TxId::random(), 1);
        let r = native.commit_at_once(&record, &writes).await;
        assert!(matches!(r, Err(PortError::Invalid { .. })), "{r:?}");
        let item = items.read("ledger", &a).await.expect("read").expect("item");
        assert!(!item.attributes.contains_key("n"), "nothing written");
        assert!(log.records.lock().expect("log").is_empty());
    }
}
