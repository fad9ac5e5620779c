//! WebSocket subscriptions: one item per (topic, connection), so finding a topic's subscribers
//! is a key query; the `by-connection` index finds a connection's items for `$disconnect`.
//!
//! A connection's marker (topic [`CONNECTED`]) keeps its principal and grants. Every item of a
//! connection expires (`expireAt`, also the table's TTL) when its token does, or when API Gateway
//! would close it, whichever is first; [`DynamoConnections::subscribers`] never returns an
//! expired subscription, so pushes stop at the token's expiry even before TTL deletes it.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, PutRequest, WriteRequest};
use rand::Rng;
use twopc_core::ports::PortError;

use crate::error::{classify, corrupt};
use twopc_core::layout::EXPIRE_AT;

use crate::tables::{
    BY_CONNECTION_INDEX, CONNECTION_ATTR, GRANTS_ATTR, PRINCIPAL_ATTR, TOPIC_ATTR,
};

/// A connection as `$connect` recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredConnection {
    /// Who connected.
    pub principal: String,
    /// What its token grants, as JSON (the authorizer's `Grants`).
    pub grants: String,
    /// When it stops receiving (unix seconds).
    pub expire_at: u64,
}

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

    /// Records a connection (`$connect`): its principal and grants, until `token_exp` or the
    /// table's connection lifetime from `now_secs`, whichever is first. Returns that expiry.
    pub async fn connect(
        &self,
        connection: &str,
        principal: &str,
        grants: &str,
        token_exp: u64,
        now_secs: u64,
    ) -> Result<u64, PortError> {
        let expire_at = token_exp.min(now_secs.saturating_add(self.ttl_secs));
        let mut item = Self::key(CONNECTED, connection);
        item.insert(EXPIRE_AT.into(), AttributeValue::N(expire_at.to_string()));
        item.insert(
            PRINCIPAL_ATTR.into(),
            AttributeValue::S(principal.to_owned()),
        );
        item.insert(GRANTS_ATTR.into(), AttributeValue::S(grants.to_owned()));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| classify(format!("connection {connection}"), e))?;
        Ok(expire_at)
    }

    /// The connection as `$connect` recorded it (`None`: unknown, or recorded before
    /// connections carried a principal).
    pub async fn connection(
        &self,
        connection: &str,
    ) -> Result<Option<StoredConnection>, PortError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(CONNECTED, connection)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| classify(format!("connection {connection}"), e))?;
        let Some(item) = out.item() else {
            return Ok(None);
        };
        let s = |name: &str| match item.get(name) {
            Some(AttributeValue::S(v)) => Some(v.clone()),
            _ => None,
        };
        let expire_at = match item.get(EXPIRE_AT) {
            Some(AttributeValue::N(n)) => n.parse::<u64>().ok(),
            _ => None,
        };
        Ok(match (s(PRINCIPAL_ATTR), s(GRANTS_ATTR), expire_at) {
            (Some(principal), Some(grants), Some(expire_at)) => Some(StoredConnection {
                principal,
                grants,
                expire_at,
            }),
            _ => None,
        })
    }

    /// Subscribes `connection` to `topics` (idempotent) until `expire_at` (the connection's).
    pub async fn subscribe(
        &self,
        connection: &str,
        topics: &[String],
        expire_at: u64,
    ) -> Result<(), PortError> {
        let expire = expire_at.to_string();
        let mut writes: Vec<WriteRequest> = vec![];
        for topic in topics {
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

    /// The query of a topic's subscriptions unexpired at `now_secs`. Strongly consistent: a
    /// subscription is answered once its write returns, and a change committed after that
    /// answer must find it here, however soon the stream processor looks (an eventually
    /// consistent read may miss a write of the last second).
    fn subscribers_query(&self, topic: &str, now_secs: u64) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("#t = :t")
            .filter_expression("#x > :now")
            .expression_attribute_names("#t", TOPIC_ATTR)
            .expression_attribute_names("#x", EXPIRE_AT)
            .expression_attribute_values(":t", AttributeValue::S(topic.to_owned()))
            .expression_attribute_values(":now", AttributeValue::N(now_secs.to_string()))
    }

    /// Every connection subscribed to any of `topics` whose subscription has not expired at
    /// `now_secs`, each once.
    pub async fn subscribers(
        &self,
        topics: &[String],
        now_secs: u64,
    ) -> Result<Vec<String>, PortError> {
        let mut out = std::collections::BTreeSet::new();
        for topic in topics {
            let items = self
                .subscribers_query(topic, now_secs)
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

    /// What a subscription's answer promises (every change committed after it is pushed)
    /// needs the stream processor to see every acknowledged subscription.
    #[test]
    fn a_topics_subscribers_are_read_strongly_consistent() {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .build();
        let store = DynamoConnections::new(Client::from_conf(config), "connections", 7_200);
        let query = store.subscribers_query("entity:accounts:{\"id\":\"alice\"}", 1);
        assert_eq!(query.get_consistent_read(), &Some(true));
        assert_eq!(query.get_table_name().as_deref(), Some("connections"));
    }

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
