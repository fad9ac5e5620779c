//! What an operator lists, counts and notes on the transactions table
//! ([`twopc_core::ports::OperatorLog`]): unfinished transactions through the
//! `pending-by-deadline` index, ended ones through `ended-by-time` (both sparse, keys only,
//! sharded over [`INDEX_SHARDS`] partitions); each record found is then read. Never a scan.

use aws_sdk_dynamodb::types::{AttributeValue, Select};
use futures::future::join_all;
use twopc_core::ids::TxId;
use twopc_core::layout::{DEADLINE, ENDED, OPERATOR_ACTIONS, PENDING, TX_ID, UPDATED_AT};
use twopc_core::operator::{ActionNote, Counts, ListCursor, ListPage, ListQuery};
use twopc_core::ports::{OperatorLog, PortError, TxLog};
use twopc_core::record::TxRecord;
use twopc_core::status::TxStatus;

use crate::codec::{Item, to_attr};
use crate::error::{classify, corrupt};
use crate::expr::Expr;
use crate::tables::{ENDED_INDEX, INDEX_SHARDS, PENDING_INDEX};
use crate::txlog::{DynamoTxLog, IndexQuery, PendingCursor};

impl OperatorLog for DynamoTxLog {
    async fn list(&self, q: &ListQuery) -> Result<ListPage, PortError> {
        if q.ended() {
            return self.list_ended(q).await;
        }
        let after = q.after.as_ref().map(|c| PendingCursor {
            deadline: c.at,
            tx_id: c.tx_id.clone(),
        });
        let limit = q.limit.max(1);
        let (entries, more) = self
            .pending_entries(&IndexQuery {
                after: after.as_ref(),
                deadline_before: q.overdue_at,
                ready_at: None,
                limit,
            })
            .await?;
        let next = more
            .then(|| entries.last())
            .flatten()
            .map(|(at, tx_id)| ListCursor {
                at: *at,
                tx_id: tx_id.clone(),
            });
        let mut records = self.unfinished(entries).await?;
        records.retain(|r| q.admits(r));
        Ok(ListPage { records, next })
    }

    async fn counts(&self, since: u64, now: u64) -> Result<Counts, PortError> {
        let mut c = Counts {
            since,
            ..Counts::default()
        };
        for shard in 0..INDEX_SHARDS {
            let partition = format!("P{shard}");
            c.pending += self.count(PENDING_INDEX, PENDING, &partition, None).await?;
            let overdue = (DEADLINE, Bound::Before(now));
            c.overdue += self
                .count(PENDING_INDEX, PENDING, &partition, Some(overdue))
                .await?;
            for (status, n) in [
                (TxStatus::Committed, &mut c.committed),
                (TxStatus::Aborted, &mut c.aborted),
            ] {
                let partition = format!("{status}#{shard}");
                let window = (UPDATED_AT, Bound::From(since));
                *n += self
                    .count(ENDED_INDEX, ENDED, &partition, Some(window))
                    .await?;
            }
        }
        Ok(c)
    }

    async fn note_action(&self, tx: &TxId, note: &ActionNote) -> Result<bool, PortError> {
        let note = serde_json::to_value(note)
            .map_err(|e| corrupt("encoding an operator's action", e.to_string()))?;
        let mut e = Expr::new();
        let actions = e.name(OPERATOR_ACTIONS);
        let set = vec![format!(
            "{actions} = list_append(if_not_exists({actions}, {}), {})",
            e.value(AttributeValue::L(vec![])),
            e.value(AttributeValue::L(vec![to_attr(&note)]))
        )];
        let cond = format!("attribute_exists({})", e.name(TX_ID));
        self.update_if(tx, &e, &set, cond, "noting an operator's action on")
            .await
    }
}

/// A range condition on an index's sort key.
#[derive(Clone, Copy)]
enum Bound {
    /// Before this (exclusive).
    Before(u64),
    /// At or after this.
    From(u64),
}

