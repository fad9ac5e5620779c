//! The stream-processor function: `main` wires configuration, logs and clients once.

use lambda_runtime::{Error, run, service_fn};
use stream_processor::{StreamSettings, handle, processor};
use twopc_function::logs::init_tracing;
use twopc_runtime::Aws;
use twopc_runtime::config::Settings;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let settings = StreamSettings::from_env().expect("stream-processor configuration");
    let aws = Aws::load(&settings).await;
    let processor = processor(&settings, &aws);
    let metrics = settings.shared.metrics();
    let (processor, metrics) = (&processor, &metrics);
    run(service_fn(move |event| handle(processor, metrics, event))).await
}
