//! What DynamoDB does with a write once it reaches the service, beyond taking time: the two
//! rules of the production model ([`Production`]), each from DynamoDB's documentation.
//!
//! - **Transaction conflicts** (Developer Guide, "Transaction conflict handling in DynamoDB"):
//!   an item is held by a `TransactWriteItems` from the moment the request reaches the service
//!   until it completes. Another `TransactWriteItems` that includes the item is cancelled with
//!   the reason `TransactionConflict`; a `PutItem`, `UpdateItem` or `DeleteItem` on it is
//!   refused with `TransactionConflictException`. How long the hold lasts is not published:
//!   [`Production::hold_share`] of the transaction's sampled latency, from its arrival.
//! - **The partition's write rate** (Developer Guide, "Partitions and data distribution" and
//!   "Burst and adaptive capacity"): one partition takes at most 1,000 write units a second,
//!   and one item lives in one partition, so single-item writes to one item are served one
//!   after another, each occupying the item for its units (one per KB of the request, at least
//!   one) over [`Production::partition_units`].
//!
//! [`Service`] keeps both per item: the holds of transactions under way and when each item's
//! partition is next free. Keys are `table/key-json`, read from the request body by
//! [`writes_of`].

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::time::Instant;

/// The key attributes of the bench's tables (items: `id`; records: `txId`), read from a
/// `PutItem`'s or a transaction's `Put` item, which names no key apart.
const KEY_ATTRIBUTES: [&str; 2] = ["id", twopc_core::layout::TX_ID];

/// The assumptions no source fixes, as parameters (printed in the report).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Production {
    /// How long a `TransactWriteItems` holds its items from its arrival at the service, as a
    /// share of its sampled latency (0.5: from its arrival until its answer leaves).
    pub hold_share: f64,
    /// Write units a second one item's partition serves (DynamoDB's documented 1,000).
    pub partition_units: u32,
}

impl Default for Production {
    fn default() -> Self {
        Production {
            hold_share: 0.5,
            partition_units: 1000,
        }
    }
}

/// A write as the service sees it: the items it touches and what it costs each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writes {
    /// `table/key` of each item, in the request's order.
    pub items: Vec<String>,
    /// Write units per item (one per KB of the request, at least one).
    pub units: u32,
}

/// The items a write request (`PutItem`, `UpdateItem`, `DeleteItem` or `TransactWriteItems`)
/// touches; `None` for any other operation, or a body it cannot read.
pub fn writes_of(operation: &str, body: &[u8]) -> Option<Writes> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let items = match operation {
        "PutItem" | "UpdateItem" | "DeleteItem" => vec![item_key(&v)?],
        "TransactWriteItems" => v
            .get("TransactItems")?
            .as_array()?
            .iter()
            .filter_map(|entry| entry.as_object()?.values().next())
            .map(item_key)
            .collect::<Option<Vec<_>>>()?,
        _ => return None,
    };
    let units = u32::try_from(body.len().div_ceil(1024)).map_or(u32::MAX, |u| u.max(1));
    Some(Writes { items, units })
}

/// `table/key` of one write (`{"TableName": .., "Key": ..}` or `{"TableName": .., "Item": ..}`).
fn item_key(write: &Value) -> Option<String> {
    let table = write.get("TableName")?.as_str()?;
    let key: Map<String, Value> = match write.get("Key") {
        Some(Value::Object(key)) => key.clone(),
        _ => write
            .get("Item")?
            .as_object()?
            .iter()
            .filter(|(name, _)| KEY_ATTRIBUTES.contains(&name.as_str()))
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect(),
    };
    Some(format!("{table}/{}", Value::Object(key)))
}

/// What the service does with a write that reached it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Served, after waiting this long for the item's partition.
    Served(Duration),
    /// A transaction cancelled (`TransactionConflict`) on the item at this index.
    Cancelled(usize),
    /// A single-item write refused (`TransactionConflictException`).
    Refused,
}

/// The holds and partitions of the items, shared by every request of a cell.
#[derive(Debug, Default)]
pub struct Service {
    production: Production,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Until when a transaction holds each item.
    held_until: HashMap<String, Instant>,
    /// When each item's partition is next free.
    free_at: HashMap<String, Instant>,
}

