//! Table definitions, shared by tests, the local stack and `template.yaml` (which must match
//! them: `tests/` checks the template against these names).

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::create_table::builders::CreateTableFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType as DdbKeyType, Projection, ProjectionType, ScalarAttributeType, StreamSpecification,
    StreamViewType, TableStatus, TimeToLiveSpecification,
};
use twopc_core::layout::{
    DEADLINE, ENDED, EXPIRE_AT, LOCK_EXPIRES_AT, LOCK_SHARD, PENDING, RETRY_AFTER, TX_ID,
    UPDATED_AT,
};
use twopc_core::ports::PortError;
use twopc_core::service::{KeySchema, KeyType};

use crate::error::classify;

/// Transactions table: sparse index of non-terminal records by deadline (keys and `retryAfter`
/// only: the sweeper reads each record it finds). A custom participant's state table has the
/// same index of its unfinished states (no state carries `retryAfter`).
pub const PENDING_INDEX: &str = "pending-by-deadline";
/// Transactions table: sparse index of terminal records by status and end (`ended` =
/// `<STATUS>#<shard>`, sorted by `updatedAt`, keys only), what an operator lists ended
/// transactions by. An entry is written once, when the record ends (a terminal record's keys
/// never move again), and removed with the record by TTL: one index write per transaction.
pub const ENDED_INDEX: &str = "ended-by-time";
/// Participant tables: sparse index of locked (or reserved) items by lock expiry (keys only: the
/// sweeper reads each item it finds).
pub const LOCK_INDEX: &str = "locks-by-expiry";
/// Connections table: partition key (one item per topic and connection).
pub const TOPIC_ATTR: &str = "topic";
/// Connections table: sort key.
pub const CONNECTION_ATTR: &str = "connectionId";
/// Connections table, a connection's marker: who connected (the token's `sub`).
pub const PRINCIPAL_ATTR: &str = "principal";
/// Connections table, a connection's marker: what its token grants (the `twopc` claim, JSON).
pub const GRANTS_ATTR: &str = "grants";
/// Connections table: index of a connection's subscriptions (for `$disconnect`).
pub const BY_CONNECTION_INDEX: &str = "by-connection";
/// Index partitions: spread writes of the sparse indexes over this many keys.
pub const INDEX_SHARDS: u32 = 4;

/// The index partition of a transaction id.
pub fn shard_of(tx: &str, prefix: &str) -> String {
    let h = tx
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
    format!("{prefix}{}", h % INDEX_SHARDS)
}

/// What a table is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableKind {
    /// The transaction log.
    Transactions,
    /// A participant service's items.
    Participant(KeySchema),
    /// WebSocket subscriptions: (topic, connection id), TTL `expireAt`.
    Connections,
    /// A custom participant's per-transaction state (`twopc-participant-sdk`): `txId`, the
    /// sparse `pending-by-deadline` index of unfinished states, TTL `expireAt`.
    ParticipantState,
}

/// A table to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSpec {
    /// Table name.
    pub name: String,
    /// What it holds.
    pub kind: TableKind,
}

fn scalar(kind: KeyType) -> ScalarAttributeType {
    match kind {
        KeyType::S => ScalarAttributeType::S,
        KeyType::N => ScalarAttributeType::N,
    }
}

fn attr(name: &str, t: ScalarAttributeType) -> Result<AttributeDefinition, PortError> {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(t)
        .build()
        .map_err(build_err)
}

fn key(name: &str, t: DdbKeyType) -> Result<KeySchemaElement, PortError> {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(t)
        .build()
        .map_err(build_err)
}

fn build_err(e: aws_sdk_dynamodb::error::BuildError) -> PortError {
    PortError::Invalid {
        context: "table definition".into(),
        message: e.to_string(),
    }
}

/// A sparse index that projects its keys (and `include`, which a query filters on): whoever
/// queries it reads each item it finds. An index that projected every attribute was written
/// again, at the item's full size, on every write to an item it holds — every status swap of an
/// open record, every prepare and release of an item in the lock index (where reservations
/// leave items until the sweeper's next pass) — which doubled the write units of a transaction
/// (`make bench`, bench/results/NOTES.md). A keys-only entry costs one unit when an item enters
/// or leaves the index, or its keys move, and nothing otherwise.
fn sparse_index(
    name: &str,
    hash: &str,
    range: &str,
    include: &[&str],
) -> Result<GlobalSecondaryIndex, PortError> {
    let projection = if include.is_empty() {
        Projection::builder().projection_type(ProjectionType::KeysOnly)
    } else {
        Projection::builder()
            .projection_type(ProjectionType::Include)
            .set_non_key_attributes(Some(include.iter().map(|a| (*a).to_owned()).collect()))
    };
    GlobalSecondaryIndex::builder()
        .index_name(name)
        .key_schema(key(hash, DdbKeyType::Hash)?)
        .key_schema(key(range, DdbKeyType::Range)?)
        .projection(projection.build())
        .build()
        .map_err(build_err)
}

