//! What a transaction costs in DynamoDB's billing units, read off the responses: the request
//! counter's interceptor ([`crate::counter`]) sets `ReturnConsumedCapacity=INDEXES` on every
//! typed input and reads `ConsumedCapacity` back, for every system alike, with no change to the
//! production adapters. Units are kept as whole half-units (DynamoDB reports multiples of 0.5).
//!
//! Two gaps are filled, and said so in the report: a write refused by its condition is charged
//! but reports nothing (estimated from the item the refusal returns); DynamoDB Local counts each
//! distinct per-item figure of a multi-item `TransactWriteItems` once per table (four small items:
//! 2 units, not 8), so a transaction counts at least 2 units per item. The prepares' responses
//! also show the largest reservation set and fence, which the audit after a cell cannot see.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use aws_sdk_dynamodb::operation::delete_item::{
    DeleteItemError, DeleteItemInput, DeleteItemOutput,
};
use aws_sdk_dynamodb::operation::get_item::{GetItemInput, GetItemOutput};
use aws_sdk_dynamodb::operation::put_item::{PutItemError, PutItemInput, PutItemOutput};
use aws_sdk_dynamodb::operation::query::{QueryInput, QueryOutput};
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsInput, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::operation::update_item::{
    UpdateItemError, UpdateItemInput, UpdateItemOutput,
};
use aws_sdk_dynamodb::types::{AttributeValue, ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_runtime_api::client::interceptors::context::{Error, Input, Output};
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use twopc_core::layout;

/// Items per table of a `TransactWriteItems`, carried in the request's config bag from
/// serialisation to its response.
#[derive(Clone, Debug)]
struct TransactItems(Vec<(String, u64)>);

impl Storable for TransactItems {
    type Storer = StoreReplace<Self>;
}

/// Write and read units at one moment, in half-units (subtract two to get a window's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Units {
    /// Write units charged to tables  
    pub table: u64,
    /// Write units charged to global secondary indexes .
    pub index: u64,
    /// Writes that reported their units .
    pub writes: u64,
    /// Writes refused by their condition (DynamoDB charges them, reports nothing;
    /// counted whether or not requests ask for their capacity).
    pub refused: u64,
    /// Estimated write units of the refused writes (from the item each returned).
    pub refused_estimate: u64,
    /// Read units (consistent reads, queries).
    pub read: u64,
    /// Bytes of the items put (the coordinator's and the serial driver's records at begin).
    pub put_bytes: u64,
    /// Items put.
    pub puts: u64,
    /// Successful writes whose response carried no units, or units that were not a multiple of
    /// 0.5 (each a sign the figures are incomplete; expected 0).
    pub anomalies: u64,
}

impl Units {
    /// `self - earlier`.
    pub fn since(&self, earlier: &Units) -> Units {
        self.zip(earlier, u64::saturating_sub)
    }

    /// `self + other`.
    pub fn plus(&self, other: &Units) -> Units {
        self.zip(other, |a, b| a + b)
    }

    fn zip(&self, o: &Units, f: impl Fn(u64, u64) -> u64) -> Units {
        Units {
            table: f(self.table, o.table),
            index: f(self.index, o.index),
            writes: f(self.writes, o.writes),
            refused: f(self.refused, o.refused),
            refused_estimate: f(self.refused_estimate, o.refused_estimate),
            read: f(self.read, o.read),
            put_bytes: f(self.put_bytes, o.put_bytes),
            puts: f(self.puts, o.puts),
            anomalies: f(self.anomalies, o.anomalies),
        }
    }

    /// Reported write units (tables and indexes), in half-units.
    pub fn reported_halves(&self) -> u64 {
        self.table + self.index
    }

    /// Estimated write units of refused writes, in half-units.
    pub fn refused_halves(&self) -> u64 {
        self.refused_estimate
    }

    /// Every write unit: reported plus the refused writes' estimate, in half-units.
    pub fn write_halves(&self) -> u64 {
        self.reported_halves() + self.refused_halves()
    }
}

/// The largest things seen in responses since the last [`Meter::take_peaks`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peaks {
    /// Most reservations standing on one item, counting the one a prepare just added.
    pub reservations: u64,
    /// Most fence entries on one item, as a prepare or a refused write found it.
    pub fence: u64,
    /// Largest item a refused write returned (bytes, DynamoDB's sizing).
    pub item_bytes: u64,
}

