//! The coordinator function: API Gateway (REST, proxy integration) → `POST /transactions`,
//! `GET /transactions/{id}`. `main` wires configuration, logs and clients once; the handler
//! is the library's [`coordinator::handler`].
// The runtime's future nests the handler's, which nests the protocol's (prepare, decide,
// complete over three transports): its layout is deeper than rustc's default query limit.
#![recursion_limit = "256"]

use coordinator::after::AfterAnswer;
use coordinator::handler::{self, App};
use lambda_runtime::{Error, run, service_fn};
use twopc_function::logs::init_tracing;
use twopc_runtime::Clients;
use twopc_runtime::config::{CoordinatorSettings, Settings};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let settings = CoordinatorSettings::from_env().expect("coordinator configuration");
    let clients = Clients::load(&settings).await;
    // Registered before the runtime starts (the init phase): the work after a staged answer
    // runs in this extension, which Lambda waits for before freezing the environment.
    let (after, extension) = AfterAnswer::lambda().await?;
    let app = App::new(&settings, &clients, settings.shared.metrics()).with_after_answer(after);
    let app = &app;
    tokio::try_join!(
        run(service_fn(move |event| handler::invoke(app, event))),
        extension
    )?;
    Ok(())
}
