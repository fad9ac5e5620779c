//! What DynamoDB does with a write once it reaches the service, beyond taking time: the rules of
//! the production model ([`Production`]), each from DynamoDB's documentation.
//!
//! - **Transaction conflicts** (Developer Guide, "Transaction conflict handling in DynamoDB"):
//!   an item is held by a `TransactWriteItems` from the moment the request reaches the service
//!   until it completes. Another `TransactWriteItems` that includes the item is cancelled with
//!   the reason `TransactionConflict`; a `PutItem`, `UpdateItem` or `DeleteItem` on it is
//!   refused with `TransactionConflictException`. A cancelled transaction's prepared items (the
//!   ones not refused) stay marked until its release reaches them (the transaction protocol of
//!   the USENIX ATC 2023 DynamoDB paper). How long either hold lasts is not published: a share
//!   of the transaction's sampled latency ([`Production::hold_share`],
//!   [`Production::cancel_hold_share`]).
//! - **The partition's write rate** (Developer Guide, "Partitions and data distribution",
//!   "Burst and adaptive capacity"): one partition takes at most 1,000 write units a second; a
//!   write over the rate is rejected (`ProvisionedThroughputExceededException`, reason
//!   `TableWriteKeyRangeThroughputExceeded`; in a transaction, `ThrottlingError`) and the SDK's
//!   standard retry backs off. A transaction's item costs two units per KB (prepare and
//!   commit). Hot items share a partition until DynamoDB splits it for heat: items are grouped
//!   by key into partitions of [`Production::partition_span`] consecutive accounts (1: split).
//!
//! [`Service`] keeps per item the holds of transactions under way, and per partition when it
//! is next free (a GCRA meter). Keys are `table/key-json`, read from the request body by
//! [`writes_of`]. Every time is in model time × the dilation factor ([`Service::new`]).

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
    /// How long a cancelled `TransactWriteItems` holds its prepared items, as a share of its
    /// sampled latency (its prepares' round, then the release).
    pub cancel_hold_share: f64,
    /// Write units a second one partition serves (DynamoDB's documented 1,000).
    pub partition_units: u32,
    /// How much work over the rate a partition absorbs at once, as time at its rate (an
    /// assumption; a sensitivity row takes a tenth: an idle partition's credit can inflate a
    /// measured window shorter than it).
    pub partition_burst_ms: u64,
    /// Consecutive accounts per partition: the hot ones share one (1: each item on its own,
    /// as after a split for heat).
    pub partition_span: u32,
}

impl Default for Production {
    fn default() -> Self {
        Production {
            hold_share: 0.5,
            cancel_hold_share: 0.25,
            partition_units: 1000,
            partition_burst_ms: 1000,
            partition_span: 4,
        }
    }
}

/// A write as the service sees it: the items it touches and what it costs each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writes {
    /// `table/key` of each item, in the request's order.
    pub items: Vec<String>,
    /// Write units per item estimated from the request (one per KB, at least one).
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Served, its first item charged this many units.
    Served(u32),
    /// A transaction cancelled: `TransactionConflict` at `busy`, `ThrottlingError` at
    /// `throttled` (indexes into its items).
    Cancelled {
        /// Items another transaction holds.
        busy: Vec<usize>,
        /// Items whose partition is over its rate.
        throttled: Vec<usize>,
    },
    /// A single-item write refused (`TransactionConflictException`).
    Refused,
    /// A single-item write rejected over its partition's rate
    /// (`ProvisionedThroughputExceededException`).
    Throttled,
}

/// The holds and partitions of the items, shared by every request of a cell.
#[derive(Debug, Default)]
pub struct Service {
    production: Production,
    dilation: u32,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Until when a transaction holds each item.
    held_until: HashMap<String, Instant>,
    /// When each partition has served everything admitted so far (GCRA).
    free_at: HashMap<String, Instant>,
    /// Each item's units per write as the engine last charged them.
    units: HashMap<String, u32>,
}

/// The partition of an item key: its table and its account's range of
/// [`Production::partition_span`] (keys that are no account, such as records: their own).
fn partition_of(key: &str, span: u32) -> String {
    let account = key
        .split_once("acct-")
        .and_then(|(_, rest)| rest.split('"').next()?.parse::<u32>().ok());
    match (account, key.split_once('/')) {
        (Some(n), Some((table, _))) => format!("{table}#{}", n / span.max(1)),
        _ => key.to_owned(),
    }
}

impl Service {
    /// A service under `production`'s assumptions, every time `dilation` times as long (its
    /// rates as many times slower), every item free.
    pub fn new(production: Production, dilation: u32) -> Service {
        Service {
            production,
            dilation: dilation.max(1),
            state: Mutex::default(),
        }
    }

    /// One write unit's time at a partition's rate.
    fn per_unit(&self) -> Duration {
        Duration::from_secs(u64::from(self.dilation)) / self.production.partition_units.max(1)
    }

