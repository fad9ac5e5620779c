//! The WebSocket `$connect` authorizer: `main` wires configuration, logs and the key source once.

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use twopc_authorizer::{Verifier, VerifierConfig};
use twopc_runtime::telemetry::{Metrics, init_tracing};
use ws_authorizer::jwks::HttpsJwks;
use ws_authorizer::{App, handle, var};

fn setting(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let verifier = match setting(var::WS_JWKS_URL) {
        None => None,
        Some(url) => {
            let issuer = setting(var::WS_ISSUER).expect(
                "TWOPC_WS_ISSUER: set it to the issuer (the tokens' iss) with TWOPC_WS_JWKS_URL",
            );
            let audience = setting(var::WS_AUDIENCE)
                .expect("TWOPC_WS_AUDIENCE: set it to the tokens' aud (an app client id) with TWOPC_WS_JWKS_URL");
            let mut config = VerifierConfig::new(issuer, audience);
            if let Some(names) = setting(var::WS_ALGORITHMS) {
                let names: Vec<&str> = names.split(',').map(str::trim).collect();
                config = config
                    .with_algorithms(&names)
                    .expect("TWOPC_WS_ALGORITHMS: a comma-separated list such as RS256,ES256");
            }
            let keys =
                HttpsJwks::new(&url).expect("TWOPC_WS_JWKS_URL: the issuer's https JWKS URL");
            Some(Verifier::new(config, keys))
        }
    };
    let namespace = setting(var::METRICS_NAMESPACE)
        .unwrap_or_else(|| twopc_runtime::config::DEFAULT_METRICS_NAMESPACE.into());
    let app = App {
        verifier,
        shared_token: setting(var::WS_TOKEN),
        metrics: Metrics::new(namespace, "ws-authorizer"),
    };
    let app = &app;
    run(service_fn(move |event: LambdaEvent<_>| async move {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Ok::<_, Error>(handle(app, &event.payload, now).await)
    }))
    .await
}
