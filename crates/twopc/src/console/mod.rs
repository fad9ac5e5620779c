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

use axum::response::Html;
use serde_json::Value;

/// How often the page asks again when nothing is pushed (a transaction that begins or falls
/// overdue pushes nothing), in seconds: with a WebSocket, and without one.
pub const POLL_SECS_LIVE: u32 = 10;

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
