//! The stream-processor function: `main` wires configuration, logs and clients once.

use lambda_runtime::{Error, run, service_fn};
use stream_processor::{Config, handle, processor};
use twopc_runtime::Aws;
use twopc_runtime::telemetry::{Metrics, init_tracing};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let config =
        Config::from_lookup(|v| std::env::var(v).ok()).expect("stream-processor configuration");
    let aws = Aws::from_env().await;
    let processor = processor(&config, &aws);
    let metrics = Metrics::new(&config.metrics_namespace, "stream-processor");
    let (processor, metrics) = (&processor, &metrics);
    run(service_fn(move |event| handle(processor, metrics, event))).await
}
