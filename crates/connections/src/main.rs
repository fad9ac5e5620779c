//! The connections function: `main` wires configuration, logs and clients once.

use connections::{App, handle};
use lambda_runtime::{Error, run, service_fn};
use twopc_dynamo::connections::DynamoConnections;
use twopc_function::logs::init_tracing;
use twopc_runtime::Aws;
use twopc_runtime::config::{CONNECTION_TTL_SECS, ConnectionsSettings, Settings};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let settings = ConnectionsSettings::from_env().expect("connections configuration");
    let aws = Aws::load(&settings).await;
    let app = App {
        store: DynamoConnections::new(aws.dynamodb(), &settings.table, CONNECTION_TTL_SECS),
        metrics: settings.shared.metrics(),
    };
    let app = &app;
    run(service_fn(move |event| handle(app, event))).await
}