    /// Admits `writes`, arriving now, of a request whose sampled latency is `latency`.
    pub fn admit(&self, transaction: bool, writes: &Writes, latency: Duration) -> Admission {
        let now = Instant::now();
        let p = self.production;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let units: Vec<u32> = writes
            .items
            .iter()
            .map(|k| state.units_of(k, writes.units) * if transaction { 2 } else { 1 })
            .collect();
        let busy: Vec<usize> = (0..writes.items.len())
            .filter(|i| {
                state
                    .held_until
                    .get(&writes.items[*i])
                    .is_some_and(|until| *until > now)
            })
            .collect();
        let burst = Duration::from_millis(p.partition_burst_ms * u64::from(self.dilation));
        let charges = self.charges(&writes.items, &units);
        let over: Vec<&String> = charges
            .iter()
            .filter(|(partition, cost)| {
                let free = state.free_at.get(partition).copied().unwrap_or(now);
                free.max(now) + *cost > now + burst
            })
            .map(|(partition, _)| partition)
            .collect();
        let throttled: Vec<usize> = (0..writes.items.len())
            .filter(|i| over.contains(&&partition_of(&writes.items[*i], p.partition_span)))
            .collect();
        if !transaction {
            return match (busy.is_empty(), throttled.is_empty()) {
                (false, _) => Admission::Refused,
                (true, false) => Admission::Throttled,
                (true, true) => {
                    state.charge(&charges, now);
                    Admission::Served(units[0])
                }
            };
        }
        let refused = !busy.is_empty() || !throttled.is_empty();
        let share = if refused {
            p.cancel_hold_share
        } else {
            p.hold_share
        };
        let until = now + latency.mul_f64(share);
        for (i, key) in writes.items.iter().enumerate() {
            if !busy.contains(&i) && !throttled.contains(&i) {
                let held = state.held_until.entry(key.clone()).or_insert(until);
                *held = (*held).max(until);
            }
        }
        if refused {
            return Admission::Cancelled { busy, throttled };
        }
        state.charge(&charges, now);
        Admission::Served(units[0])
    }

    /// What each partition a write touches is charged: each item's units, as time at its rate.
    fn charges(&self, items: &[String], units: &[u32]) -> Vec<(String, Duration)> {
        let mut out: Vec<(String, Duration)> = vec![];
        for (key, units) in items.iter().zip(units) {
            let partition = partition_of(key, self.production.partition_span);
            let cost = self.per_unit() * *units;
            match out.iter_mut().find(|(p, _)| *p == partition) {
                Some((_, c)) => *c += cost,
                None => out.push((partition, cost)),
            }
        }
        out
    }

    /// Corrects what a served single write was charged (`charged` units) by what the engine
    /// says it cost (`actual`), and remembers it for the item's next writes.
    pub fn settle(&self, item: &str, charged: u32, actual: u32) {
        let partition = partition_of(item, self.production.partition_span);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.units.insert(item.to_owned(), actual.max(1));
        if let Some(free) = state.free_at.get_mut(&partition) {
            let per_unit = self.per_unit();
            if actual > charged {
                *free += per_unit * (actual - charged);
            } else {
                *free -= per_unit * (charged - actual);
            }
        }
    }
}

impl State {
    /// Units of a write of `item`: what it last cost, or `estimate` (the request's size).
    fn units_of(&self, item: &str, estimate: u32) -> u32 {
        self.units.get(item).copied().unwrap_or(estimate).max(1)
    }

