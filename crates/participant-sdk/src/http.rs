//! The HTTP adapter: `POST /prepare`, `/commit`, `/abort` and `/inquire` with the JSON the coordinator's
//! `http` transport sends (the request itself; the reply as the answer), every request signed
//! (`twopc_core::signing`). A refused request gets a JSON error with a stable `code`, each in
//! [`codes`] with its status (`docs/participant-openapi.json` declares every one; the SDK's
//! `tests/openapi.rs` holds the two together).
//!
//! A 5xx tells the coordinator the call may have acted: it retries or leaves it to recovery.
//!
//! A service serves [`router`] with [`serve_http`], merged with routes of its own if it has
//! some (built with the re-exported [`axum`]), and sweeps beside it
//! ([`SdkParticipant::spawn_sweeper`]):
//!
//! ```no_run
//! # async fn wire(participant: twopc_participant_sdk::SdkParticipant<
//! #     impl twopc_participant_sdk::Hooks + 'static,
//! #     impl twopc_participant_sdk::StateStore + 'static,
//! #     impl twopc_participant_sdk::TxLog + 'static,
//! #     impl twopc_participant_sdk::Clock + 'static>)
//! #     -> Result<(), twopc_participant_sdk::StartError> {
//! use twopc_participant_sdk::http::{HttpConfig, router, serve_http};
//!
//! let app = router(participant, HttpConfig::from_env()?);
//! serve_http("127.0.0.1:3001", app).await
//! # }
//! ```

use std::sync::Arc;

pub use axum;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use twopc_core::api::codes::Code;
use twopc_core::ids::TxId;
use twopc_core::message::{CompleteRequest, InquireRequest, PrepareRequest};
use twopc_core::ports::{Clock, PortError, TxLog};
use twopc_core::signing::{self, DEFAULT_MAX_SKEW_MS, Secret};

use twopc_function::env::{ConfigError, Env};
use twopc_function::var;

use crate::hooks::Hooks;
use crate::participant::{Error, SdkParticipant};
use crate::start::StartError;
use crate::store::StateStore;

/// How the router checks requests.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// The secret shared with the coordinator.
    pub secret: Secret,
    /// How far a request's signing time may be from this participant's clock (ms).
    pub max_skew_ms: u64,
    /// The largest body taken (a request is a few hundred bytes plus its payload).
    pub max_body_bytes: usize,
}

impl HttpConfig {
    /// Defaults around `secret`: 5 minutes of skew, 64 KiB bodies.
    pub fn new(secret: Secret) -> HttpConfig {
        HttpConfig {
            secret,
            max_skew_ms: DEFAULT_MAX_SKEW_MS,
            max_body_bytes: 64 * 1024,
        }
    }

    /// Defaults around the secret in `TWOPC_HTTP_SIGNING_SECRET` (the one the coordinator
    /// signs with; at least 16 bytes). Required: the router refuses unsigned requests.
    pub fn from_env() -> Result<HttpConfig, ConfigError> {
        HttpConfig::read(&Env::process())
    }

    fn read<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<HttpConfig, ConfigError> {
        match env.secret(var::HTTP_SIGNING_SECRET)? {
            Some(secret) => Ok(HttpConfig::new(secret)),
            None => Err(ConfigError::Missing {
                var: var::HTTP_SIGNING_SECRET,
                what: "set it to the secret the coordinator signs requests with (at least 16 bytes, e.g. `openssl rand -hex 32`): the participant refuses unsigned requests",
            }),
        }
    }
}

/// Serves `app` ([`router`], with whatever else the service merged into it) on `addr` until
/// the process stops.
pub async fn serve_http(addr: &str, app: Router) -> Result<(), StartError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Listen {
            addr: addr.to_owned(),
            source,
        })?;
    tracing::info!(%addr, "participant listening");
    axum::serve(listener, app).await.map_err(StartError::Serve)
}

/// Every `code` the router answers with, each spelled once with its status and meaning.
pub mod codes {
    use twopc_core::api::codes::Code;

