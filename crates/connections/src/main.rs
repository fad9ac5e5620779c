//! The connections function: `main` wires configuration, logs and clients once.

use connections::{App, handle, var};
use lambda_runtime::{Error, run, service_fn};
use twopc_dynamo::connections::DynamoConnections;
use twopc_runtime::Aws;
use twopc_runtime::telemetry::{Metrics, init_tracing};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let table = std::env::var(var::CONNECTIONS_TABLE)
        .expect("TWOPC_CONNECTIONS_TABLE: set it to the connections table name");
    let aws = Aws::from_env().await;
    let app = App {
        store: DynamoConnections::new(aws.dynamodb(), table, 7_200),
        metrics: Metrics::new(
            std::env::var(var::METRICS_NAMESPACE)
                .unwrap_or_else(|_| twopc_runtime::config::DEFAULT_METRICS_NAMESPACE.into()),
            "connections",
        ),
    };
    let app = &app;
    run(service_fn(move |event| handle(app, event))).await
}
