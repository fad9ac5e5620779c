//! The WebSocket `$connect` authorizer: `main` wires configuration, logs and the key source once.

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use twopc_core::ports::{Clock, SystemClock};
use twopc_function::logs::init_tracing;
use twopc_runtime::config::{Settings, WsAuthorizerSettings};
use ws_authorizer::{App, Trust, handle, trust};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let settings = WsAuthorizerSettings::from_env().expect("ws-authorizer configuration");
    let trust = trust(&settings);
    if let Trust::Misconfigured(problem) = &trust {
        // Not a panic: every $connect is refused with this reason (auth_misconfigured).
        tracing::error!(%problem, "the issuer's configuration is unusable: every connection is refused");
    }
    let app = App {
        trust,
        metrics: settings.shared.metrics(),
        shared_token: settings.shared_token,
    };
    let app = &app;
    run(service_fn(move |event: LambdaEvent<_>| async move {
        let now = SystemClock.now_secs();
        Ok::<_, Error>(handle(app, &event.payload, now).await)
    }))
    .await
}
