//! The HTTP adapter: `POST /prepare`, `/commit` and `/abort` with the JSON the coordinator's
//! `http` transport sends (the request itself; the reply as the answer), every request signed
//! (`twopc_core::signing`). A refused request gets a JSON error with a stable `code`:
//!
//! | status | code | when |
//! | --- | --- | --- |
//! | 401 | `unsigned`, `malformed_signature`, `bad_signature`, `stale_request`, `wrong_transaction` | the signature does not hold |
//! | 400 | `invalid_request` | the body is not the action's request |
//! | 413 | `request_too_large` | over [`HttpConfig::max_body_bytes`] |
//! | 503 | `busy`, `unavailable` | a copy's hook call is under way; the state store is unavailable: retry |
//! | 500 | `hook_failed`, `internal` | a hook failed (called again by the next message); anything else |
//!
//! A 5xx tells the coordinator the call may have acted: it retries or leaves it to recovery.

use std::sync::Arc;

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
use twopc_core::ids::TxId;
use twopc_core::message::{CompleteRequest, PrepareRequest};
use twopc_core::ports::{Clock, PortError, TxLog};
use twopc_core::signing::{self, DEFAULT_MAX_SKEW_MS, Secret};

use crate::hooks::Hooks;
use crate::participant::{Error, SdkParticipant};
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
}

struct App<P> {
    participant: P,
    config: HttpConfig,
}

fn error(status: StatusCode, code: &str, message: impl std::fmt::Display) -> Response {
    let body = json!({"code": code, "message": message.to_string()});
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
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e),
    }
}

fn failed(e: &Error) -> Response {
    let (status, code) = match e {
        Error::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
        Error::Store(PortError::Retryable { .. }) => {
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        }
        Error::Hook { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "hook_failed"),
        Error::Invalid(_) | Error::Store(PortError::Invalid { .. }) => {
            (StatusCode::BAD_REQUEST, "invalid_request")
        }
        Error::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    };
    error(status, code, e)
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
            let refused = error(StatusCode::PAYLOAD_TOO_LARGE, "request_too_large", message);
            return Err(Box::new(refused));
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let now = self.participant.clock().now_ms();
        let secret = self.config.secret.expose();
        let signed = signing::verify(secret, header, body, now, self.config.max_skew_ms)
            .map_err(|e| Box::new(error(StatusCode::UNAUTHORIZED, e.code(), &e)))?;
        let request: R = serde_json::from_slice(body)
            .map_err(|e| Box::new(error(StatusCode::BAD_REQUEST, "invalid_request", e)))?;
        let tx = tx_of(&request);
        if tx.as_str() != signed {
            let e = signing::SignatureError::OtherTransaction {
                signed,
                body: tx.to_string(),
            };
            return Err(Box::new(error(StatusCode::UNAUTHORIZED, e.code(), &e)));
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
}

/// The routes, answering for `participant`.
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
        .with_state(app)
}
