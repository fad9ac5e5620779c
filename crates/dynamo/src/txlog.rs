//! The transactions table as the core's [`TxLog`].

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use serde_json::Value;
use twopc_core::ids::TxId;
use twopc_core::layout::{
    ATTEMPTS, DEADLINE, DECIDED_AT, ENDED, EXPIRE_AT, PENDING, RECOVERY_ASKED, RETRY_AFTER, STATUS,
    TX_ID, UPDATED_AT, VOTES,
};
use twopc_core::ports::{Created, PortError, Swapped, TxLog, check_transition};
use twopc_core::record::{TxRecord, Vote};
use twopc_core::status::TxStatus;

use crate::codec::{Item, from_item, to_attr, to_item};
use crate::error::{classify, corrupt};
use crate::expr::{Expr, update_expression};
use crate::pending::{PendingQuery, PendingScan};
use crate::tables::shard_of;
use crate::write::resending;

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

    /// The client.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    pub(crate) fn key(tx: &TxId) -> Item {
        [(TX_ID.to_owned(), AttributeValue::S(tx.to_string()))].into()
    }

    pub(crate) fn to_item(&self, record: &TxRecord) -> Result<Item, PortError> {
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
            item.insert(
                ENDED.into(),
                AttributeValue::S(ended_shard(&record.tx_id, record.status)),
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

/// The ended index's partition of a record that ended in `status`: `<STATUS>#<shard>`.
pub fn ended_shard(tx: &TxId, status: TxStatus) -> String {
    shard_of(tx.as_str(), &format!("{status}#"))
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
    map.remove(ENDED);
    serde_json::from_value(Value::Object(map))
        .map_err(|e| corrupt("decoding a record", e.to_string()))
}

/// Where a page of [`DynamoTxLog::pending`] ends: its last entry, in the index's (deadline, id)
/// order. Its text form (`<deadline>.<txId>`) is the API's `next`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingCursor {
    /// The last entry's deadline (epoch ms).
    pub deadline: u64,
    /// The last entry's transaction.
    pub tx_id: TxId,
}

impl PendingCursor {
    /// The text form, `<deadline>.<txId>`.
    pub fn token(&self) -> String {
        format!("{}.{}", self.deadline, self.tx_id)
    }

    /// Reads a text form; `None` if it is not one.
    pub fn parse(token: &str) -> Option<PendingCursor> {
        let (deadline, tx) = token.split_once('.')?;
        Some(PendingCursor {
            deadline: deadline.parse().ok()?,
            tx_id: TxId::parse(tx).ok()?,
        })
    }
}

/// A page of unfinished transactions.
#[derive(Clone, Debug)]
pub struct PendingPage {
    /// The records, oldest deadline first (an entry whose transaction finished since the index
    /// was written is left out, so a page may hold fewer than asked).
    pub records: Vec<TxRecord>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<PendingCursor>,
}

/// What one read of the pending index asks for.
pub(crate) struct IndexQuery<'a> {
    /// Only entries after this one.
    pub(crate) after: Option<&'a PendingCursor>,
    /// Only entries whose deadline is before this (epoch ms).
    pub(crate) deadline_before: Option<u64>,
    /// Only entries not backing off past this (`retryAfter` unset or before it).
    pub(crate) ready_at: Option<u64>,
    /// At most this many.
    pub(crate) limit: usize,
}

impl DynamoTxLog {
    /// Unfinished transactions (every non-terminal status, `STAGING` included), oldest deadline
    /// first, `limit` a page, after `after`; with `overdue_at`, only those whose deadline is
    /// before it. Read from the sparse `pending-by-deadline` index the sweeper reads, then
    /// each record (strongly consistent).
    pub async fn pending(
        &self,
        after: Option<&PendingCursor>,
        overdue_at: Option<u64>,
        limit: usize,
    ) -> Result<PendingPage, PortError> {
        let limit = limit.max(1);
        let (entries, more) = self
            .pending_entries(&IndexQuery {
                after,
                deadline_before: overdue_at,
                ready_at: None,
                limit,
            })
            .await?;
        let next = match (more, entries.last()) {
            (true, Some((deadline, tx_id))) => Some(PendingCursor {
                deadline: *deadline,
                tx_id: tx_id.clone(),
            }),
            _ => None,
        };
        Ok(PendingPage {
            records: self.unfinished(entries).await?,
            next,
        })
    }

