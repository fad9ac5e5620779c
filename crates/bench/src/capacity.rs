//! What a transaction costs in DynamoDB's capacity units, read off the responses: the request
//! counter's interceptor ([`crate::counter`]) sets `ReturnConsumedCapacity=TOTAL` on every write
//! and read and reads `ConsumedCapacity` back, for every system alike, with no change to the
//! production adapters. Units are kept as whole half-units (DynamoDB reports multiples of 0.5).
//!
//! Gaps filled, each kept apart so the report can show the bounds: a write refused by its
//! condition is charged by the size of the item it returns (documented: a failed condition
//! consumes capacity); a cancelled transaction (2 units per item) and a single write refused
//! for a transaction's hold (1 unit) are kept apart, charged by the high bound and not by the
//! low one (no source says which holds); DynamoDB Local counts each distinct per-item figure of a multi-item
//! `TransactWriteItems` once per table, so a transaction counts at least 2 units per item; an
//! index entry written (a write that sets or removes an attribute of a table's sparse index)
//! costs one index write unit, which DynamoDB Local does not report. The prepares' responses
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

/// The attributes of the tables' sparse indexes (the participants' lock index, the records'
/// pending index and what it projects): a write naming one writes an index entry.
const INDEXED: [&str; 5] = [
    layout::LOCK_SHARD,
    layout::LOCK_EXPIRES_AT,
    layout::PENDING,
    layout::DEADLINE,
    layout::RETRY_AFTER,
];

/// The indexes' partition keys: a put item is in an index only if it carries one.
const INDEX_KEYS: [&str; 2] = [layout::LOCK_SHARD, layout::PENDING];

/// A `TransactWriteItems`'s item count, carried in the request's config bag from
/// serialisation to its response.
#[derive(Clone, Debug)]
struct TransactItems(u64);

impl Storable for TransactItems {
    type Storer = StoreReplace<Self>;
}

/// The largest things seen in responses since the last [`Meter::take_peaks`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peaks {
    /// Most reservations standing on one item, counting the one a prepare just added.
    pub reservations: u64,
    /// Most fence entries on one item, as a prepare or a refused write found it.
    pub fence: u64,
}

impl Peaks {
    /// The larger of each.
    pub fn max(&self, o: &Peaks) -> Peaks {
        Peaks {
            reservations: self.reservations.max(o.reservations),
            fence: self.fence.max(o.fence),
        }
    }
}

/// Units counted so far (subtract two to get a window's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Units {
    /// Write units, half-units: reported, and the conditional refusals' size.
    pub write_halves: u64,
    /// Of cancelled transactions (2 per item) and writes refused for a hold (1), half-units:
    /// the high bound's addition.
    pub cancelled_halves: u64,
    /// Read units, half-units.
    pub read_halves: u64,
    /// Index entries written (one write unit each).
    pub index_writes: u64,
    /// Successful writes whose response reported no whole number of half-units (expected 0).
    pub anomalies: u64,
}

impl Units {
    /// Each field by `f` of the two.
    pub fn zip(&self, o: &Units, f: impl Fn(u64, u64) -> u64) -> Units {
        Units {
            write_halves: f(self.write_halves, o.write_halves),
            cancelled_halves: f(self.cancelled_halves, o.cancelled_halves),
            read_halves: f(self.read_halves, o.read_halves),
            index_writes: f(self.index_writes, o.index_writes),
            anomalies: f(self.anomalies, o.anomalies),
        }
    }
}

/// The meter's counters (shared by the interceptor's clones).
#[derive(Debug, Default)]
pub struct Meter {
    /// Whether requests ask for their consumed capacity now.
    asking: AtomicBool,
    write_halves: AtomicU64,
    cancelled_halves: AtomicU64,
    read_halves: AtomicU64,
    index_writes: AtomicU64,
    anomalies: AtomicU64,
    peak_reservations: AtomicU64,
    peak_fence: AtomicU64,
}

/// Half-units of a reported figure, if it is a whole number of halves.
fn halves(x: f64) -> Option<u64> {
    let h = x * 2.0;
    (h.is_finite() && h >= 0.0 && h.fract() == 0.0 && h < 1e15).then_some(h as u64)
}