    /// A signing header is missing.
    pub const UNSIGNED: Code = Code {
        name: "unsigned",
        status: 401,
        meaning: "A signing header (x-twopc-timestamp, x-twopc-tx-id, x-twopc-signature) is missing. Nothing was done.",
    };
    /// A signing header is not in its form.
    pub const MALFORMED_SIGNATURE: Code = Code {
        name: "malformed_signature",
        status: 401,
        meaning: "x-twopc-timestamp is not a number of milliseconds, or x-twopc-signature is not v1= and 64 hex digits. Nothing was done.",
    };
    /// The signature does not match.
    pub const BAD_SIGNATURE: Code = Code {
        name: "bad_signature",
        status: 401,
        meaning: "The signature does not match the request: another secret, or the body, time or transaction id was altered. Nothing was done.",
    };
    /// Signed too far from the participant's clock.
    pub const STALE_REQUEST: Code = Code {
        name: "stale_request",
        status: 401,
        meaning: "The request was signed further from the participant's clock than the skew it allows (5 minutes either way by default). Nothing was done.",
    };
    /// Signed for another transaction than the body's.
    pub const WRONG_TRANSACTION: Code = Code {
        name: "wrong_transaction",
        status: 401,
        meaning: "The signed transaction id (x-twopc-tx-id) is not the body's txId. Nothing was done.",
    };
    /// The body is not the call's request.
    pub const INVALID_REQUEST: Code = Code {
        name: "invalid_request",
        status: 400,
        meaning: "The body is not the call's request: not JSON, not an object, a field missing or of the wrong type, or a txId that is not a UUID. Nothing was done.",
    };
    /// The body is too large.
    pub const REQUEST_TOO_LARGE: Code = Code {
        name: "request_too_large",
        status: 413,
        meaning: "The body is over the participant's limit (64 KiB by default). Nothing was done.",
    };
    /// A copy's hook call is under way.
    pub const BUSY: Code = Code {
        name: "busy",
        status: 503,
        meaning: "A copy of this message is being carried out right now; retry later. Nothing more was done.",
    };
    /// The state store is unavailable.
    pub const UNAVAILABLE: Code = Code {
        name: "unavailable",
        status: 503,
        meaning: "The participant's state store is unavailable; retry. The call may or may not have acted (undetermined).",
    };
    /// A hook failed.
    pub const HOOK_FAILED: Code = Code {
        name: "hook_failed",
        status: 500,
        meaning: "The service's own work failed; the next copy of the message (or the participant's sweep) does it again. The coordinator treats the call as undetermined.",
    };
    /// Anything else.
    pub const INTERNAL: Code = Code {
        name: "internal",
        status: 500,
        meaning: "Anything else went wrong; the call may or may not have acted (undetermined).",
    };

    /// Every code.
    pub const ALL: &[Code] = &[
        UNSIGNED,
        MALFORMED_SIGNATURE,
        BAD_SIGNATURE,
        STALE_REQUEST,
        WRONG_TRANSACTION,
        INVALID_REQUEST,
        REQUEST_TOO_LARGE,
        BUSY,
        UNAVAILABLE,
        HOOK_FAILED,
        INTERNAL,
    ];

    /// The code refusing a request whose signature does not hold.
    pub fn of_signature(e: &twopc_core::signing::SignatureError) -> Code {
        use twopc_core::signing::SignatureError;
        match e {
            SignatureError::Unsigned(_) => UNSIGNED,
            SignatureError::Malformed(_) => MALFORMED_SIGNATURE,
            SignatureError::Mismatch => BAD_SIGNATURE,
            SignatureError::Stale { .. } => STALE_REQUEST,
            SignatureError::OtherTransaction { .. } => WRONG_TRANSACTION,
        }
    }
}

struct App<P> {
    participant: P,
    config: HttpConfig,
}