    fn charge(&mut self, charges: &[(String, Duration)], now: Instant) {
        for (partition, cost) in charges {
            let free = self.free_at.entry(partition.clone()).or_insert(now);
            *free = (*free).max(now) + *cost;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(table: &str, id: &str) -> Value {
        serde_json::json!({"TableName": table, "Key": {"id": {"S": id}}})
    }

    fn writes(keys: &[&str], units: u32) -> Writes {
        Writes {
            items: keys.iter().map(|k| (*k).to_owned()).collect(),
            units,
        }
    }

    const MS: fn(u64) -> Duration = Duration::from_millis;

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

    #[test]
    fn accounts_share_a_partition_by_range_and_records_have_their_own() {
        let key = |n: u32| format!(r#"accounts/{{"id":{{"S":"acct-{n:05}"}}}}"#);
        assert_eq!(partition_of(&key(1), 4), partition_of(&key(3), 4));
        assert_ne!(partition_of(&key(3), 4), partition_of(&key(4), 4));
        assert_ne!(partition_of(&key(0), 1), partition_of(&key(1), 1));
        let record = r#"tx/{"txId":{"S":"t1"}}"#;
        assert_eq!(partition_of(record, 4), record);
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_item_cancels_a_transaction_and_refuses_a_single_write_until_released() {
        let service = Service::new(Production::default(), 1);
        let latency = MS(20);
        assert_eq!(
            service.admit(true, &writes(&["t/a", "t/b"], 1), latency),
            Admission::Served(2)
        );
        assert_eq!(
            service.admit(true, &writes(&["t/c", "t/b"], 1), latency),
            Admission::Cancelled {
                busy: vec![1],
                throttled: vec![]
            }
        );
        assert_eq!(
            service.admit(false, &writes(&["t/b"], 1), latency),
            Admission::Refused
        );
        // Held for half the latency (the default share), then free.
        tokio::time::advance(MS(10)).await;
        assert_eq!(
            service.admit(false, &writes(&["t/b"], 1), latency),
            Admission::Served(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_transaction_holds_its_prepared_items_for_its_share() {
        // GIVEN t/b held by a transaction (10 ms: half of 20)
        let service = Service::new(Production::default(), 1);
        service.admit(true, &writes(&["t/b"], 1), MS(20));
        // WHEN a transaction of t/a and t/b (40 ms) is cancelled on t/b
        let cancelled = service.admit(true, &writes(&["t/a", "t/b"], 1), MS(40));
        assert!(matches!(cancelled, Admission::Cancelled { .. }));
        // THEN t/a, which it prepared, is held for a quarter of its latency (10 ms)
        assert_eq!(
            service.admit(false, &writes(&["t/a"], 1), MS(5)),
            Admission::Refused
        );
        tokio::time::advance(MS(10)).await;
        assert_eq!(
            service.admit(false, &writes(&["t/a"], 1), MS(5)),
            Admission::Served(1)
        );
        // AND the refused item t/b was not held by it (free once its holder's 10 ms passed)
        assert_eq!(
            service.admit(false, &writes(&["t/b"], 1), MS(5)),
            Admission::Served(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn writes_over_a_partitions_rate_are_rejected_until_it_drains() {
        // GIVEN a partition of 1,000 units a second that absorbs 10 ms of work at once
        let service = Service::new(
            Production {
                partition_burst_ms: 10,
                ..Production::default()
            },
            1,
        );
        let hot = |n: u32| format!(r#"t/{{"id":{{"S":"acct-{n:05}"}}}}"#);
        // WHEN two-unit writes arrive together on two accounts of one partition
        let admitted: Vec<Admission> = (0..6)
            .map(|i| service.admit(false, &writes(&[&hot(i % 2)], 2), MS(5)))
            .collect();
        // THEN the first five (10 units) are served and the sixth is rejected
        assert_eq!(admitted[..5], [const { Admission::Served(2) }; 5]);
        assert_eq!(admitted[5], Admission::Throttled);
        // AND a transaction there is cancelled with ThrottlingError at that item
        assert_eq!(
            service.admit(true, &writes(&["t/x", &hot(3)], 1), MS(20)),
            Admission::Cancelled {
                busy: vec![],
                throttled: vec![1]
            }
        );
        // AND another partition is not touched; the hot one is free again 2 ms later
        assert_eq!(
            service.admit(false, &writes(&[&hot(4)], 2), MS(5)),
            Admission::Served(2)
        );
        tokio::time::advance(MS(2)).await;
        assert_eq!(
            service.admit(false, &writes(&[&hot(1)], 2), MS(5)),
            Admission::Served(2)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_engines_charge_corrects_the_partition_and_the_next_estimate() {
        let service = Service::new(
            Production {
                partition_burst_ms: 4,
                ..Production::default()
            },
            1,
        );
        let item = r#"t/{"id":{"S":"acct-00001"}}"#;
        assert_eq!(
            service.admit(false, &writes(&[item], 1), MS(5)),
            Admission::Served(1)
        );
        // The engine charged 3: the partition is 3 ms busy, and the next write is charged 3.
        service.settle(item, 1, 3);
        assert_eq!(
            service.admit(false, &writes(&[item], 1), MS(5)),
            Admission::Throttled
        );
        tokio::time::advance(MS(2)).await;
        assert_eq!(
            service.admit(false, &writes(&[item], 1), MS(5)),
            Admission::Served(3)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn dilation_slows_a_partition_by_its_factor() {
        // GIVEN a partition four times slower (4 ms a unit) that absorbs 4 ms × 4 of work
        let service = Service::new(
            Production {
                partition_burst_ms: 4,
                ..Production::default()
            },
            4,
        );
        let item = r#"t/{"id":{"S":"acct-00001"}}"#;
        // WHEN a 4-unit write (16 ms at its rate) is served, a second at once is rejected
        assert_eq!(
            service.admit(false, &writes(&[item], 4), MS(5)),
            Admission::Served(4)
        );
        assert_eq!(
            service.admit(false, &writes(&[item], 4), MS(5)),
            Admission::Throttled
        );
        // THEN it is served once the first has drained (16 ms, not 4)
        tokio::time::advance(MS(15)).await;
        assert_eq!(
            service.admit(false, &writes(&[item], 4), MS(5)),
            Admission::Throttled
        );
        tokio::time::advance(MS(1)).await;
        assert_eq!(
            service.admit(false, &writes(&[item], 4), MS(5)),
            Admission::Served(4)
        );
    }
}
