//! The participant function: the generic participant (prepare / commit / abort) on the table
//! named by `TWOPC_PARTICIPANT_TABLE`, invoked by the coordinator's `lambda` transport. `main`
//! wires configuration, logs and clients once; the handler is the library's
//! [`participant::handler`].

use lambda_runtime::{Error, run, service_fn};
use participant::handler::{self, App};
use twopc_function::logs::init_tracing;
use twopc_runtime::Clients;
use twopc_runtime::config::{ParticipantSettings, Settings};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let settings = ParticipantSettings::from_env().expect("participant configuration");
    let clients = Clients::load(&settings).await;
    let app = App {
        participant: twopc_runtime::participant(&settings.protocol, &clients),
        metrics: settings.shared.metrics(),
        table: settings.table,
    };
    let app = &app;
    run(service_fn(move |event| handler::handle(app, event))).await
}
