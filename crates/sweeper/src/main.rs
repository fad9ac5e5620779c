//! The sweeper function: one recovery pass per scheduled event, the completer per batch of the
//! transactions table's stream. `main` wires configuration,
//! logs and clients once; the handler is the library's [`sweeper::handler`].
// The runtime's future nests the recovery pass's, which nests the protocol's: its layout is
// deeper than rustc's default query limit.
#![recursion_limit = "256"]

use lambda_runtime::{Error, run, service_fn};
use sweeper::handler::{self, App};
use twopc_function::logs::init_tracing;
use twopc_runtime::Aws;
use twopc_runtime::config::{Settings, SweeperSettings};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let settings = SweeperSettings::from_env().expect("sweeper configuration");
    let aws = Aws::load(&settings).await;
    let app = App::new(&settings, &aws, settings.shared.metrics());
    let app = &app;
    run(service_fn(move |event| handler::invoke(app, event))).await
}
