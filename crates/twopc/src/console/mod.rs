//! The operator console: one page (`console.html`, plain HTML and JavaScript) over the operator
//! API (docs/api.md, "The operator API"), served two ways:
//!
//! - by `twopc serve` at `/console`, calling the local stack's `/operator/...` with the admin
//!   token the server writes into the page, and following its WebSocket;
//! - by `twopc console --url <ApiUrl>` on the operator's machine (127.0.0.1 only): the page
//!   calls this small server, which relays each `/operator/...` call to the API, signed with the
//!   operator's own AWS credentials (SigV4, `execute-api`, through `twopc-client`), or with a
//!   bearer token for a local stack. Nothing else is relayed, and nothing is added to the
//!   account. Its WebSocket needs a token the console cannot mint (the stack's issuer's or the
//!   shared one): given `--ws-url` and `--ws-token` the page follows it, else it polls.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri, header};
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

/// The page, with `config` (the page's `CONFIG`: `token`, `ws`, `where`, `pollSecs`) written in.
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

/// The relay's state: the client that signs, and the page's configuration.
struct Console {
    client: Client,
    common: Common,
    page: Value,
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
    let page = json!({
        "token": null,
        "ws": ws,
        "where": format!("{}: operator calls relayed by twopc console, {how}", common.url),
        "pollSecs": if ws.is_some() { POLL_SECS_LIVE } else { POLL_SECS_POLLING },
    });
    let console = Arc::new(Console {
        client,
        common: common.clone(),
        page,
    });
    let addr = format!("127.0.0.1:{}", args.port);
    let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| {
        CliFailure::new(
            "listen_failed",
            format!("cannot listen on {addr}: {e} (--port)"),
        )
    })?;
    let url = listener
        .local_addr()
        .map_or(addr, |a| format!("http://{a}"));
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

async fn console_page(State(console): State<Arc<Console>>) -> Html<String> {
    page(&console.page)
}

/// Relays one operator call as it came (method, path, query, body) and answers what the API
/// answered; a call that did not reach it is answered with the client's `code` and message.
async fn relay(
    State(console): State<Arc<Console>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
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