/// Whether an update expression (with its placeholders) names an indexed attribute.
fn names_indexed(expression: Option<&str>, names: Option<&HashMap<String, String>>) -> bool {
    let Some(expression) = expression else {
        return false;
    };
    expression
        .split(|c: char| !(c.is_alphanumeric() || c == '#' || c == '_'))
        .map(|token| {
            names
                .and_then(|n| n.get(token))
                .map_or(token, String::as_str)
        })
        .any(|name| INDEXED.contains(&name))
}

/// Whether a put's item is in an index (it carries an index's partition key).
fn carries_indexed(item: Option<&HashMap<String, AttributeValue>>) -> bool {
    item.is_some_and(|i| INDEX_KEYS.iter().any(|a| i.contains_key(*a)))
}

impl Meter {
    /// Units so far.
    pub fn snapshot(&self) -> Units {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Units {
            write_halves: load(&self.write_halves),
            cancelled_halves: load(&self.cancelled_halves),
            read_halves: load(&self.read_halves),
            index_writes: load(&self.index_writes),
            anomalies: load(&self.anomalies),
        }
    }

    /// The peaks since the last call, which starts the next period.
    pub fn take_peaks(&self) -> Peaks {
        Peaks {
            reservations: self.peak_reservations.swap(0, Ordering::Relaxed),
            fence: self.peak_fence.swap(0, Ordering::Relaxed),
        }
    }

    /// Whether requests from now on ask for their consumed capacity.
    pub fn set_asking(&self, on: bool) {
        self.asking.store(on, Ordering::SeqCst);
    }

    fn asking(&self) -> bool {
        self.asking.load(Ordering::SeqCst)
    }

    /// Asks a request for its consumed capacity (while asking), counts the index entries it
    /// writes, and notes a transaction's items.
    pub fn ask(&self, input: &mut Input, cfg: &mut ConfigBag) {
        if !self.asking() {
            return;
        }
        let total = Some(ReturnConsumedCapacity::Total);
        let mut indexed = 0;
        if let Some(i) = input.downcast_mut::<UpdateItemInput>() {
            i.return_consumed_capacity = total;
            indexed += u64::from(names_indexed(
                i.update_expression.as_deref(),
                i.expression_attribute_names.as_ref(),
            ));
        } else if let Some(i) = input.downcast_mut::<PutItemInput>() {
            i.return_consumed_capacity = total;
            indexed += u64::from(carries_indexed(i.item.as_ref()));
        } else if let Some(i) = input.downcast_mut::<DeleteItemInput>() {
            i.return_consumed_capacity = total;
        } else if let Some(i) = input.downcast_mut::<GetItemInput>() {
            i.return_consumed_capacity = total;
        } else if let Some(i) = input.downcast_mut::<QueryInput>() {
            i.return_consumed_capacity = total;
        } else if let Some(i) = input.downcast_mut::<TransactWriteItemsInput>() {
            i.return_consumed_capacity = total;
            let items = i.transact_items.as_deref().unwrap_or_default();
            for item in items {
                let update = item.update();
                let put = item.put();
                indexed += u64::from(
                    update.is_some_and(|u| {
                        names_indexed(
                            Some(u.update_expression()),
                            u.expression_attribute_names.as_ref(),
                        )
                    }) || put.is_some_and(|p| carries_indexed(Some(p.item()))),
                );
            }
            cfg.interceptor_state()
                .store_put(TransactItems(items.len() as u64));
        }
        self.index_writes.fetch_add(indexed, Ordering::Relaxed);
    }

