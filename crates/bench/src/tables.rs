//! A system's tables: created with the project's definitions (the same keys, sparse indexes and
//! TTL for every system, so the engine does the same bookkeeping for all; streams turned off, see
//! [`Tables::create`]), seeded, audited after each cell, dropped at the end.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, StreamSpecification, WriteRequest};
use futures::stream::{self, StreamExt, TryStreamExt};
use twopc_core::layout;
use twopc_core::service::KeySchema;
use twopc_dynamo::items::item_state;
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};

use crate::BenchError;
use crate::workload::account_id;

/// Items per `BatchWriteItem` (DynamoDB's limit).
const BATCH: usize = 25;
/// Seeding requests in flight.
const SEED_CONCURRENCY: usize = 8;

/// The three tables of one system.
#[derive(Clone, Debug)]
pub struct Tables {
    /// Transactions (the coordinator's and the serial driver's log).
    pub tx: String,
    /// Debited accounts.
    pub accounts: String,
    /// Credited wallets.
    pub wallets: String,
}

/// What an audit found in the participant tables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// Items read.
    pub items: u64,
    /// Sum of every `balance`, exact.
    pub balance_sum: i128,
    /// Sum of every `txVersion` (each committed write bumps it once).
    pub version_sum: u64,
    /// Items still locked.
    pub locks: u64,
    /// Items still placeholders.
    pub placeholders: u64,
    /// Items with a reservation still standing (`txRes:<tx>`, or a non-zero `txResN`).
    pub reservations: u64,
    /// Items with an escrow that is not idle at the value (a reservation counted, a floor or
    /// ceiling kept, or extremes away from the value): the last release on an attribute leaves
    /// its escrow idle, at the value.
    pub escrows: u64,
    /// Most fence entries on one item.
    pub max_fence: usize,
}

impl Tables {
    /// Creates the tables named `prefix-*`, with their streams off.
    pub async fn create(client: &Client, prefix: &str) -> Result<Tables, BenchError> {
        let t = Tables {
            tx: format!("{prefix}-transactions"),
            accounts: format!("{prefix}-accounts"),
            wallets: format!("{prefix}-wallets"),
        };
        let participant = TableKind::Participant(KeySchema::string_hash("id"));
        let specs = [
            (t.tx.clone(), TableKind::Transactions),
            (t.accounts.clone(), participant.clone()),
            (t.wallets.clone(), participant),
        ];
        for (name, kind) in specs {
            ensure_table(
                client,
                &TableSpec {
                    name: name.clone(),
                    kind,
                },
            )
            .await?;
            // DynamoDB Local looks up the table's stream description on every write to a
            // stream-enabled table, at a cost that grows with every stream record it keeps
            // (deleted tables' included): left on, the bench would slow down as it runs and
            // its results would depend on their order. DynamoDB itself writes stream records
            // off the request path. So the tables keep the project's keys and indexes, and lose
            // their stream.
            let off = StreamSpecification::builder()
                .stream_enabled(false)
                .build()
                .map_err(|e| BenchError::Check(format!("stream specification: {e}")))?;
            client
                .update_table()
                .table_name(&name)
                .stream_specification(off)
                .send()
                .await
                .map_err(|e| BenchError::sdk(format!("turning off the stream of {name}"), e))?;
        }
        Ok(t)
    }