    /// The one query of the sharded `pending-by-deadline` index (the sweeper's overdue
    /// transactions and the API's listing both read it here): every shard, merged into
    /// (deadline, id) order, at most `limit` entries, and whether more follow. The index holds
    /// keys and the backoff only.
    pub(crate) async fn pending_entries(
        &self,
        q: &IndexQuery<'_>,
    ) -> Result<(Vec<(u64, TxId)>, bool), PortError> {
        const WHAT: &str = "querying pending transactions";
        if q.deadline_before == Some(0) {
            return Ok((vec![], false));
        }
        let after = q.after.map(|c| (c.deadline, c.tx_id.clone()));
        let query = PendingQuery {
            from: after.as_ref().map(|(from, _)| *from),
            before: q.deadline_before,
            ready_at: q.ready_at,
            deadline_only: false,
            page: q.limit + 1,
        };
        let mut scan = PendingScan::new(&self.client, &self.table, query, WHAT);
        let mut found: Vec<(u64, TxId)> = vec![];
        // Per shard: entries taken, and the deadline of the last.
        let (mut shard, mut taken, mut last_deadline) = (None, 0usize, 0u64);
        while let Some((page_shard, items)) = scan.next_page().await? {
            if shard != Some(page_shard) {
                (shard, taken, last_deadline) = (Some(page_shard), 0, 0);
            }
            for item in &items {
                let entry = index_entry(item)?;
                if after.as_ref().is_some_and(|a| entry <= *a) {
                    continue;
                }
                // One more than a page, and the rest of its deadline's ties (the index
                // orders ties arbitrarily): this shard's first entries in (deadline, id)
                // order are then among those taken.
                if taken > q.limit && last_deadline < entry.0 {
                    scan.next_shard();
                    break;
                }
                last_deadline = entry.0;
                found.push(entry);
                taken += 1;
            }
        }
        found.sort();
        let more = found.len() > q.limit;
        found.truncate(q.limit);
        Ok((found, more))
    }

    /// The records of index entries that are still unfinished (the index is eventually
    /// consistent: one may have finished since).
    pub(crate) async fn unfinished(
        &self,
        entries: Vec<(u64, TxId)>,
    ) -> Result<Vec<TxRecord>, PortError> {
        let mut found = vec![];
        for (_, id) in entries {
            if let Some(r) = self.get(&id).await?
                && !r.status.is_terminal()
            {
                found.push(r);
            }
        }
        Ok(found)
    }
}

/// An index entry's (deadline, id).
fn index_entry(item: &Item) -> Result<(u64, TxId), PortError> {
    const WHAT: &str = "querying pending transactions";
    let id = match item.get(TX_ID) {
        Some(AttributeValue::S(id)) => TxId::parse(id).map_err(|e| corrupt(WHAT, e.to_string()))?,
        _ => return Err(corrupt(WHAT, "an entry without txId")),
    };
    let deadline = match item.get(DEADLINE) {
        Some(AttributeValue::N(d)) => d.parse::<u64>().ok(),
        _ => None,
    }
    .ok_or_else(|| corrupt(WHAT, "an entry without a deadline"))?;
    Ok((deadline, id))
}

impl TxLog for DynamoTxLog {
    async fn create(&self, record: &TxRecord) -> Result<Created, PortError> {
        let mut e = Expr::new();
        let cond = format!("attribute_not_exists({})", e.name(TX_ID));
        let item = self.to_item(record)?;
        // A native attempt of the same transaction may still hold the record's key.
        let result = resending(&self.client, || {
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item.clone()))
                .condition_expression(&cond)
                .set_expression_attribute_names(e.names())
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
        })
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
            set.push(format!(
                "{} = {}",
                e.name(ENDED),
                e.value(AttributeValue::S(ended_shard(tx, to)))
            ));
        }
        if TxStatus::decides(from, to) {
            set.push(format!(
                "{} = {}",
                e.name(DECIDED_AT),
                e.value(AttributeValue::N(now.to_string()))
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

    async fn create_aborted(&self, tx: &TxId, began: u64, now: u64) -> Result<Created, PortError> {
        self.create(&TxRecord::never_began(tx, now).created(began))
            .await
    }

    async fn overdue(&self, now: u64, limit: usize) -> Result<Vec<TxRecord>, PortError> {
        let (entries, _) = self
            .pending_entries(&IndexQuery {
                after: None,
                deadline_before: Some(now),
                ready_at: Some(now),
                limit,
            })
            .await?;
        self.unfinished(entries).await
    }

    async fn oldest_pending_deadline(&self) -> Result<Option<u64>, PortError> {
        // The index is sorted by deadline within each shard: the first entry of each, no filter.
        const WHAT: &str = "querying the oldest pending transaction";
        let query = PendingQuery {
            deadline_only: true,
            page: 1,
            ..PendingQuery::default()
        };
        let mut scan = PendingScan::new(&self.client, &self.table, query, WHAT);
        let mut oldest: Option<u64> = None;
        while let Some((_, items)) = scan.next_page().await? {
            for item in &items {
                let deadline = match item.get(DEADLINE) {
                    Some(AttributeValue::N(d)) => d.parse::<u64>().ok(),
                    _ => None,
                }
                .ok_or_else(|| corrupt(WHAT, "an entry without a deadline"))?;
                oldest = Some(oldest.map_or(deadline, |o| o.min(deadline)));
            }
            scan.next_shard();
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
        // Finished meanwhile (the condition fails): nothing to count.
        self.update_if(tx, &e, &set, cond, "counting an attempt on")
            .await
            .map(|_| ())
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
        // Asked already, decided meanwhile, or no such record: nothing to ask.
        self.update_if(tx, &e, &set, cond, "asking for the recovery of")
            .await
    }
}

impl DynamoTxLog {
    /// One conditional `UpdateItem` of a record's bookkeeping (`set`, under `cond`): true if
    /// it wrote, false if the condition did not hold. `doing` names the write in errors.
    pub(crate) async fn update_if(
        &self,
        tx: &TxId,
        e: &Expr,
        set: &[String],
        cond: String,
        doing: &str,
    ) -> Result<bool, PortError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(tx)))
            .update_expression(update_expression(set, &[]))
            .condition_expression(cond)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(classify(format!("{doing} {tx}"), err)),
        }
    }
}