impl DynamoTxLog {
    /// How many entries of one index partition (within `range`) there are: `Select=COUNT`
    /// queries, page by page (the entries are read, not returned).
    async fn count(
        &self,
        index: &str,
        hash: &str,
        partition: &str,
        range: Option<(&str, Bound)>,
    ) -> Result<u64, PortError> {
        const WHAT: &str = "counting transactions";
        let mut e = Expr::new();
        let mut kc = format!(
            "{} = {}",
            e.name(hash),
            e.value(AttributeValue::S(partition.to_owned()))
        );
        if let Some((name, bound)) = range {
            let (op, at) = match bound {
                Bound::Before(at) => ("<", at),
                Bound::From(at) => (">=", at),
            };
            let name = e.name(name);
            kc = format!(
                "{kc} AND {name} {op} {}",
                e.value(AttributeValue::N(at.to_string()))
            );
        }
        let (mut total, mut start) = (0u64, None);
        loop {
            let out = self
                .client()
                .query()
                .table_name(self.table())
                .index_name(index)
                .key_condition_expression(&kc)
                .set_expression_attribute_names(e.names())
                .set_expression_attribute_values(e.values())
                .select(Select::Count)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|err| classify(WHAT, err))?;
            total += u64::try_from(out.count()).unwrap_or(0);
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(total);
            }
        }
    }

    /// A page of ended transactions, newest first: each shard's partition of the status read
    /// newest first, merged; then each record.
    async fn list_ended(&self, q: &ListQuery) -> Result<ListPage, PortError> {
        let status = q.status.unwrap_or(TxStatus::Committed);
        let limit = q.limit.max(1);
        let mut found: Vec<ListCursor> = vec![];
        for shard in 0..INDEX_SHARDS {
            found.extend(self.ended_entries(q, status, shard, limit).await?);
        }
        found.sort_by(|a, b| b.cmp(a));
        found.dedup();
        let more = found.len() > limit;
        found.truncate(limit);
        let next = more.then(|| found.last().cloned()).flatten();
        let reads = found.iter().map(|c| self.get(&c.tx_id));
        let mut records: Vec<TxRecord> = vec![];
        for r in join_all(reads).await {
            if let Some(r) = r?
                && q.admits(&r)
            {
                records.push(r);
            }
        }
        Ok(ListPage { records, next })
    }

    /// The newest entries of one shard of the ended index within the query's window and after
    /// its cursor: more than `limit`, and the rest of the last one's ties (the index orders
    /// equal times arbitrarily), so that the shard's first `limit` in (time, id) order are among
    /// them.
    async fn ended_entries(
        &self,
        q: &ListQuery,
        status: TxStatus,
        shard: u32,
        limit: usize,
    ) -> Result<Vec<ListCursor>, PortError> {
        const WHAT: &str = "querying ended transactions";
        // Newest first: at most `until - 1`, and no later than the cursor's time.
        let upper = match (q.until, &q.after) {
            (Some(u), Some(a)) => Some(u.saturating_sub(1).min(a.at)),
            (Some(u), None) => Some(u.saturating_sub(1)),
            (None, Some(a)) => Some(a.at),
            (None, None) => None,
        };
        let lower = q.since.unwrap_or(0);
        if q.until == Some(0) || upper.is_some_and(|u| u < lower) {
            return Ok(vec![]);
        }
        let mut e = Expr::new();
        let mut kc = format!(
            "{} = {}",
            e.name(ENDED),
            e.value(AttributeValue::S(format!("{status}#{shard}")))
        );
        let at = e.name(UPDATED_AT);
        let n = |e: &mut Expr, v: u64| e.value(AttributeValue::N(v.to_string()));
        kc = match upper {
            Some(u) => format!(
                "{kc} AND {at} BETWEEN {} AND {}",
                n(&mut e, lower),
                n(&mut e, u)
            ),
            None => format!("{kc} AND {at} >= {}", n(&mut e, lower)),
        };
        let (mut found, mut start) = (vec![], None);
        loop {
            let out = self
                .client()
                .query()
                .table_name(self.table())
                .index_name(ENDED_INDEX)
                .key_condition_expression(&kc)
                .set_expression_attribute_names(e.names())
                .set_expression_attribute_values(e.values())
                .scan_index_forward(false)
                .limit((limit + 1).clamp(1, 1000) as i32)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|err| classify(WHAT, err))?;
            for item in out.items() {
                let entry = ended_entry(item)?;
                if q.after.as_ref().is_some_and(|a| entry >= *a) {
                    continue;
                }
                if found.len() > limit && found.last().is_some_and(|l: &ListCursor| l.at > entry.at)
                {
                    return Ok(found);
                }
                found.push(entry);
            }
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(found);
            }
        }
    }
}

/// An ended index entry's (end, id).
fn ended_entry(item: &Item) -> Result<ListCursor, PortError> {
    const WHAT: &str = "querying ended transactions";
    let tx_id = match item.get(TX_ID) {
        Some(AttributeValue::S(id)) => TxId::parse(id).map_err(|e| corrupt(WHAT, e.to_string()))?,
        _ => return Err(corrupt(WHAT, "an entry without txId")),
    };
    let at = match item.get(UPDATED_AT) {
        Some(AttributeValue::N(d)) => d.parse::<u64>().ok(),
        _ => None,
    }
    .ok_or_else(|| corrupt(WHAT, "an entry without updatedAt"))?;
    Ok(ListCursor { at, tx_id })
}
