//! The connections function: `main` wires configuration, logs and clients once.

use connections::{App, handle, var};
use lambda_runtime::{Error, run, service_fn};
use twopc_dynamo::connections::DynamoConnections;
use twopc_runtime::telemetry::{Metrics, init_tracing};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let table = std::env::var(var::CONNECTIONS_TABLE)
        .expect("TWOPC_CONNECTIONS_TABLE: set it to the connections table name");
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let app = App {
        store: DynamoConnections::new(aws_sdk_dynamodb::Client::new(&sdk), table, 7_200),
        metrics: Metrics::new(
            std::env::var(var::METRICS_NAMESPACE)
                .unwrap_or_else(|_| twopc_runtime::config::DEFAULT_METRICS_NAMESPACE.into()),
            "connections",
        ),
    };
    let app = &app;
    run(service_fn(move |event| handle(app, event))).await
}
