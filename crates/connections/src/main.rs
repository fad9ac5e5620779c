//! The connections function: `main` wires configuration, logs and clients once.

use connections::{App, handle};
use lambda_runtime::{Error, run, service_fn};
use twopc_dynamo::connections::DynamoConnections;
use twopc_runtime::Aws;
use twopc_runtime::config::{CONNECTION_TTL_SECS, Config, Role};
use twopc_runtime::telemetry::{Metrics, init_tracing};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let role = Role::Connections;
    let config = Config::from_env(role).expect("connections configuration");
    let aws = Aws::load(&config).await;
    let app = App {
        store: DynamoConnections::new(
            aws.dynamodb(),
            config.connections_table(),
            CONNECTION_TTL_SECS,
        ),
        metrics: Metrics::new(&config.metrics_namespace, role.function()),
    };
    let app = &app;
    run(service_fn(move |event| handle(app, event))).await
}