impl Peaks {
    /// The larger of each.
    pub fn max(&self, o: &Peaks) -> Peaks {
        Peaks {
            reservations: self.reservations.max(o.reservations),
            fence: self.fence.max(o.fence),
            item_bytes: self.item_bytes.max(o.item_bytes),
        }
    }
}

/// The meter's counters (shared by the interceptor's clones).
#[derive(Debug, Default)]
pub struct Meter {
    /// Whether requests ask for their consumed capacity now.
    asking: AtomicBool,
    table: AtomicU64,
    index: AtomicU64,
    writes: AtomicU64,
    refused: AtomicU64,
    refused_estimate: AtomicU64,
    read: AtomicU64,
    put_bytes: AtomicU64,
    puts: AtomicU64,
    anomalies: AtomicU64,
    peak_reservations: AtomicU64,
    peak_fence: AtomicU64,
    peak_item_bytes: AtomicU64,
}

/// Half-units of a reported figure, if it is a whole number of halves.
fn halves(x: f64) -> Option<u64> {
    let h = x * 2.0;
    (h.is_finite() && h >= 0.0 && h.fract() == 0.0 && h < 1e15).then_some(h as u64)
}

impl Meter {
    /// The counts now.
    pub fn snapshot(&self) -> Units {
        Units {
            table: self.table.load(Ordering::Relaxed),
            index: self.index.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            refused_estimate: self.refused_estimate.load(Ordering::Relaxed),
            read: self.read.load(Ordering::Relaxed),
            put_bytes: self.put_bytes.load(Ordering::Relaxed),
            puts: self.puts.load(Ordering::Relaxed),
            anomalies: self.anomalies.load(Ordering::Relaxed),
        }
    }

    /// The peaks since the last call, which starts the next period.
    pub fn take_peaks(&self) -> Peaks {
        Peaks {
            reservations: self.peak_reservations.swap(0, Ordering::Relaxed),
            fence: self.peak_fence.swap(0, Ordering::Relaxed),
            item_bytes: self.peak_item_bytes.swap(0, Ordering::Relaxed),
        }
    }

    /// Whether requests from now on ask for their consumed capacity.
    pub fn set_asking(&self, on: bool) {
        self.asking.store(on, Ordering::SeqCst);
    }

    fn asking(&self) -> bool {
        self.asking.load(Ordering::SeqCst)
    }

    /// Asks the request for its consumed capacity (`INDEXES`: the total, split by table and
    /// index), and notes the size of an item put — while asking.
    pub fn ask(&self, input: &mut Input, cfg: &mut ConfigBag) {
        if !self.asking() {
            return;
        }
        let indexes = Some(ReturnConsumedCapacity::Indexes);
        if let Some(i) = input.downcast_mut::<UpdateItemInput>() {
            i.return_consumed_capacity = indexes;
        } else if let Some(i) = input.downcast_mut::<PutItemInput>() {
            i.return_consumed_capacity = indexes;
            if let Some(item) = &i.item {
                self.put_bytes
                    .fetch_add(item_bytes(item), Ordering::Relaxed);
                self.puts.fetch_add(1, Ordering::Relaxed);
            }
        } else if let Some(i) = input.downcast_mut::<TransactWriteItemsInput>() {
            i.return_consumed_capacity = indexes;
            let mut per_table: Vec<(String, u64)> = vec![];
            for item in i.transact_items.iter().flatten() {
                let table = [
                    item.update().map(|u| u.table_name()),
                    item.put().map(|p| p.table_name()),
                    item.delete().map(|d| d.table_name()),
                    item.condition_check().map(|c| c.table_name()),
                ]
                .into_iter()
                .flatten()
                .next();
                if let Some(t) = table {
                    match per_table.iter_mut().find(|(name, _)| name == t) {
                        Some((_, n)) => *n += 1,
                        None => per_table.push((t.to_owned(), 1)),
                    }
                }
            }
            cfg.interceptor_state().store_put(TransactItems(per_table));
        } else if let Some(i) = input.downcast_mut::<DeleteItemInput>() {
            i.return_consumed_capacity = indexes;
        } else if let Some(i) = input.downcast_mut::<GetItemInput>() {
            i.return_consumed_capacity = indexes;
        } else if let Some(i) = input.downcast_mut::<QueryInput>() {
            i.return_consumed_capacity = indexes;
        }
    }

