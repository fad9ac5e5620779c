//! The stream-processor function: `main` wires configuration, logs and clients once.

use lambda_runtime::{Error, run, service_fn};
use stream_processor::{handle, processor};
use twopc_runtime::Aws;
use twopc_runtime::config::{Config, Role};
use twopc_runtime::telemetry::{Metrics, init_tracing};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let role = Role::StreamProcessor;
    let config = Config::from_env(role).expect("stream-processor configuration");
    let aws = Aws::load(&config).await;
    let processor = processor(&config, &aws).expect("stream-processor configuration");
    let metrics = Metrics::new(&config.metrics_namespace, role.function());
    let (processor, metrics) = (&processor, &metrics);
    run(service_fn(move |event| handle(processor, metrics, event))).await
}