    /// Puts `accounts` items with `balance` into both participant tables.
    pub async fn seed(
        &self,
        client: &Client,
        accounts: u32,
        balance: u64,
    ) -> Result<(), BenchError> {
        let mut batches = vec![];
        for table in [&self.accounts, &self.wallets] {
            let ids: Vec<u32> = (0..accounts).collect();
            for chunk in ids.chunks(BATCH) {
                batches.push((table.clone(), chunk.to_vec()));
            }
        }
        stream::iter(batches)
            .map(|(table, ids)| async move { put_batch(client, &table, &ids, balance).await })
            .buffer_unordered(SEED_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// Reads every participant item (strongly consistent scans).
    pub async fn audit(&self, client: &Client) -> Result<Audit, BenchError> {
        let mut audit = Audit::default();
        for table in [&self.accounts, &self.wallets] {
            let mut start = None;
            loop {
                let page = client
                    .scan()
                    .table_name(table)
                    .consistent_read(true)
                    .set_exclusive_start_key(start)
                    .send()
                    .await
                    .map_err(|e| BenchError::sdk(format!("scanning {table}"), e))?;
                for item in page.items() {
                    audit.add(table, item)?;
                }
                start = page.last_evaluated_key().cloned();
                if start.is_none() {
                    break;
                }
            }
        }
        Ok(audit)
    }

    /// Deletes the tables (keeps DynamoDB Local's memory flat over a long run).
    pub async fn drop_all(&self, client: &Client) -> Result<(), BenchError> {
        for table in [&self.tx, &self.accounts, &self.wallets] {
            client
                .delete_table()
                .table_name(table)
                .send()
                .await
                .map_err(|e| BenchError::sdk(format!("deleting {table}"), e))?;
        }
        Ok(())
    }
}

impl Audit {
    fn add(
        &mut self,
        table: &str,
        item: &HashMap<String, AttributeValue>,
    ) -> Result<(), BenchError> {
        let number = |name: &str| -> Result<Option<i128>, BenchError> {
            match item.get(name) {
                None => Ok(None),
                Some(AttributeValue::N(n)) => n.parse::<i128>().map(Some).map_err(|_| {
                    BenchError::Check(format!("{table}: {name} = {n} is not a whole number"))
                }),
                Some(other) => Err(BenchError::Check(format!(
                    "{table}: {name} is not a number: {other:?}"
                ))),
            }
        };
        self.items += 1;
        self.balance_sum += number("balance")?.unwrap_or(0);
        self.version_sum += u64::try_from(number(layout::VERSION)?.unwrap_or(0)).unwrap_or(0);
        self.locks += u64::from(item.contains_key(layout::LOCK));
        self.placeholders += u64::from(item.contains_key(layout::PLACEHOLDER));
        // The protocol's own reading of the item: every escrow idle.
        let state = item_state(item)
            .map_err(|e| BenchError::Check(format!("{table}: unreadable item: {e}")))?;
        let busy = state
            .escrow
            .values()
            .any(|s| s.count != 0 || s.floors != 0 || s.ceilings != 0);
        let counted = number(layout::RESERVATIONS)?.unwrap_or(0) != 0;
        self.reservations += u64::from(!state.reservations.is_empty() || counted);
        self.escrows += u64::from(busy);
        self.max_fence = self.max_fence.max(state.fence.len());
        Ok(())
    }
}

async fn put_batch(
    client: &Client,
    table: &str,
    ids: &[u32],
    balance: u64,
) -> Result<(), BenchError> {
    let mut requests: Vec<WriteRequest> = ids
        .iter()
        .map(|i| {
            let item = HashMap::from([
                ("id".to_owned(), AttributeValue::S(account_id(*i))),
                ("balance".to_owned(), AttributeValue::N(balance.to_string())),
            ]);
            PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map(|p| WriteRequest::builder().put_request(p).build())
                .map_err(|e| BenchError::Check(format!("building a seed request: {e}")))
        })
        .collect::<Result<_, _>>()?;
    // DynamoDB may leave some writes unprocessed; send them again until none is left.
    for _ in 0..100 {
        if requests.is_empty() {
            return Ok(());
        }
        let out = client
            .batch_write_item()
            .request_items(table, requests)
            .send()
            .await
            .map_err(|e| BenchError::sdk(format!("seeding {table}"), e))?;
        requests = out
            .unprocessed_items
            .and_then(|mut m| m.remove(table))
            .unwrap_or_default();
    }
    Err(BenchError::Check(format!(
        "seeding {table}: writes kept coming back unprocessed"
    )))
}
