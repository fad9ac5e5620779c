//! The transactions table as the core's [`TxLog`].

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use serde_json::Value;
use twopc_core::ids::TxId;
use twopc_core::layout::{
    ATTEMPTS, DEADLINE, EXPIRE_AT, PENDING, RECOVERY_ASKED, RETRY_AFTER, STATUS, TX_ID, UPDATED_AT,
    VOTES,
};
use twopc_core::ports::{Created, PortError, Swapped, TxLog, check_transition};
use twopc_core::record::{TxRecord, Vote};
use twopc_core::status::TxStatus;

use crate::codec::{Item, from_item, to_attr, to_item};
use crate::error::{classify, corrupt};
use crate::expr::{Expr, update_expression};
use crate::tables::{INDEX_SHARDS, PENDING_INDEX, shard_of};

/// How long terminal records are kept before DynamoDB's TTL removes them (and with them the
/// idempotency window).
pub const DEFAULT_RETENTION_SECS: u64 = 7 * 24 * 3600;

/// The transactions table.
#[derive(Clone, Debug)]
pub struct DynamoTxLog {
    client: Client,
    table: String,
    retention_secs: u64,
}

impl DynamoTxLog {
    /// The log in `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoTxLog {
            client,
            table: table.into(),
            retention_secs: DEFAULT_RETENTION_SECS,
        }
    }

    /// Keeps terminal records this long.
    pub fn with_retention_secs(mut self, secs: u64) -> Self {
        self.retention_secs = secs;
        self
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    fn key(tx: &TxId) -> Item {
        [(TX_ID.to_owned(), AttributeValue::S(tx.to_string()))].into()
    }

    fn to_item(&self, record: &TxRecord) -> Result<Item, PortError> {
        let value = serde_json::to_value(record)
            .map_err(|e| corrupt("encoding a record", e.to_string()))?;
        let Value::Object(map) = value else {
            return Err(corrupt("encoding a record", "not an object"));
        };
        let mut item = to_item(&map);
        if record.status.is_terminal() {
            item.insert(
                EXPIRE_AT.into(),
                AttributeValue::N(self.expire_at(record.updated_at)),
            );
        } else {
            item.insert(
                PENDING.into(),
                AttributeValue::S(shard_of(record.tx_id.as_str(), "P")),
            );
        }
        Ok(item)
    }

    fn expire_at(&self, now_ms: u64) -> String {
        (now_ms / 1000 + self.retention_secs).to_string()
    }
}

/// Reads a record from an item (index attributes dropped).
pub fn record_from_item(item: &Item) -> Result<TxRecord, PortError> {
    let map = from_item(item).map_err(|e| corrupt("decoding a record", e.to_string()))?;
    record_from_json(map)
}

/// Reads a record from an item's exact JSON (a stream image; index attributes dropped).
pub fn record_from_json(mut map: serde_json::Map<String, Value>) -> Result<TxRecord, PortError> {
    map.remove(PENDING);
    map.remove(EXPIRE_AT);
    serde_json::from_value(Value::Object(map))
        .map_err(|e| corrupt("decoding a record", e.to_string()))
}

