//! Creates the tables of `make watch` and `make sam-local` in DynamoDB Local (the same definitions the tests and
//! `template.yaml` use) and seeds the accounts the sample events name. Idempotent: existing
//! tables and items are left as they are.
//!
//! ```sh
//! cargo run -p twopc-runtime --example local_tables -- http://127.0.0.1:8000 twopc-local-
//! ```

use aws_sdk_dynamodb::types::AttributeValue;
use twopc_core::service::KeySchema;
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let (Some(endpoint), Some(prefix)) = (args.next(), args.next()) else {
        return Err("usage: local_tables DYNAMODB_ENDPOINT TABLE_PREFIX".into());
    };
    let client = twopc_dynamo::client(Some(&endpoint)).await;
    let specs = [
        ("transactions", TableKind::Transactions),
        (
            "accounts",
            TableKind::Participant(KeySchema::string_hash("id")),
        ),
        (
            "wallets",
            TableKind::Participant(KeySchema::string_hash("id")),
        ),
        // The WebSocket subscriptions (connections and stream-processor functions).
        ("connections", TableKind::Connections),
    ];
    for (name, kind) in specs {
        let spec = TableSpec {
            name: format!("{prefix}{name}"),
            kind,
        };
        ensure_table(&client, &spec).await.map_err(|e| {
            format!(
                "creating {}: {e} (is DynamoDB Local at {endpoint}?)",
                spec.name
            )
        })?;
        eprintln!("table {} ready", spec.name);
    }
    for (table, id, balance) in [("accounts", "alice", "100"), ("wallets", "bob", "0")] {
        let put = client
            .put_item()
            .table_name(format!("{prefix}{table}"))
            .item("id", AttributeValue::S(id.into()))
            .item("balance", AttributeValue::N(balance.into()))
            .condition_expression("attribute_not_exists(id)")
            .send()
            .await;
        match put {
            Ok(_) => eprintln!("seeded {table}/{id} with balance {balance}"),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                eprintln!("{table}/{id} already there")
            }
            Err(e) => return Err(format!("seeding {table}/{id}: {e}")),
        }
    }
    Ok(())
}
