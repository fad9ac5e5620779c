//! The state store on a DynamoDB table of the service's own
//! ([`twopc_dynamo::tables::TableKind::ParticipantState`]): whole-item conditional puts (a
//! state is a few hundred bytes), the sparse `pending-by-deadline` index while unfinished, TTL
//! once finished.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use serde_json::Value;
use twopc_core::ids::TxId;
use twopc_core::layout::{EXPIRE_AT, PENDING, REVISION, TX_ID};
use twopc_core::ports::PortError;
use twopc_dynamo::codec::{Item, from_item, to_item};
use twopc_dynamo::error::{classify, corrupt};
use twopc_dynamo::expr::Expr;
use twopc_dynamo::pending::{PendingQuery, PendingScan};
use twopc_dynamo::tables::shard_of;
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};
use twopc_dynamo::txlog::DEFAULT_RETENTION_SECS;

use crate::start::StartError;
use crate::state::TxState;
use crate::store::{StateStore, Written};

/// Participant states in a DynamoDB table.
#[derive(Clone, Debug)]
pub struct DynamoStates {
    client: Client,
    table: String,
    retention_secs: u64,
}

impl DynamoStates {
    /// The states in `table`. Finished states are kept for the transaction log's retention (7
    /// days), then TTL removes them: a prepare landing later than that after its own deadline
    /// check would find no state (see the crate's docs).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStates {
            client,
            table: table.into(),
            retention_secs: DEFAULT_RETENTION_SECS,
        }
    }

    /// Its table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the state table (`twopc_dynamo::tables::TableKind::ParticipantState`: the key,
    /// the sparse pending index, TTL) if it does not exist. For a local stack or a first
    /// start; a deployment declares the table in its template.
    pub async fn create_table_if_missing(&self) -> Result<(), StartError> {
        let spec = TableSpec {
            name: self.table.clone(),
            kind: TableKind::ParticipantState,
        };
        ensure_table(&self.client, &spec)
            .await
            .map_err(|source| StartError::Table {
                table: self.table.clone(),
                source,
            })
    }

    fn key(tx: &TxId) -> Item {
        [(TX_ID.to_owned(), AttributeValue::S(tx.to_string()))].into()
    }

    fn to_item(&self, state: &TxState) -> Result<Item, PortError> {
        let Ok(Value::Object(map)) = serde_json::to_value(state) else {
            return Err(corrupt("encoding a participant state", "not an object"));
        };
        let mut item = to_item(&map);
        if state.is_pending() {
            let shard = shard_of(state.tx_id.as_str(), "P");
            item.insert(PENDING.into(), AttributeValue::S(shard));
        } else {
            let expire = state.updated_at / 1000 + self.retention_secs;
            item.insert(EXPIRE_AT.into(), AttributeValue::N(expire.to_string()));
        }
        Ok(item)
    }

    async fn put(&self, state: &TxState, cond: String, e: Expr) -> Result<Written, PortError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.to_item(state)?))
            .condition_expression(cond)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(Written::Done),
            Err(err) => match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(c)) => Ok(Written::Lost(
                    c.item().map(state_from_item).transpose()?.map(Box::new),
                )),
                _ => Err(classify(
                    format!("writing the state of transaction {}", state.tx_id),
                    err,
                )),
            },
        }
    }
}

/// Reads a state from an item (index and TTL attributes dropped).
fn state_from_item(item: &Item) -> Result<TxState, PortError> {
    let context = "decoding a participant state";
    let mut map = from_item(item).map_err(|e| corrupt(context, e.to_string()))?;
    map.remove(PENDING);
    map.remove(EXPIRE_AT);
    serde_json::from_value(Value::Object(map)).map_err(|e| corrupt(context, e.to_string()))
}

impl StateStore for DynamoStates {
    async fn get(&self, tx: &TxId) -> Result<Option<TxState>, PortError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(tx)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| classify(format!("reading the state of transaction {tx}"), e))?;
        out.item().map(state_from_item).transpose()
    }

    async fn create(&self, state: &TxState) -> Result<Written, PortError> {
        let mut e = Expr::new();
        let cond = format!("attribute_not_exists({})", e.name(TX_ID));
        self.put(state, cond, e).await
    }

    async fn replace(&self, state: &TxState) -> Result<Written, PortError> {
        let mut e = Expr::new();
        let previous = state.revision.saturating_sub(1).to_string();
        let cond = format!(
            "{} = {}",
            e.name(REVISION),
            e.value(AttributeValue::N(previous))
        );
        self.put(state, cond, e).await
    }

    async fn overdue(&self, now: u64, limit: usize) -> Result<Vec<TxState>, PortError> {
        // The index holds keys only: find the ids, then read each state.
        let context = "querying overdue participant states";
        let mut ids = vec![];
        let query = PendingQuery {
            before: Some(now),
            page: limit,
            ..PendingQuery::default()
        };
        let mut scan = PendingScan::new(&self.client, &self.table, query, context);
        while let Some((shard, items)) = scan.next_page().await? {
            for item in &items {
                let Some(AttributeValue::S(id)) = item.get(TX_ID) else {
                    return Err(corrupt(context, "an entry without txId"));
                };
                ids.push(TxId::parse(id).map_err(|e| corrupt(context, e.to_string()))?);
            }
            if ids.len() >= limit * (shard as usize + 1) {
                scan.next_shard();
            }
        }
        let mut found = vec![];
        for id in ids {
            // Finished since the query (the index is eventually consistent): not overdue.
            if let Some(s) = self.get(&id).await?
                && s.is_pending()
                && s.deadline < now
            {
                found.push(s);
            }
        }
        found.sort_by_key(|s| s.deadline);
        found.truncate(limit);
        Ok(found)
    }
}
