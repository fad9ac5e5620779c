//! WebSocket subscriptions: one item per (topic, connection), so finding a topic's subscribers
//! is a key query; the `by-connection` index finds a connection's items for `$disconnect`.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, PutRequest, WriteRequest};
use rand::Rng;
use twopc_core::ports::PortError;

use crate::error::{classify, corrupt};
use twopc_core::layout::EXPIRE_AT;

use crate::tables::{BY_CONNECTION_INDEX, CONNECTION_ATTR, TOPIC_ATTR};

/// The connections table.
#[derive(Clone, Debug)]
pub struct DynamoConnections {
    client: Client,
    table: String,
    ttl_secs: u64,
}

/// A connection's marker topic: present from `$connect` to `$disconnect`.
pub const CONNECTED: &str = "connected";

/// How many times one `BatchWriteItem` chunk is sent while items come back unprocessed.
const BATCH_TRIES: u32 = 5;

/// The wait before resending unprocessed items, after retry `attempt` (0 for the first):
/// exponential from 25 ms, capped at 1 s, jittered to half or more of that. Unprocessed items
/// mean DynamoDB throttled the table or a partition: resending at once would be throttled
/// again.
fn unprocessed_backoff(attempt: u32) -> Duration {
    let full = Duration::from_millis(25)
        .saturating_mul(2u32.saturating_pow(attempt))
        .min(Duration::from_secs(1));
    full.mul_f64(rand::rng().random_range(0.5..=1.0))
}

impl DynamoConnections {
    /// Subscriptions in `table`, kept for `ttl_secs` (API Gateway closes connections after 2 h).
    pub fn new(client: Client, table: impl Into<String>, ttl_secs: u64) -> Self {
        DynamoConnections {
            client,
            table: table.into(),
            ttl_secs,
        }
    }

    fn key(topic: &str, connection: &str) -> std::collections::HashMap<String, AttributeValue> {
        [
            (TOPIC_ATTR.to_owned(), AttributeValue::S(topic.to_owned())),
            (
                CONNECTION_ATTR.to_owned(),
                AttributeValue::S(connection.to_owned()),
            ),
        ]
        .into()
    }

    /// Subscribes `connection` to `topics` (idempotent), with `now_secs` for the TTL.
    pub async fn subscribe(
        &self,
        connection: &str,
        topics: &[String],
        now_secs: u64,
    ) -> Result<(), PortError> {
        let expire = (now_secs + self.ttl_secs).to_string();
        let mut writes: Vec<WriteRequest> = vec![];
        for topic in std::iter::once(CONNECTED).chain(topics.iter().map(String::as_str)) {
            let mut item = Self::key(topic, connection);
            item.insert(EXPIRE_AT.into(), AttributeValue::N(expire.clone()));
            let put = PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map_err(|e| corrupt("subscribe", e.to_string()))?;
            writes.push(WriteRequest::builder().put_request(put).build());
        }
        self.batch(writes, connection).await
    }

    async fn batch(&self, writes: Vec<WriteRequest>, connection: &str) -> Result<(), PortError> {
        for chunk in writes.chunks(25) {
            let mut pending = chunk.to_vec();
            for attempt in 0..BATCH_TRIES {
                if attempt > 0 {
                    tokio::time::sleep(unprocessed_backoff(attempt - 1)).await;
                }
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, pending.clone())
                    .send()
                    .await
                    .map_err(|e| classify(format!("subscriptions of {connection}"), e))?;
                pending = out
                    .unprocessed_items()
                    .and_then(|u| u.get(&self.table))
                    .cloned()
                    .unwrap_or_default();
                if pending.is_empty() {
                    break;
                }
            }
            if !pending.is_empty() {
                return Err(PortError::Retryable {
                    context: format!("subscriptions of {connection}"),
                    source: format!("unprocessed items after {BATCH_TRIES} tries").into(),
                });
            }
        }
        Ok(())
    }

    /// Every connection subscribed to any of `topics`, each once.
    pub async fn subscribers(&self, topics: &[String]) -> Result<Vec<String>, PortError> {
        let mut out = std::collections::BTreeSet::new();
        for topic in topics {
            let items = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#t = :t")
                .expression_attribute_names("#t", TOPIC_ATTR)
                .expression_attribute_values(":t", AttributeValue::S(topic.clone()))
                .into_paginator()
                .items()
                .send()
                .try_collect()
                .await
                .map_err(|e| classify(format!("subscribers of {topic}"), e))?;
            for item in items {
                if let Some(AttributeValue::S(c)) = item.get(CONNECTION_ATTR) {
                    out.insert(c.clone());
                }
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Removes every subscription of `connection` (`$disconnect`, or a push found it gone).
    pub async fn forget(&self, connection: &str) -> Result<(), PortError> {
        let items = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(BY_CONNECTION_INDEX)
            .key_condition_expression("#c = :c")
            .expression_attribute_names("#c", CONNECTION_ATTR)
            .expression_attribute_values(":c", AttributeValue::S(connection.to_owned()))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| classify(format!("subscriptions of {connection}"), e))?;
        let mut deletes = vec![];
        for item in items {
            if let Some(AttributeValue::S(topic)) = item.get(TOPIC_ATTR) {
                let del = DeleteRequest::builder()
                    .set_key(Some(Self::key(topic, connection)))
                    .build()
                    .map_err(|e| corrupt("forget", e.to_string()))?;
                deletes.push(WriteRequest::builder().delete_request(del).build());
            }
        }
        self.batch(deletes, connection).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unprocessed_items_wait_longer_each_retry_up_to_a_second() {
        for attempt in 0..12 {
            let full = Duration::from_millis(25 << attempt.min(6)).min(Duration::from_secs(1));
            for _ in 0..20 {
                let d = unprocessed_backoff(attempt);
                assert!(
                    d >= full / 2 && d <= full,
                    "attempt {attempt}: {d:?} vs {full:?}"
                );
            }
        }
    }
}