impl TxLog for DynamoTxLog {
    async fn create(&self, record: &TxRecord) -> Result<Created, PortError> {
        let mut e = Expr::new();
        let cond = format!("attribute_not_exists({})", e.name(TX_ID));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.to_item(record)?))
            .condition_expression(cond)
            .set_expression_attribute_names(e.names())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(Created::New),
            Err(err) => match err.as_service_error() {
                Some(s) if s.is_conditional_check_failed_exception() => {
                    let existing = match s {
                        aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(c) => c.item().map(record_from_item).transpose()?,
                        _ => None,
                    };
                    match existing {
                        Some(r) => Ok(Created::Exists(Box::new(r))),
                        None => self
                            .get(&record.tx_id)
                            .await?
                            .map(|r| Created::Exists(Box::new(r)))
                            .ok_or_else(|| {
                                corrupt("creating a record", "condition failed but no record")
                            }),
                    }
                }
                _ => Err(classify(
                    format!("writing transaction {}", record.tx_id),
                    err,
                )),
            },
        }
    }

    async fn get(&self, tx: &TxId) -> Result<Option<TxRecord>, PortError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(tx)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| classify(format!("reading transaction {tx}"), e))?;
        out.item().map(record_from_item).transpose()
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
        let mut e = Expr::new();
        let status = e.name(STATUS);
        let mut set = vec![
            format!(
                "{status} = {}",
                e.value(AttributeValue::S(to.as_str().into()))
            ),
            format!(
                "{} = {}",
                e.name(UPDATED_AT),
                e.value(AttributeValue::N(now.to_string()))
            ),
        ];
        let mut remove = vec![];
        if let Some(votes) = votes {
            let v = serde_json::to_value(votes)
                .map_err(|err| corrupt("encoding votes", err.to_string()))?;
            set.push(format!("{} = {}", e.name(VOTES), e.value(to_attr(&v))));
        }
        if to.is_terminal() {
            remove.push(e.name(PENDING));
            remove.push(e.name(RETRY_AFTER));
            set.push(format!(
                "{} = {}",
                e.name(EXPIRE_AT),
                e.value(AttributeValue::N(self.expire_at(now)))
            ));
        }
        let cond = format!(
            "{status} = {}",
            e.value(AttributeValue::S(from.as_str().into()))
        );
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(tx)))
            .update_expression(update_expression(&set, &remove))
            .condition_expression(cond)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(Swapped::Done(Box::new(record.moved(to, votes, now)))),
            Err(err) => match err.as_service_error() {
                Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c)) => {
                    Ok(Swapped::Lost(c.item().map(record_from_item).transpose()?.map(Box::new)))
                }
                _ => Err(classify(format!("moving transaction {tx} {from} -> {to}"), err)),
            },
        }
    }

    async fn create_aborted(&self, tx: &TxId, now: u64) -> Result<Created, PortError> {
        self.create(&TxRecord::never_began(tx, now)).await
    }

    async fn overdue(&self, now: u64, limit: usize) -> Result<Vec<TxRecord>, PortError> {
        // The index holds keys and the backoff only: find the ids, then read each record.
        let mut ids = vec![];
        for shard in 0..INDEX_SHARDS {
            let mut start = None;
            loop {
                let mut e = Expr::new();
                let kc = format!(
                    "{} = {} AND {} < {}",
                    e.name(PENDING),
                    e.value(AttributeValue::S(format!("P{shard}"))),
                    e.name(DEADLINE),
                    e.value(AttributeValue::N(now.to_string()))
                );
                let retry = e.name(RETRY_AFTER);
                let filter = format!(
                    "attribute_not_exists({retry}) OR {retry} < {}",
                    e.value(AttributeValue::N(now.to_string()))
                );
                let out = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .index_name(PENDING_INDEX)
                    .key_condition_expression(kc)
                    .filter_expression(filter)
                    .set_expression_attribute_names(e.names())
                    .set_expression_attribute_values(e.values())
                    .set_exclusive_start_key(start)
                    .limit(limit.clamp(1, 1000) as i32)
                    .send()
                    .await
                    .map_err(|err| classify("querying overdue transactions", err))?;
                for item in out.items() {
                    let id = match item.get(TX_ID) {
                        Some(AttributeValue::S(id)) => id,
                        _ => {
                            return Err(corrupt(
                                "querying overdue transactions",
                                "an entry without txId",
                            ));
                        }
                    };
                    let deadline = match item.get(DEADLINE) {
                        Some(AttributeValue::N(d)) => d.parse::<u64>().ok(),
                        _ => None,
                    }
                    .ok_or_else(|| {
                        corrupt(
                            "querying overdue transactions",
                            "an entry without a deadline",
                        )
                    })?;
                    let id = TxId::parse(id)
                        .map_err(|e| corrupt("querying overdue transactions", e.to_string()))?;
                    ids.push((deadline, id));
                }
                start = out.last_evaluated_key().cloned();
                if start.is_none() || ids.len() >= limit * (shard as usize + 1) {
                    break;
                }
            }
        }
        ids.sort_by_key(|(deadline, _)| *deadline);
        ids.truncate(limit);
        let mut found = vec![];
        for (_, id) in ids {
            // Finished since the query (the index is eventually consistent): not overdue.
            if let Some(r) = self.get(&id).await?
                && !r.status.is_terminal()
            {
                found.push(r);
            }
        }
        Ok(found)
    }

    async fn oldest_pending_deadline(&self) -> Result<Option<u64>, PortError> {
        // The index is sorted by deadline within each shard: the first entry of each, no filter.
        let mut oldest: Option<u64> = None;
        for shard in 0..INDEX_SHARDS {
            let mut e = Expr::new();
            let kc = format!(
                "{} = {}",
                e.name(PENDING),
                e.value(AttributeValue::S(format!("P{shard}")))
            );
            let projection = e.name(DEADLINE);
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(PENDING_INDEX)
                .key_condition_expression(kc)
                .projection_expression(projection)
                .set_expression_attribute_names(e.names())
                .set_expression_attribute_values(e.values())
                .scan_index_forward(true)
                .limit(1)
                .send()
                .await
                .map_err(|err| classify("querying the oldest pending transaction", err))?;
            for item in out.items() {
                let deadline = match item.get(DEADLINE) {
                    Some(AttributeValue::N(d)) => d.parse::<u64>().ok(),
                    _ => None,
                }
                .ok_or_else(|| {
                    corrupt(
                        "querying the oldest pending transaction",
                        "an entry without a deadline",
                    )
                })?;
                oldest = Some(oldest.map_or(deadline, |o| o.min(deadline)));
            }
        }
        Ok(oldest)
    }

    async fn note_failed_attempt(
        &self,
        tx: &TxId,
        retry_after: u64,
        now: u64,
    ) -> Result<(), PortError> {
        let mut e = Expr::new();
        let attempts = e.name(ATTEMPTS);
        let set = vec![
            format!(
                "{attempts} = if_not_exists({attempts}, {}) + {}",
                e.value(AttributeValue::N("0".into())),
                e.value(AttributeValue::N("1".into()))
            ),
            format!(
                "{} = {}",
                e.name(RETRY_AFTER),
                e.value(AttributeValue::N(retry_after.to_string()))
            ),
            format!(
                "{} = {}",
                e.name(UPDATED_AT),
                e.value(AttributeValue::N(now.to_string()))
            ),
        ];
        let cond = format!("attribute_exists({})", e.name(PENDING));
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(tx)))
            .update_expression(update_expression(&set, &[]))
            .condition_expression(cond)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Finished meanwhile: nothing to count.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(err) => Err(classify(format!("counting an attempt on {tx}"), err)),
        }
    }

    async fn ask_recovery(&self, tx: &TxId, now: u64) -> Result<bool, PortError> {
        let mut e = Expr::new();
        let asked = e.name(RECOVERY_ASKED);
        let at = e.value(AttributeValue::N(now.to_string()));
        let set = vec![
            format!("{asked} = {at}"),
            format!("{} = {at}", e.name(UPDATED_AT)),
        ];
        let cond = format!(
            "{} = {} AND attribute_not_exists({asked})",
            e.name(STATUS),
            e.value(AttributeValue::S(TxStatus::Staging.as_str().into()))
        );
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(tx)))
            .update_expression(update_expression(&set, &[]))
            .condition_expression(cond)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            // Asked already, decided meanwhile, or no such record: nothing to ask.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(classify(format!("asking for the recovery of {tx}"), err)),
        }
    }
}
