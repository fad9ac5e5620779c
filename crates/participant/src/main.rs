//! The participant function: the generic participant (prepare / commit / abort) on the table
//! named by `TWOPC_PARTICIPANT_TABLE`, invoked by the coordinator's `lambda` transport. `main`
//! wires configuration, logs and clients once; the handler is the library's
//! [`participant::handler`].

use lambda_runtime::{Error, run, service_fn};
use participant::handler::{self, App};
use twopc_runtime::Clients;
use twopc_runtime::config::{Config, Role};
use twopc_runtime::telemetry::{Metrics, init_tracing};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let role = Role::Participant;
    let config = Config::from_env(role).expect("participant configuration");
    let clients = Clients::load(&config).await;
    let app = App {
        participant: twopc_runtime::participant(&config, &clients),
        table: config.participant_table().to_owned(),
        metrics: Metrics::new(&config.metrics_namespace, role.function()),
    };
    let app = &app;
    run(service_fn(move |event| handler::handle(app, event))).await
}
