//! What the SDK's integration suites share: a fresh state table on DynamoDB Local.

use twopc_core::ids::TxId;
use twopc_participant_sdk::DynamoStates;

/// States in a fresh table on the DynamoDB Local that `TWOPC_DYNAMODB_ENDPOINT` names (as
/// `make test` and `infra/dynamodb-local.sh run` set it), its name starting with `prefix`.
pub async fn dynamodb_states(prefix: &str) -> DynamoStates {
    let endpoint = std::env::var("TWOPC_DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("TWOPC_DYNAMODB_ENDPOINT is not set: run under infra/dynamodb-local.sh run")
    });
    let client = twopc_dynamo::client(Some(&endpoint)).await;
    let name = format!("{prefix}{}-payments-state", &TxId::random().as_str()[..8]);
    let states = DynamoStates::new(client, name);
    states
        .create_table_if_missing()
        .await
        .expect("create table");
    states
}