fn error(code: Code, message: impl std::fmt::Display) -> Response {
    let body = json!({"code": code.name, "message": message.to_string()});
    let status = StatusCode::from_u16(code.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(reply: &impl Serialize) -> Response {
    match serde_json::to_string(reply) {
        Ok(body) => (StatusCode::OK, [(CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => error(codes::INTERNAL, e),
    }
}

fn failed(e: &Error) -> Response {
    let code = match e {
        Error::Busy { .. } => codes::BUSY,
        Error::Store(PortError::Retryable { .. }) => codes::UNAVAILABLE,
        Error::Hook { .. } => codes::HOOK_FAILED,
        Error::Invalid(_) | Error::Store(PortError::Invalid { .. }) => codes::INVALID_REQUEST,
        Error::Store(_) => codes::INTERNAL,
    };
    error(code, e)
}

impl<H, S, L, C> App<SdkParticipant<H, S, L, C>>
where
    H: Hooks,
    S: StateStore,
    L: TxLog,
    C: Clock,
{
    /// Checks the signature and the body; the request, or the answer refusing it.
    fn admit<R: DeserializeOwned>(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        tx_of: impl Fn(&R) -> &TxId,
    ) -> Result<R, Box<Response>> {
        if body.len() > self.config.max_body_bytes {
            let max = self.config.max_body_bytes;
            let message = format!("the body is over {max} bytes");
            let refused = error(codes::REQUEST_TOO_LARGE, message);
            return Err(Box::new(refused));
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let now = self.participant.clock().now_ms();
        let secret = self.config.secret.expose();
        let signed = signing::verify(secret, header, body, now, self.config.max_skew_ms)
            .map_err(|e| Box::new(error(codes::of_signature(&e), &e)))?;
        let request: R =
            serde_json::from_slice(body).map_err(|e| Box::new(error(codes::INVALID_REQUEST, e)))?;
        let tx = tx_of(&request);
        if tx.as_str() != signed {
            let e = signing::SignatureError::OtherTransaction {
                signed,
                body: tx.to_string(),
            };
            return Err(Box::new(error(codes::of_signature(&e), &e)));
        }
        Ok(request)
    }

    async fn prepare(&self, headers: &HeaderMap, body: &[u8]) -> Response {
        match self.admit(headers, body, |r: &PrepareRequest| &r.tx_id) {
            Ok(req) => match self.participant.prepare(&req).await {
                Ok(reply) => ok(&reply),
                Err(e) => failed(&e),
            },
            Err(refused) => *refused,
        }
    }

    async fn complete(&self, commit: bool, headers: &HeaderMap, body: &[u8]) -> Response {
        match self.admit(headers, body, |r: &CompleteRequest| &r.tx_id) {
            Ok(req) => {
                let reply = if commit {
                    self.participant.commit(&req).await
                } else {
                    self.participant.abort(&req).await
                };
                match reply {
                    Ok(reply) => ok(&reply),
                    Err(e) => failed(&e),
                }
            }
            Err(refused) => *refused,
        }
    }

    async fn inquire(&self, headers: &HeaderMap, body: &[u8]) -> Response {
        match self.admit(headers, body, |r: &InquireRequest| &r.tx_id) {
            Ok(req) => match self.participant.inquire(&req).await {
                Ok(reply) => ok(&reply),
                Err(e) => failed(&e),
            },
            Err(refused) => *refused,
        }
    }
}

/// The routes, answering for `participant`: `POST /prepare`, `/commit`, `/abort` and
/// `/inquire`, each request's signature checked against `config`'s secret.
pub fn router<H, S, L, C>(participant: SdkParticipant<H, S, L, C>, config: HttpConfig) -> Router
where
    H: Hooks + 'static,
    S: StateStore + 'static,
    L: TxLog + 'static,
    C: Clock + 'static,
{
    let app = Arc::new(App {
        participant,
        config,
    });
    Router::new()
        .route(
            "/prepare",
            post(
                |State(app): State<Arc<App<_>>>, headers: HeaderMap, body: Bytes| async move {
                    app.prepare(&headers, &body).await
                },
            ),
        )
        .route(
            "/commit",
            post(
                |State(app): State<Arc<App<_>>>, headers: HeaderMap, body: Bytes| async move {
                    app.complete(true, &headers, &body).await
                },
            ),
        )
        .route(
            "/abort",
            post(
                |State(app): State<Arc<App<_>>>, headers: HeaderMap, body: Bytes| async move {
                    app.complete(false, &headers, &body).await
                },
            ),
        )
        .route(
            "/inquire",
            post(
                |State(app): State<Arc<App<_>>>, headers: HeaderMap, body: Bytes| async move {
                    app.inquire(&headers, &body).await
                },
            ),
        )
        .with_state(app)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_router_needs_a_signing_secret_of_16_bytes() {
        let env = |v: &'static str| {
            Env::new(move |name: &str| (name == var::HTTP_SIGNING_SECRET).then(|| v.to_owned()))
        };
        let e = HttpConfig::read(&env("")).expect_err("unset");
        assert!(
            matches!(
                e,
                ConfigError::Missing {
                    var: var::HTTP_SIGNING_SECRET,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("refuses unsigned requests"), "{e}");
        let e = HttpConfig::read(&env("short")).expect_err("too short");
        assert!(
            matches!(
                e,
                ConfigError::Invalid {
                    var: var::HTTP_SIGNING_SECRET,
                    ..
                }
            ),
            "{e}"
        );
        let c = HttpConfig::read(&env("0123456789abcdef")).expect("16 bytes");
        assert_eq!(c.secret.expose(), b"0123456789abcdef");
    }
}