/// Creates the table if it does not exist and waits until it is active. Idempotent.
pub async fn ensure_table(client: &Client, spec: &TableSpec) -> Result<(), PortError> {
    let exists = client.describe_table().table_name(&spec.name).send().await;
    if exists.is_err() {
        create_table(client, spec).await?;
    }
    wait_until_active(client, &spec.name).await?;
    if matches!(
        spec.kind,
        TableKind::Transactions | TableKind::Connections | TableKind::ParticipantState
    ) {
        enable_ttl(client, &spec.name).await?;
    }
    Ok(())
}

/// Creates the table (on demand, streams with both images); one created meanwhile by another
/// is as good.
async fn create_table(client: &Client, spec: &TableSpec) -> Result<(), PortError> {
    let req = client
        .create_table()
        .table_name(&spec.name)
        .billing_mode(BillingMode::PayPerRequest)
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()
                .map_err(build_err)?,
        );
    if let Err(e) = keys_and_indexes(req, &spec.kind)?.send().await {
        let in_use = e
            .as_service_error()
            .is_some_and(|s| s.is_resource_in_use_exception());
        if !in_use {
            return Err(classify(format!("creating table {}", spec.name), e));
        }
    }
    Ok(())
}

/// The key, the attributes it and the indexes name, and the indexes of a table of `kind`.
fn keys_and_indexes(
    req: CreateTableFluentBuilder,
    kind: &TableKind,
) -> Result<CreateTableFluentBuilder, PortError> {
    Ok(match kind {
        TableKind::Transactions => pending_index(req)?
            .attribute_definitions(attr(ENDED, ScalarAttributeType::S)?)
            .attribute_definitions(attr(UPDATED_AT, ScalarAttributeType::N)?)
            .global_secondary_indexes(sparse_index(ENDED_INDEX, ENDED, UPDATED_AT, &[])?),
        TableKind::ParticipantState => pending_index(req)?,
        TableKind::Connections => {
            let by_connection = GlobalSecondaryIndex::builder()
                .index_name(BY_CONNECTION_INDEX)
                .key_schema(key(CONNECTION_ATTR, DdbKeyType::Hash)?)
                .key_schema(key(TOPIC_ATTR, DdbKeyType::Range)?)
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::KeysOnly)
                        .build(),
                )
                .build()
                .map_err(build_err)?;
            req.attribute_definitions(attr(TOPIC_ATTR, ScalarAttributeType::S)?)
                .attribute_definitions(attr(CONNECTION_ATTR, ScalarAttributeType::S)?)
                .key_schema(key(TOPIC_ATTR, DdbKeyType::Hash)?)
                .key_schema(key(CONNECTION_ATTR, DdbKeyType::Range)?)
                .global_secondary_indexes(by_connection)
        }
        TableKind::Participant(schema) => {
            let mut req = req
                .attribute_definitions(attr(&schema.hash.name, scalar(schema.hash.kind))?)
                .key_schema(key(&schema.hash.name, DdbKeyType::Hash)?);
            if let Some(range) = &schema.range {
                req = req
                    .attribute_definitions(attr(&range.name, scalar(range.kind))?)
                    .key_schema(key(&range.name, DdbKeyType::Range)?);
            }
            req.attribute_definitions(attr(LOCK_SHARD, ScalarAttributeType::S)?)
                .attribute_definitions(attr(LOCK_EXPIRES_AT, ScalarAttributeType::N)?)
                .global_secondary_indexes(sparse_index(
                    LOCK_INDEX,
                    LOCK_SHARD,
                    LOCK_EXPIRES_AT,
                    &[],
                )?)
        }
    })
}

/// The key of a transactions or state table and its `pending-by-deadline` index.
fn pending_index(req: CreateTableFluentBuilder) -> Result<CreateTableFluentBuilder, PortError> {
    Ok(req
        .attribute_definitions(attr(TX_ID, ScalarAttributeType::S)?)
        .attribute_definitions(attr(PENDING, ScalarAttributeType::S)?)
        .attribute_definitions(attr(DEADLINE, ScalarAttributeType::N)?)
        .key_schema(key(TX_ID, DdbKeyType::Hash)?)
        .global_secondary_indexes(sparse_index(
            PENDING_INDEX,
            PENDING,
            DEADLINE,
            // The sweeper's backoff: the query filters on it.
            &[RETRY_AFTER],
        )?))
}

/// Waits (up to a minute) until the table is active: DynamoDB offers no wait primitive.
async fn wait_until_active(client: &Client, table: &str) -> Result<(), PortError> {
    for _ in 0..600 {
        let d = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| classify(format!("describing table {table}"), e))?;
        if d.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Turns on TTL over the expiry attribute; already on is as good.
async fn enable_ttl(client: &Client, table: &str) -> Result<(), PortError> {
    let ttl = TimeToLiveSpecification::builder()
        .enabled(true)
        .attribute_name(EXPIRE_AT)
        .build()
        .map_err(build_err)?;
    if let Err(e) = client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(ttl)
        .send()
        .await
    {
        // Enabling TTL twice is refused ("already enabled"): that is the state we want.
        let already = e
            .as_service_error()
            .and_then(|s| aws_sdk_dynamodb::error::ProvideErrorMetadata::message(s))
            .is_some_and(|m| m.contains("already enabled"));
        if !already {
            return Err(classify(format!("enabling TTL on {table}"), e));
        }
    }
    Ok(())
}