impl Service {
    /// A service under `production`'s assumptions, every item free.
    pub fn new(production: Production) -> Service {
        Service {
            production,
            state: Mutex::default(),
        }
    }

    /// The assumptions.
    pub fn production(&self) -> Production {
        self.production
    }

    /// Admits `writes`, arriving now, of a request whose sampled latency is `latency`: a
    /// transaction takes its items' holds, a single write its place in its item's partition.
    pub fn admit(&self, transaction: bool, writes: &Writes, latency: Duration) -> Admission {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let held = |key: &String| state.held_until.get(key).is_some_and(|until| *until > now);
        if let Some(i) = writes.items.iter().position(held) {
            return if transaction {
                Admission::Cancelled(i)
            } else {
                Admission::Refused
            };
        }
        if transaction {
            let until = now + latency.mul_f64(self.production.hold_share);
            for key in &writes.items {
                state.held_until.insert(key.clone(), until);
            }
            return Admission::Served(Duration::ZERO);
        }
        let per_unit = Duration::from_secs(1) / self.production.partition_units.max(1);
        let mut wait = Duration::ZERO;
        for key in &writes.items {
            let free = state.free_at.get(key).copied().unwrap_or(now).max(now);
            wait = wait.max(free - now);
            state
                .free_at
                .insert(key.clone(), free + per_unit * writes.units);
        }
        Admission::Served(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(table: &str, id: &str) -> Value {
        serde_json::json!({"TableName": table, "Key": {"id": {"S": id}}})
    }

    #[test]
    fn a_transactions_items_are_read_from_its_updates_and_puts() {
        let body = serde_json::json!({"TransactItems": [
            {"Update": update("accounts", "a")},
            {"Put": {"TableName": "tx", "Item": {"txId": {"S": "t1"}, "status": {"S": "COMMITTED"}}}},
        ]});
        let w = writes_of("TransactWriteItems", body.to_string().as_bytes()).unwrap();
        assert_eq!(
            w.items,
            [r#"accounts/{"id":{"S":"a"}}"#, r#"tx/{"txId":{"S":"t1"}}"#]
        );
        assert_eq!(w.units, 1);
        assert_eq!(writes_of("GetItem", b"{}"), None);
        assert_eq!(writes_of("UpdateItem", b"not json"), None);
    }

    #[test]
    fn a_write_costs_one_unit_per_kb_of_its_request() {
        let mut v = update("accounts", "a");
        v["pad"] = Value::String("x".repeat(1500));
        let w = writes_of("UpdateItem", v.to_string().as_bytes()).unwrap();
        assert_eq!(w.units, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_item_cancels_a_transaction_and_refuses_a_single_write_until_released() {
        let service = Service::new(Production::default());
        let both = Writes {
            items: vec!["t/a".into(), "t/b".into()],
            units: 1,
        };
        let one = Writes {
            items: vec!["t/b".into()],
            units: 1,
        };
        let latency = Duration::from_millis(20);
        assert_eq!(
            service.admit(true, &both, latency),
            Admission::Served(Duration::ZERO)
        );
        let other = Writes {
            items: vec!["t/c".into(), "t/b".into()],
            units: 1,
        };
        assert_eq!(
            service.admit(true, &other, latency),
            Admission::Cancelled(1)
        );
        assert_eq!(service.admit(false, &one, latency), Admission::Refused);
        // Held for half the latency (the default share), then free.
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(
            service.admit(false, &one, latency),
            Admission::Served(Duration::ZERO)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn single_writes_to_one_item_queue_at_the_partitions_rate() {
        let service = Service::new(Production {
            partition_units: 1000,
            ..Production::default()
        });
        let two_units = Writes {
            items: vec!["t/a".into()],
            units: 2,
        };
        let latency = Duration::from_millis(5);
        let waits: Vec<_> = (0..3)
            .map(|_| service.admit(false, &two_units, latency))
            .collect();
        let ms = Duration::from_millis;
        assert_eq!(
            waits,
            [
                Admission::Served(ms(0)),
                Admission::Served(ms(2)),
                Admission::Served(ms(4))
            ]
        );
        // Another item has its own partition.
        let other = Writes {
            items: vec!["t/b".into()],
            units: 1,
        };
        assert_eq!(
            service.admit(false, &other, latency),
            Admission::Served(ms(0))
        );
    }
}
