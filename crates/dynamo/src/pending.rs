//! The sharded `pending-by-deadline` index, queried in one place: the transactions table's
//! unfinished records (the sweeper's overdue ones, the API's listing, the oldest deadline) and a
//! custom participant's unfinished states all read it through [`PendingScan`].
//!
//! Writers spread the index over [`INDEX_SHARDS`] partitions (`P0`…, [`crate::tables::shard_of`]),
//! each sorted by deadline; a scan reads the shards one after another, page by page, each
//! caller deciding from a page whether the rest of its shard is needed.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use twopc_core::layout::{DEADLINE, PENDING, RETRY_AFTER};
use twopc_core::ports::PortError;

use crate::codec::Item;
use crate::error::classify;
use crate::expr::Expr;
use crate::tables::{INDEX_SHARDS, PENDING_INDEX};

/// Which entries of the index a scan reads, and how.
#[derive(Clone, Copy, Debug, Default)]
pub struct PendingQuery {
    /// Deadlines at or after this.
    pub from: Option<u64>,
    /// Deadlines before this.
    pub before: Option<u64>,
    /// Only entries ready to be retried at this time: no `retryAfter`, or one before it.
    pub ready_at: Option<u64>,
    /// Read the deadline only (the index holds the keys and `retryAfter` besides).
    pub deadline_only: bool,
    /// At most this many entries a request (clamped to 1..=1000).
    pub page: usize,
}

/// A scan of the index: the pages of every shard in turn ([`PendingScan::next_page`]).
pub struct PendingScan<'a> {
    client: &'a Client,
    table: &'a str,
    query: PendingQuery,
    context: &'a str,
    shard: u32,
    start: Option<HashMap<String, AttributeValue>>,
}

impl<'a> PendingScan<'a> {
    /// A scan of the index of `table`; `context` names it in errors.
    pub fn new(client: &'a Client, table: &'a str, query: PendingQuery, context: &'a str) -> Self {
        // Nothing to read when no deadline can be in range: none is before 0, and none is at
        // or after `from` and before `before` once `from >= before` (a listing's cursor past
        // the overdue bound). DynamoDB would refuse that range (`BETWEEN` with its lower bound
        // above its upper): the empty answer is the true one.
        let empty = match (query.from, query.before) {
            (_, Some(0)) => true,
            (Some(from), Some(before)) => from >= before,
            _ => false,
        };
        let shard = if empty { INDEX_SHARDS } else { 0 };
        PendingScan {
            client,
            table,
            query,
            context,
            shard,
            start: None,
        }
    }

    /// The next page: its shard and its entries, in deadline order within the shard; `None`
    /// once every shard is read.
    pub async fn next_page(&mut self) -> Result<Option<(u32, Vec<Item>)>, PortError> {
        if self.shard >= INDEX_SHARDS {
            return Ok(None);
        }
        let q = &self.query;
        let mut e = Expr::new();
        let pending = format!(
            "{} = {}",
            e.name(PENDING),
            e.value(AttributeValue::S(format!("P{}", self.shard)))
        );
        // DynamoDB refuses a placeholder the expression does not use.
        let deadline = match (q.from, q.before) {
            (None, None) => String::new(),
            _ => e.name(DEADLINE),
        };
        let mut n = |v: u64| e.value(AttributeValue::N(v.to_string()));
        let kc = match (q.from, q.before) {
            (None, None) => pending,
            (Some(from), None) => format!("{pending} AND {deadline} >= {}", n(from)),
            (None, Some(before)) => format!("{pending} AND {deadline} < {}", n(before)),
            (Some(from), Some(before)) => format!(
                "{pending} AND {deadline} BETWEEN {} AND {}",
                n(from),
                n(before - 1)
            ),
        };
        let filter = q.ready_at.map(|now| {
            let retry = e.name(RETRY_AFTER);
            format!(
                "attribute_not_exists({retry}) OR {retry} < {}",
                e.value(AttributeValue::N(now.to_string()))
            )
        });
        let projection = q.deadline_only.then(|| e.name(DEADLINE));
        let out = self
            .client
            .query()
            .table_name(self.table)
            .index_name(PENDING_INDEX)
            .key_condition_expression(kc)
            .set_filter_expression(filter)
            .set_projection_expression(projection)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .set_exclusive_start_key(self.start.take())
            .limit(q.page.clamp(1, 1000) as i32)
            .send()
            .await
            .map_err(|err| classify(self.context, err))?;
        let shard = self.shard;
        self.start = out.last_evaluated_key().cloned();
        if self.start.is_none() {
            self.shard += 1;
        }
        Ok(Some((shard, out.items.unwrap_or_default())))
    }

    /// Skips the rest of the shard of the last page (nothing if it was its last).
    pub fn next_shard(&mut self) {
        if self.start.take().is_some() {
            self.shard += 1;
        }
    }
}
