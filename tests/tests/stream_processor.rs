//! The stream-processor function as its `main` wires it (`stream_processor::processor` over
//! the functions' one AWS configuration, so `make test` records its calls) against DynamoDB
//! Local and a loopback Firehose and WebSocket management API: the sample batch's committed
//! change becomes a lake row and a push, and a subscriber whose connection is gone is forgotten.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::json;
use stream_processor::StreamSettings;
use twopc_core::ids::TxId;
use twopc_core::ports::{Clock, SystemClock};
use twopc_dynamo::connections::DynamoConnections;
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};
use twopc_fanout::rows::entity_topic;
use twopc_function::var;
use twopc_runtime::config::Settings;
use twopc_runtime::telemetry::Metrics;
use twopc_tests::endpoint;
use twopc_tests::loopback::{FirehoseShim, serve};

const SAMPLE: &str = include_str!("../../events/stream-processor-commit.json");

/// The connections pushed to.
type Pushed = Arc<Mutex<Vec<String>>>;

/// `PostToConnection` to a connection that is gone: 410 `GoneException`, as API Gateway
/// answers.
async fn gone(State(pushed): State<Pushed>, Path(id): Path<String>) -> axum::response::Response {
    pushed.lock().expect("lock").push(id);
    (
        StatusCode::GONE,
        [
            ("x-amzn-errortype", "GoneException"),
            ("content-type", "application/json"),
        ],
        r#"{"message": "Gone"}"#,
    )
        .into_response()
}

/// The loopback Firehose and WebSocket management API.
async fn serve_both(firehose: &FirehoseShim, pushed: &Pushed) -> String {
    let management = Router::new()
        .route("/@connections/{id}", post(gone))
        .with_state(pushed.clone());
    serve(firehose.router().merge(management)).await
}

#[tokio::test]
async fn a_committed_change_reaches_the_lake_and_its_gone_subscriber_is_forgotten() {
    // GIVEN a subscriber of alice's account whose connection is gone
    let client = twopc_dynamo::client(Some(&endpoint())).await;
    let table = format!("t{}-connections", &TxId::random().as_str()[..8]);
    let spec = TableSpec {
        name: table.clone(),
        kind: TableKind::Connections,
    };
    ensure_table(&client, &spec).await.expect("the table");
    let subscriptions = DynamoConnections::new(client, &table, 7_200);
    let now = SystemClock.now_secs();
    let key = serde_json::Map::from_iter([("id".to_owned(), json!("alice"))]);
    let topic = entity_topic("accounts", &key);
    subscriptions
        .subscribe("gone-1", std::slice::from_ref(&topic), now + 3_600)
        .await
        .expect("subscribed");
    // AND the stream processor configured as the template configures it, its Firehose and
    // management API on loopback
    let (firehose, pushed) = (FirehoseShim::accepting(), Pushed::default());
    let url = serve_both(&firehose, &pushed).await;
    let env = [
        (
            var::STREAM_TABLES,
            r#"{"twopc-transactions": "transactions", "twopc-accounts": {"participant": "accounts", "key": {"hash": {"name": "id", "type": "S"}}}}"#.to_owned(),
        ),
        (var::DELIVERY_STREAM, "lake".to_owned()),
        (var::FIREHOSE_ENDPOINT, url.clone()),
        (var::CONNECTIONS_TABLE, table.clone()),
        (var::WEBSOCKET_ENDPOINT, url),
        (var::DYNAMODB_ENDPOINT, endpoint()),
    ];
    let config = StreamSettings::from_lookup(|name| {
        env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
    })
    .expect("config");
    let processor = stream_processor::processor(&config, &twopc_runtime::Aws::load(&config).await);

    // WHEN the sample batch (alice's committed change) arrives
    let event = serde_json::from_str(SAMPLE).expect("the sample batch");
    let answer = stream_processor::handle(
        &processor,
        &Metrics::in_memory("stream-processor"),
        LambdaEvent::new(event, Context::default()),
    )
    .await
    .expect("handled");

    // THEN its row is in the lake, the push went to the subscriber, and the gone connection's
    // subscription is forgotten
    assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
    let rows = firehose.rows();
    assert!(
        rows.iter()
            .any(|r| r.contains("\"participant\":\"accounts\"") && r.contains("alice")),
        "{rows:?}"
    );
    assert_eq!(*pushed.lock().expect("lock"), ["gone-1"]);
    assert!(
        subscriptions
            .subscribers(&[topic], now)
            .await
            .expect("read")
            .is_empty(),
        "the gone connection is forgotten"
    );
}