    /// Charges a write's reported units; `at_least`: half-units the table's share cannot be
    /// below (a transaction's 2 units per item).
    fn write(&self, c: Option<&ConsumedCapacity>, at_least: u64) {
        if !self.asking() {
            return;
        }
        let Some(c) = c else {
            self.anomalies.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let index: Option<u64> = c
            .global_secondary_indexes()
            .into_iter()
            .flat_map(|m| m.values())
            .chain(
                c.local_secondary_indexes()
                    .into_iter()
                    .flat_map(|m| m.values()),
            )
            .map(|cap| cap.capacity_units().and_then(halves))
            .sum();
        let total = c.capacity_units().and_then(halves);
        // The table's share: reported, or the total less the indexes'.
        let table = c
            .table()
            .and_then(|t| t.capacity_units())
            .and_then(halves)
            .or_else(|| Some(total?.saturating_sub(index.unwrap_or(0))));
        match (table, index) {
            (Some(t), Some(i)) => {
                self.table.fetch_add(t.max(at_least), Ordering::Relaxed);
                self.index.fetch_add(i, Ordering::Relaxed);
                self.writes.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                self.anomalies.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn read(&self, c: Option<&ConsumedCapacity>) {
        if !self.asking() {
            return;
        }
        match c.and_then(|c| c.capacity_units()).and_then(halves) {
            Some(h) => self.read.fetch_add(h, Ordering::Relaxed),
            None => self.anomalies.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// A write its condition refused: DynamoDB charges it by the size of the item (at least one
    /// unit), reports nothing; estimated from the item returned, when there is one.
    fn refused(&self, item: Option<&HashMap<String, AttributeValue>>) {
        let bytes = item.map_or(0, item_bytes);
        self.refused.fetch_add(1, Ordering::Relaxed);
        self.refused_estimate
            .fetch_add(2 * bytes.div_ceil(1024).max(1), Ordering::Relaxed);
        if let Some(item) = item {
            self.peak_item_bytes.fetch_max(bytes, Ordering::Relaxed);
            self.note_item(item, 0);
        }
    }

    /// Notes the fence and the reservations of an item as a response showed it (`added`: the
    /// reservation the write itself added, not counted in the old value).
    fn note_item(&self, item: &HashMap<String, AttributeValue>, added: u64) {
        if let Some(AttributeValue::M(fence)) = item.get(layout::FENCE) {
            self.peak_fence
                .fetch_max(fence.len() as u64, Ordering::Relaxed);
        }
        if let Some(AttributeValue::N(n)) = item.get(layout::RESERVATIONS)
            && let Ok(n) = n.parse::<u64>()
        {
            self.peak_reservations
                .fetch_max(n + added, Ordering::Relaxed);
        }
    }

    /// Reads the units of a response.
    pub fn read_output(&self, out: &Output, cfg: &ConfigBag) {
        if let Some(o) = out.downcast_ref::<UpdateItemOutput>() {
            self.write(o.consumed_capacity(), 0);
            if let Some(old) = o.attributes() {
                // A prepare's `UPDATED_OLD`: the fence, and how many reservations stood before
                // the one it added (only a reservation updates the count upward).
                self.note_item(old, 1);
            }
        } else if let Some(o) = out.downcast_ref::<PutItemOutput>() {
            self.write(o.consumed_capacity(), 0);
        } else if let Some(o) = out.downcast_ref::<DeleteItemOutput>() {
            self.write(o.consumed_capacity(), 0);
        } else if let Some(o) = out.downcast_ref::<TransactWriteItemsOutput>() {
            // One entry per table written; at least 2 units per item of that table.
            let items = cfg.load::<TransactItems>();
            let at_least = |table: Option<&str>| {
                items
                    .and_then(|i| i.0.iter().find(|(t, _)| Some(t.as_str()) == table))
                    .map_or(0, |(_, n)| 4 * n)
            };
            match o.consumed_capacity() {
                [] => self.write(None, 0),
                all => all
                    .iter()
                    .for_each(|c| self.write(Some(c), at_least(c.table_name()))),
            }
        } else if let Some(o) = out.downcast_ref::<GetItemOutput>() {
            self.read(o.consumed_capacity());
        } else if let Some(o) = out.downcast_ref::<QueryOutput>() {
            self.read(o.consumed_capacity());
        }
    }

    /// Reads a refusal: a conditional write (or a transaction) refused by its condition.
    pub fn read_error(&self, e: &Error) {
        let refused = if let Some(UpdateItemError::ConditionalCheckFailedException(c)) =
            e.downcast_ref::<UpdateItemError>()
        {
            c.item()
        } else if let Some(PutItemError::ConditionalCheckFailedException(c)) =
            e.downcast_ref::<PutItemError>()
        {
            c.item()
        } else if let Some(DeleteItemError::ConditionalCheckFailedException(c)) =
            e.downcast_ref::<DeleteItemError>()
        {
            c.item()
        } else {
            if let Some(TransactWriteItemsError::TransactionCanceledException(c)) =
                e.downcast_ref::<TransactWriteItemsError>()
            {
                // Estimated as if written: 2 units per item (a transactional write of an item
                // under 1 KB, as the native bench items are).
                self.refused.fetch_add(1, Ordering::Relaxed);
                let items = c.cancellation_reasons().len() as u64;
                self.refused_estimate
                    .fetch_add(4 * items, Ordering::Relaxed);
            }
            return;
        };
        self.refused(refused);
    }
}

/// An item's size as DynamoDB bills it: attribute names plus values; a number takes one byte
/// per two significant digits plus one; a map or list 3 bytes plus 1 per element.
pub fn item_bytes(item: &HashMap<String, AttributeValue>) -> u64 {
    item.iter()
        .map(|(name, v)| name.len() as u64 + value_bytes(v))
        .sum()
}

fn number_bytes(n: &str) -> u64 {
    let digits: String = n
        .chars()
        .take_while(|c| *c != 'e' && *c != 'E')
        .filter(char::is_ascii_digit)
        .collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len() as u64;
    significant.max(1).div_ceil(2) + 1
}

/// A value's size in DynamoDB's sizing (without its name).
pub fn value_bytes(v: &AttributeValue) -> u64 {
    match v {
        AttributeValue::S(s) => s.len() as u64,
        AttributeValue::N(n) => number_bytes(n),
        AttributeValue::B(b) => b.as_ref().len() as u64,
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::M(m) => 3 + m.len() as u64 + item_bytes(m),
        AttributeValue::L(l) => 3 + l.iter().map(|v| 1 + value_bytes(v)).sum::<u64>(),
        AttributeValue::Ss(s) => s.iter().map(|s| s.len() as u64).sum(),
        AttributeValue::Ns(n) => n.iter().map(|n| number_bytes(n)).sum(),
        AttributeValue::Bs(b) => b.iter().map(|b| b.as_ref().len() as u64).sum(),
        _ => 0,
    }
}

/// `n` half-units per `d` things, as a decimal with two places (exact integer arithmetic,
/// rounded half up); `–` when `d` is 0.
pub fn per(halves: u64, d: u64) -> String {
    if d == 0 {
        return "–".into();
    }
    let hundredths = (u128::from(halves) * 100 + u128::from(d)) / (2 * u128::from(d));
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_dynamodbs_rules() {
        // name + value: "id" + "acct-00001" = 12; "balance" + 1000000000 (1 significant digit:
        // 1 + 1 byte) = 9.
        let item = HashMap::from([
            ("id".to_owned(), AttributeValue::S("acct-00001".into())),
            ("balance".to_owned(), AttributeValue::N("1000000000".into())),
        ]);
        assert_eq!(item_bytes(&item), 12 + 9);
        // 13 significant digits: 7 + 1.
        assert_eq!(number_bytes("1763912345678"), 8);
        assert_eq!(number_bytes("-42"), 2);
        // A map: 3 + 1 per element + its entries.
        let m = AttributeValue::M(HashMap::from([(
            "o".to_owned(),
            AttributeValue::S("c".into()),
        )]));
        assert_eq!(value_bytes(&m), 3 + 1 + 2);
    }

    #[test]
    fn halves_are_exact_and_refuse_what_is_not_a_half() {
        assert_eq!(halves(3.0), Some(6));
        assert_eq!(halves(0.5), Some(1));
        assert_eq!(halves(0.3), None);
        assert_eq!(halves(-1.0), None);
        assert_eq!(per(7, 2), "1.75");
        assert_eq!(per(1, 3), "0.17");
        assert_eq!(per(5, 0), "–");
    }
}
