//! Native transactions in memory: the record and every item written in one step, or nothing.

use std::collections::{BTreeMap, HashMap};

use crate::item::ItemState;
use crate::ports::{NativeFuture, NativeItem, NativeOutcome, NativeStore, NativeWrite, PortError};
use crate::record::TxRecord;
use crate::rules::{self, NativeStep};

use super::{MemoryItems, MemoryTxLog, apply, business_holds, key_id, poisoned, seen};

/// Every table's items, by key.
type Tables = HashMap<String, BTreeMap<String, ItemState>>;

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
        // DynamoDB refuses a transaction naming one item twice (however its key is spelled)
        // before it reads anything: a request to change, never to retry.
        let mut named = std::collections::BTreeSet::new();
        if !writes
            .iter()
            .all(|w| named.insert((w.table, key_id(w.key))))
        {
            return Err(PortError::Invalid {
                context: format!("committing {tx} natively"),
                message: "ValidationException: Transaction request cannot include multiple operations on one item".into(),
            });
        }
        let found: Vec<NativeItem> = writes
            .iter()
            .map(|w| condition(&tables, record, w))
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
            next.push((w, written(&tables, record, w)?));
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

/// Whether `w`'s condition holds on its item as found ([`rules::native_write`] and the
/// operation's own conditions), else the item that refused it.
fn condition(tables: &Tables, record: &TxRecord, w: &NativeWrite<'_>) -> NativeItem {
    let item = tables.get(w.table).and_then(|t| t.get(&key_id(w.key)));
    let empty = BTreeMap::new();
    let attrs = item.map_or(&empty, |i| &i.attributes);
    let seen = seen(item, &record.tx_id, record.created_at, record.created_at);
    if rules::native_write(seen, w.op.creates()) == NativeStep::Apply
        && business_holds(w.op, w.key, attrs)
    {
        NativeItem::Held
    } else {
        NativeItem::Refused(item.cloned().map(Box::new))
    }
}

/// `w`'s item after its write, on a copy.
fn written(
    tables: &Tables,
    record: &TxRecord,
    w: &NativeWrite<'_>,
) -> Result<ItemState, PortError> {
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
    apply(&mut item, w.key, &record.tx_id, w.op)?;
    Ok(item)
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