    /// Charges a request's reported units to `to`, at least `at_least` half-units.
    fn charge<'a>(
        &self,
        to: &AtomicU64,
        c: impl IntoIterator<Item = &'a ConsumedCapacity>,
        at_least: u64,
    ) {
        if !self.asking() {
            return;
        }
        let c: Vec<&ConsumedCapacity> = c.into_iter().collect();
        let reported: Option<u64> = c.iter().map(|c| c.capacity_units().and_then(halves)).sum();
        match reported {
            Some(h) if !c.is_empty() => {
                to.fetch_add(h.max(at_least), Ordering::Relaxed);
            }
            _ => {
                self.anomalies.fetch_add(1, Ordering::Relaxed);
            }
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
        let writes = &self.write_halves;
        if let Some(o) = out.downcast_ref::<UpdateItemOutput>() {
            self.charge(writes, o.consumed_capacity(), 0);
            if let Some(old) = o.attributes() {
                // A prepare's `UPDATED_OLD`: the fence, and how many reservations stood before
                // the one it added (only a reservation updates the count upward).
                self.note_item(old, 1);
            }
        } else if let Some(o) = out.downcast_ref::<PutItemOutput>() {
            self.charge(writes, o.consumed_capacity(), 0);
        } else if let Some(o) = out.downcast_ref::<DeleteItemOutput>() {
            self.charge(writes, o.consumed_capacity(), 0);
        } else if let Some(o) = out.downcast_ref::<TransactWriteItemsOutput>() {
            // At least 2 units (4 half-units) per item.
            let items = cfg.load::<TransactItems>().map_or(0, |t| t.0);
            self.charge(writes, o.consumed_capacity(), 4 * items);
        } else if let Some(o) = out.downcast_ref::<GetItemOutput>() {
            self.charge(&self.read_halves, o.consumed_capacity(), 0);
        } else if let Some(o) = out.downcast_ref::<QueryOutput>() {
            self.charge(&self.read_halves, o.consumed_capacity(), 0);
        }
    }

    /// Reads a refusal: a conditional write refused by its condition (charged by the size of
    /// the item returned, at least one unit; DynamoDB reports nothing), a cancelled
    /// transaction or a write refused for a hold (the high bound's).
    pub fn read_error(&self, e: &Error) {
        if !self.asking() {
            return;
        }
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
            self.cancelled_halves
                .fetch_add(cancelled_halves(e), Ordering::Relaxed);
            return;
        };
        let bytes = refused.map_or(0, item_bytes);
        self.write_halves
            .fetch_add(2 * bytes.div_ceil(1024).max(1), Ordering::Relaxed);
        if let Some(item) = refused {
            self.note_item(item, 0);
        }
    }
}

/// The high bound's charge of a cancelled transaction (2 units per item) or of a single write
/// refused for a transaction's hold (1 unit), in half-units; 0 for any other error.
fn cancelled_halves(e: &Error) -> u64 {
    if let Some(TransactWriteItemsError::TransactionCanceledException(c)) =
        e.downcast_ref::<TransactWriteItemsError>()
    {
        return 4 * c.cancellation_reasons().len() as u64;
    }
    let conflict = |code: Option<&str>| u64::from(code == Some("TransactionConflictException")) * 2;
    use aws_sdk_dynamodb::error::ProvideErrorMetadata;
    if let Some(u) = e.downcast_ref::<UpdateItemError>() {
        conflict(u.code())
    } else if let Some(p) = e.downcast_ref::<PutItemError>() {
        conflict(p.code())
    } else if let Some(d) = e.downcast_ref::<DeleteItemError>() {
        conflict(d.code())
    } else {
        0
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
    }

    #[test]
    fn an_index_entry_is_written_by_a_write_naming_an_indexed_attribute() {
        let names = HashMap::from([
            ("#s".to_owned(), layout::LOCK_SHARD.to_owned()),
            ("#b".to_owned(), "balance".to_owned()),
        ]);
        assert!(names_indexed(
            Some("SET #b = #b + :d, #s = :s"),
            Some(&names)
        ));
        assert!(names_indexed(Some("REMOVE #s"), Some(&names)));
        assert!(!names_indexed(Some("SET #b = #b + :d"), Some(&names)));
        assert!(!names_indexed(Some("SET #sx = :s"), Some(&names)));
        let item = HashMap::from([(layout::PENDING.to_owned(), AttributeValue::S("P1".into()))]);
        assert!(carries_indexed(Some(&item)));
        // A finished record keeps its deadline but has left the pending index.
        let done = HashMap::from([(layout::DEADLINE.to_owned(), AttributeValue::N("1".into()))]);
        assert!(!carries_indexed(Some(&done)));
        assert!(!carries_indexed(Some(&HashMap::new())));
    }
}
