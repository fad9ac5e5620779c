//! The operator console: one page (`console.html`, plain HTML and JavaScript) over the operator
//! API (docs/api.md, "The operator API"), served two ways:
//!
//! - by `twopc serve` at `/console`, calling the local stack's `/operator/...` with the admin
//!   token the server writes into the page, and following its WebSocket;
//! - by `twopc console --url <ApiUrl>` on the operator's machine (127.0.0.1 only): the page
//!   calls this small server, which relays each `/operator/...` call to the API, signed with the
//!   operator's own AWS credentials (SigV4, `execute-api`, through `twopc-client`), or with a
//!   bearer token for a local stack. Nothing else is relayed, and nothing is added to the
//!   account. Since the relay signs whatever reaches it, it answers only requests naming it as
//!   `127.0.0.1:<port>` or `localhost:<port>` (no DNS rebinding) and relays only those that carry
//!   the secret of this run its page holds (no other site's page can send the header without
//!   a CORS preflight the relay never grants). Its WebSocket needs a token the console cannot mint (the stack's issuer's or the
//!   shared one): given `--ws-url` and `--ws-token` the page follows it, else it polls.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Value, json};
use twopc_client::{Client, Error};

use crate::cli::{CliFailure, Common};

/// How often the page asks again when nothing is pushed (a transaction that begins or falls
/// overdue pushes nothing), in seconds: with a WebSocket, and without one.
pub const POLL_SECS_LIVE: u32 = 10;
/// See [`POLL_SECS_LIVE`].
pub const POLL_SECS_POLLING: u32 = 5;

/// The page, with `config` (the page's `CONFIG`: `token`, `relay`, `ws`, `where`, `pollSecs`)
/// written in.
pub fn page(config: &Value) -> Html<String> {
    // Inside a <script>: no `<` may close it; in JSON these characters only occur in strings,
    // where their escapes mean the same.
    let config = config
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    Html(include_str!("console.html").replace("__TWOPC_CONSOLE_CONFIG__", &config))
}

/// Options of `twopc console` (with the global `--url`, `--sign` and `--region`).
#[derive(Clone, Debug, clap::Args)]
pub struct ConsoleArgs {
    /// The port on 127.0.0.1 to serve the console on.
    #[arg(long, default_value_t = 3100, env = "TWOPC_CONSOLE_PORT")]
    pub port: u16,
    /// A bearer token for the operator API instead of SigV4: a local stack's admin token
    /// (`twopc token --admin`).
    #[arg(long, env = "TWOPC_OPERATOR_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The stack's WebSocket URL (output `WebSocketUrl`), to follow changes live.
    #[arg(long, requires = "ws_token")]
    pub ws_url: Option<String>,
    /// A token its `$connect` admits (an admin's JWT of its issuer, or the shared token).
    #[arg(
        long,
        env = "TWOPC_WS_TOKEN",
        hide_env_values = true,
        requires = "ws_url"
    )]
    pub ws_token: Option<String>,
}

/// The relay's state: the client that signs, the page's configuration, the hosts it answers
/// to and this run's secret (`Authorization: Bearer` from its page).
struct Console {
    client: Client,
    common: Common,
    page: Value,
    hosts: [String; 2],
    secret: String,
}

/// `twopc console`: serves the page and relays its operator calls until Ctrl-C.
pub async fn run(common: &Common, args: &ConsoleArgs) -> Result<u8, CliFailure> {
    let mut config = common.config();
    let how = match (&args.token, config.signing.is_some()) {
        (Some(_), true) => {
            return Err(CliFailure::new(
                "invalid_input",
                "--token and SigV4 do not go together: SigV4's signature is the Authorization header (use --sign none with --token)",
            ));
        }
        (Some(token), false) => {
            config = config.bearer(token.clone());
            "with your bearer token"
        }
        (None, true) => "signed with your AWS credentials (SigV4)",
        (None, false) => "unsigned",
    };
    let client = Client::new(config).map_err(|e| common.failed(e))?;
    let ws = args
        .ws_url
        .as_ref()
        .map(|url| json!({"url": url, "token": args.ws_token}));
    let secret = format!("console-{}", twopc_core::ids::TxId::random());
    let page = json!({
        "token": secret,
        "relay": true,
        "ws": ws,
        "where": format!("{}: operator calls relayed by twopc console, {how}", common.url),
        "pollSecs": if ws.is_some() { POLL_SECS_LIVE } else { POLL_SECS_POLLING },
    });
    let addr = format!("127.0.0.1:{}", args.port);
    let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| {
        CliFailure::new(
            "listen_failed",
            format!("cannot listen on {addr}: {e} (--port)"),
        )
    })?;
    let port = listener.local_addr().map_or(args.port, |a| a.port());
    let url = format!("http://127.0.0.1:{port}");
    let console = Arc::new(Console {
        client,
        common: common.clone(),
        page,
        hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        secret,
    });
    println!(
        "operator console  {url}/   (the API: {}, {how})\nCtrl-C stops it.",
        common.url
    );
    axum::serve(listener, router(console))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| CliFailure::new("serve_failed", e.to_string()))?;
    Ok(crate::cli::EXIT_OK)
}

fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(console_page))
        .route("/console", get(console_page))
        .route("/operator", any(relay))
        .route("/operator/{*rest}", any(relay))
        .with_state(console)
}

async fn console_page(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    match console.refusal(&headers, false) {
        Some(refused) => refused,
        None => page(&console.page).into_response(),
    }
}

impl Console {
    /// Why a request is not answered: a `Host` that is not this console's, or (`relayed`)
    /// no `Authorization: Bearer <this run's secret>`.
    fn refusal(&self, headers: &HeaderMap, relayed: bool) -> Option<Response> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let why = if !host.is_some_and(|h| self.hosts.iter().any(|ours| ours == h)) {
            format!(
                "Host {host:?} is not this console's: open http://{}/",
                self.hosts[0]
            )
        } else if relayed
            && headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                != Some(self.secret.as_str())
        {
            "only the console's own page may call through it (its token is missing or not this run's): reload the page".to_owned()
        } else {
            return None;
        };
        Some(
            (
                StatusCode::FORBIDDEN,
                [(header::CONTENT_TYPE, "application/json")],
                json!({"code": "console_forbidden", "message": why}).to_string(),
            )
                .into_response(),
        )
    }
}

/// Relays one operator call as it came (method, path, query, body) and answers what the API
/// answered; a call that did not reach it is answered with the client's `code` and message.
async fn relay(
    State(console): State<Arc<Console>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = console.refusal(&headers, true) {
        return refused;
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    match console.client.send(method, path, body).await {
        Ok((status, answer)) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            [(header::CONTENT_TYPE, "application/json")],
            answer.to_string(),
        )
            .into_response(),
        Err(e) => {
            let status = match e {
                Error::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
                Error::Signing { .. } | Error::Invalid(_) => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::BAD_GATEWAY,
            };
            let failure = console.common.failed(e);
            (
                status,
                [(header::CONTENT_TYPE, "application/json")],
                failure.body.to_string(),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_configuration_cannot_close_its_script() {
        let Html(page) = page(&json!({"where": "https://x/</script><script>alert(1)</script>"}));
        assert!(!page.contains("</script><script>alert"), "not escaped");
        assert!(page.contains(r#""where":"https://x/\u003c/script\u003e"#));
        assert_eq!(page.matches("</script>").count(), 1, "only the page's own");
    }
}
