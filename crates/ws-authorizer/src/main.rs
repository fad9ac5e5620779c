//! The WebSocket `$connect` authorizer: `main` wires configuration, logs and the key source once.

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use twopc_core::ports::{Clock, SystemClock};
use twopc_runtime::config::{Config, Role};
use twopc_runtime::telemetry::{Metrics, init_tracing};
use ws_authorizer::{App, handle, verifier};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let role = Role::WsAuthorizer;
    let config = Config::from_env(role).expect("ws-authorizer configuration");
    let app = App {
        verifier: verifier(&config).expect("ws-authorizer configuration"),
        shared_token: config.ws.as_ref().and_then(|ws| ws.shared_token.clone()),
        metrics: Metrics::new(&config.metrics_namespace, role.function()),
    };
    let app = &app;
    run(service_fn(move |event: LambdaEvent<_>| async move {
        let now = SystemClock.now_secs();
        Ok::<_, Error>(handle(app, &event.payload, now).await)
    }))
    .await
}
