//! The client commands, as `main` dispatches them. `api`: `submit`, `transfer`, `status`, `seed`
//! and `pending` speak the HTTP API through `twopc-client` (HTTPS, a per-request timeout, safe
//! retries with one Idempotency-Key, SigV4 for a deployed stack). `local`: `sweep`, `accounts`,
//! `items` and `get` use the local stack's own routes (`/local/...`), which a deployment does not
//! have: pointed at an `https` URL they say so. This file holds what every command shares: the
//! options, the client built from them, and a failure's `code`, message and exit code.

mod api;
mod local;

use std::time::Duration;

use serde_json::{Value, json};
use twopc_client::{Client, Config, Error};

pub use api::{PendingArgs, TransferArgs, pending, seed, status, submit, transfer};
pub use local::{get, items, sweep};

/// Exit code: committed, or the command succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit code: the transaction aborted (HTTP 409 with status ABORTED).
pub const EXIT_ABORTED: u8 = 1;
/// Exit code: bad input, unreachable stack, or any other error.
pub const EXIT_ERROR: u8 = 2;
/// Exit code: not decided yet (outcome `pending`); its coordinator or the sweeper ends it.
pub const EXIT_PENDING: u8 = 3;

/// When a submitted transaction is answered (`--wait`).
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct WaitArg {
    /// `applied`: once every participant applied the outcome, so that what you read next shows
    /// it; `decided`: as soon as the outcome is decided (a staged commit's one-round answer; the
    /// rest finishes in the background).
    #[arg(long, value_enum, default_value_t = WaitFor::Applied)]
    pub wait: WaitFor,
}

/// See [`WaitArg`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitFor {
    /// Answered once decided.
    Decided,
    /// Answered once applied everywhere.
    Applied,
}

impl WaitFor {
    /// The API's `wait` field.
    fn as_str(self) -> &'static str {
        match self {
            WaitFor::Decided => "decided",
            WaitFor::Applied => "applied",
        }
    }
}

/// Where the stack is, how to reach it and how to print.
#[derive(Clone, Debug, clap::Args)]
pub struct Common {
    /// Base URL of the HTTP API: the local stack, or a deployed one
    /// (`https://{api}.execute-api.{region}.amazonaws.com/{stage}`).
    #[arg(
        long,
        global = true,
        default_value = "http://127.0.0.1:3000",
        env = "TWOPC_URL"
    )]
    pub url: String,
    /// Print JSON (the API's answer, or `{"code", "message"}` for an error) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// How requests are signed: `auto` signs `https` URLs with SigV4 (API Gateway's IAM
    /// authorisation; credentials and region from the standard AWS chain), `sigv4` always,
    /// `none` never.
    #[arg(long, global = true, value_enum, default_value_t = Sign::Auto)]
    pub sign: Sign,
    /// The API's region for SigV4 (default: from the URL's host, else the AWS chain).
    #[arg(long, global = true, env = "TWOPC_REGION")]
    pub region: Option<String>,
    /// Each request's time limit, in milliseconds (retried with the same Idempotency-Key).
    #[arg(long, global = true, default_value_t = 30_000)]
    pub request_timeout_ms: u64,
}

/// How requests are signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Sign {
    /// SigV4 for `https` URLs, nothing for `http`.
    Auto,
    /// Always SigV4.
    Sigv4,
    /// Never.
    None,
}

impl Common {
    /// Whether the URL is a deployed stack's (`https`): the local stack serves `http`.
    fn is_deployed(&self) -> bool {
        self.url.starts_with("https://")
    }

    fn client(&self) -> Result<Client, CliFailure> {
        Client::new(self.config()).map_err(|e| self.failed(e))
    }

    /// The client's configuration: the URL, the time limit, and SigV4 as `--sign` says.
    pub(crate) fn config(&self) -> Config {
        let mut config = Config::new(self.url.clone())
            .timeout(Duration::from_millis(self.request_timeout_ms.max(1)));
        let sign = match self.sign {
            Sign::Auto => self.is_deployed(),
            Sign::Sigv4 => true,
            Sign::None => false,
        };
        if sign {
            let mut sigv4 = twopc_client::SigV4::from_env();
            if let Some(region) = &self.region {
                sigv4 = sigv4.region(region.clone());
            }
            config = config.sigv4(sigv4);
        }
        config
    }

    /// A client error as the command's failure.
    pub(crate) fn failed(&self, e: Error) -> CliFailure {
        let code = match &e {
            Error::Api { code, .. } => code.as_str().to_owned(),
            Error::Undetermined { .. } => "undetermined".into(),
            Error::Timeout { .. } => "timeout".into(),
            Error::Transport { .. } => "unreachable".into(),
            Error::Protocol { .. } => "unexpected_answer".into(),
            Error::Unfinished { .. } => "unfinished".into(),
            Error::Signing { .. } => "signing".into(),
            Error::Invalid(_) => "invalid_input".into(),
        };
        let mut message = e.to_string();
        if matches!(e, Error::Transport { .. } | Error::Timeout { .. }) && !self.is_deployed() {
            message = format!(
                "cannot reach the local stack at {}: {message}. Is `twopc serve` (make run) running? Use --url to point elsewhere.",
                self.url
            );
        }
        let mut body = json!({"code": code, "message": message});
        match &e {
            Error::Api {
                body: answer,
                status,
                ..
            } => {
                body = answer.clone();
                if body.get("code").is_none() {
                    body = json!({"code": code, "message": message});
                }
                return CliFailure::answered(*status, body);
            }
            Error::Undetermined {
                tx_id,
                idempotency_key,
                ..
            } => {
                body["txId"] = json!(tx_id);
                body["idempotencyKey"] = json!(idempotency_key);
            }
            _ => {}
        }
        CliFailure::with(body)
    }

    /// Refuses a local-only command against a deployed stack.
    fn local_only(&self, command: &str, instead: &str) -> Result<(), CliFailure> {
        if self.is_deployed() {
            return Err(CliFailure::new(
                "local_only",
                format!(
                    "`twopc {command}` works with the local stack (twopc serve) only: {} is a deployed stack. {instead}",
                    self.url
                ),
            ));
        }
        Ok(())
    }
}

/// A failed command: a stable `code` and a message that says what to do, as JSON
/// (`{"code", "message", ...}`), and the HTTP status when the API answered it.
#[derive(Debug)]
pub struct CliFailure {
    /// The JSON (`code`, `message`, and what else the API said).
    pub body: Value,
    /// The API's status, when it answered.
    pub status: Option<u16>,
}

impl CliFailure {
    /// A failure of the command itself.
    pub fn new(code: &str, message: impl Into<String>) -> CliFailure {
        CliFailure::with(json!({"code": code, "message": message.into()}))
    }

    fn with(body: Value) -> CliFailure {
        CliFailure { body, status: None }
    }

    fn answered(status: u16, body: Value) -> CliFailure {
        CliFailure {
            body,
            status: Some(status),
        }
    }

    /// Prints it: the JSON on standard output with `--json`, else a line on standard error.
    pub fn print(&self, json: bool) {
        if json {
            println!("{}", self.body);
            return;
        }
        let code = self
            .body
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("error");
        let message = self
            .body
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| self.body.to_string(), str::to_owned);
        match self.status {
            Some(status) => eprintln!("error {status} {code}: {message}"),
            None => eprintln!("twopc: {message}"),
        }
    }
}
