//! The embedded engine through the AWS SDK, as every caller reaches it: a table made, an item
//! written and read back; in a file, the item still there after a stop and a start; a file that
//! is not the engine's refused with its path named.

use std::collections::HashMap;
use std::path::PathBuf;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use twopc_engine::{EmbeddedEngine, EngineError, Storage};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "twopc-engine-{name}-{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

async fn create_table(client: &Client) {
    client
        .create_table()
        .table_name("things")
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("id")
                .key_type(KeyType::Hash)
                .build()
                .expect("key"),
        )
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("id")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute"),
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .expect("create table");
}

async fn put(client: &Client, id: &str, n: &str) {
    client
        .put_item()
        .table_name("things")
        .item("id", AttributeValue::S(id.into()))
        .item("n", AttributeValue::N(n.into()))
        .send()
        .await
        .expect("put");
}

async fn get(client: &Client, id: &str) -> Option<HashMap<String, AttributeValue>> {
    client
        .get_item()
        .table_name("things")
        .key("id", AttributeValue::S(id.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("get")
        .item
}

#[tokio::test]
async fn an_item_written_in_memory_reads_back_exactly() {
    let engine = EmbeddedEngine::start(Storage::InMemory).expect("start");
    assert!(engine.endpoint().starts_with("http://127.0.0.1:"));
    let client = twopc_dynamo::client(Some(engine.endpoint())).await;
    create_table(&client).await;
    // 38 significant digits: money never loses one.
    put(&client, "a", "12345678901234567890.123456789012345678").await;
    let item = get(&client, "a").await.expect("item");
    assert_eq!(
        item.get("n"),
        Some(&AttributeValue::N(
            "12345678901234567890.123456789012345678".into()
        ))
    );
    engine.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_file_keeps_its_tables_and_items_across_a_restart() {
    let dir = temp_dir("restart");
    let storage = Storage::in_folder(&dir.join("data"));
    let engine = EmbeddedEngine::start(storage.clone()).expect("start");
    let client = twopc_dynamo::client(Some(engine.endpoint())).await;
    create_table(&client).await;
    put(&client, "kept", "7").await;
    engine.shutdown().await.expect("shutdown");

    let engine = EmbeddedEngine::start(storage).expect("start again");
    let client = twopc_dynamo::client(Some(engine.endpoint())).await;
    let item = get(&client, "kept").await.expect("the item is still there");
    assert_eq!(item.get("n"), Some(&AttributeValue::N("7".into())));
    engine.shutdown().await.expect("shutdown");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused_naming_it() {
    let dir = temp_dir("not-a-db");
    let path = dir.join("dynamodb.sqlite");
    std::fs::write(
        &path,
        "not a database, just text long enough to be read as a header",
    )
    .unwrap();
    let err = match EmbeddedEngine::start(Storage::File(path.clone())) {
        Ok(_) => panic!("a text file was opened as the engine's database"),
        Err(e) => e,
    };
    assert!(matches!(err, EngineError::Open { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
