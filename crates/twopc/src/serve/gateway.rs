//! The local stack's WebSocket gateway, behaving like API Gateway's WebSocket API: each
//! connection gets an id; `$connect` runs the authorizer the deployment runs
//! (`twopc_authorizer`, against the local issuer's key set: `?token=<JWT>`, or the shared token
//! when `--ws-token` opts in), then `$connect`, `$disconnect` and every message (`subscribe`) go
//! to the connections handler the Lambda runs; the management API (`POST /@connections/{id}`, 410 for
//! a gone connection) lets the stream processor push through the same SDK client code.

use std::collections::HashMap;
use std::sync::Mutex;

use aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest;
use aws_lambda_events::encodings::Body as ApiBody;
use aws_lambda_events::query_map::QueryMap;
use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use twopc_authorizer::local::LocalIssuer;
use twopc_authorizer::verify::JwkSet;
use twopc_authorizer::{AccessRefusal, Principal, Verifier};
use twopc_core::ports::{Clock, SystemClock};
use twopc_dynamo::connections::DynamoConnections;

/// How long a connection admitted by the shared token lasts (API Gateway's connection limit).
const SHARED_TOKEN_SECS: u64 = 7_200;
/// The lifetime of the token the live page gets.
pub const PAGE_TOKEN_SECS: u64 = 12 * 3_600;

/// Open connections, the subscription store, and who may connect.
pub struct Gateway {
    senders: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
    store: DynamoConnections,
    verifier: Verifier<JwkSet>,
    issuer: LocalIssuer,
    shared_token: Option<String>,
}

fn now_secs() -> u64 {
    SystemClock.now_secs()
}

fn connection_id() -> String {
    // API Gateway's ids are short URL-safe strings; a UUID's hex digits are too.
    twopc_core::ids::TxId::random().as_str().replace('-', "")[..16].to_owned()
}

fn event(
    route: &str,
    connection: &str,
    body: Option<String>,
    query: QueryMap,
) -> ApiGatewayWebsocketProxyRequest {
    let mut req = ApiGatewayWebsocketProxyRequest::default();
    req.request_context.route_key = Some(route.to_owned());
    req.request_context.connection_id = Some(connection.to_owned());
    req.request_context.event_type = Some(
        match route {
            "$connect" => "CONNECT",
            "$disconnect" => "DISCONNECT",
            _ => "MESSAGE",
        }
        .to_owned(),
    );
    req.query_string_parameters = query;
    req.body = body;
    req
}

fn text(body: Option<ApiBody>) -> Option<String> {
    match body {
        Some(ApiBody::Text(t)) => Some(t),
        Some(ApiBody::Binary(b)) => String::from_utf8(b).ok(),
        _ => None,
    }
}

impl Gateway {
    /// A gateway over the connections table, admitting tokens of `issuer` (and the shared
    /// token, when one is given).
    pub fn new(
        store: DynamoConnections,
        issuer: LocalIssuer,
        shared_token: Option<String>,
    ) -> Self {
        Gateway {
            senders: Mutex::default(),
            store,
            verifier: Verifier::new(twopc_authorizer::local::config(), issuer.jwks()),
            issuer,
            shared_token,
        }
    }

    /// A token for the live page: the demo's admin, for [`PAGE_TOKEN_SECS`].
    pub fn page_token(&self) -> Result<String, String> {
        self.issuer.mint(
            "live-page",
            &twopc_authorizer::Grants::admin(),
            now_secs(),
            PAGE_TOKEN_SECS,
        )
    }

    /// The authorizer: the shared token when configured and given, else a JWT of the issuer.
    async fn authorize(&self, token: Option<&str>, now: u64) -> Result<Principal, AccessRefusal> {
        if let (Some(expected), Some(given)) = (self.shared_token.as_deref(), token)
            && let Ok(p) = twopc_authorizer::shared::check(expected, given, now + SHARED_TOKEN_SECS)
        {
            return Ok(p);
        }
        self.verifier.verify(token, now).await
    }

    /// Who may call the operator API (`/operator/...`): the `sub` of an admin token of the
    /// local issuer sent as `Authorization: Bearer <token>` (`twopc token --admin`), or the
    /// refusal: 401 `operator_token` without a valid token, 403 `operator_forbidden` for a
    /// token that is not an admin's.
    pub async fn operator(&self, authorization: Option<&str>) -> Result<String, Response> {
        use twopc_core::api::codes;
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim);
        const HOW: &str = "send Authorization: Bearer <a token of twopc token --admin>";
        let principal = self.verifier.verify(token, now_secs()).await.map_err(|r| {
            let why = match r {
                // The WebSocket's wording (`?token=`) is not this call's.
                AccessRefusal::Missing => "no token".to_owned(),
                r => r.to_string(),
            };
            super::answers::refusal(codes::OPERATOR_TOKEN, format!("{why}: {HOW}"))
        })?;
        if !principal.grants.admin {
            return Err(super::answers::refusal(
                codes::OPERATOR_FORBIDDEN,
                format!(
                    "{}'s token is not an admin's: the operator API needs one (twopc token --admin)",
                    principal.sub
                ),
            ));
        }
        Ok(principal.sub)
    }

    /// `GET /ws`: runs `$connect`, then upgrades (or refuses with the handler's status).
    pub async fn upgrade(
        self: std::sync::Arc<Self>,
        ws: WebSocketUpgrade,
        query: QueryMap,
    ) -> Response {
        let id = connection_id();
        let now = now_secs();
        let principal = match self.authorize(query.first("token"), now).await {
            Ok(p) => p,
            Err(r) => {
                tracing::info!(connection = %id, code = r.code(), "websocket connection refused");
                let status = StatusCode::from_u16(r.status()).unwrap_or(StatusCode::UNAUTHORIZED);
                return (
                    status,
                    [("content-type", "application/json")],
                    serde_json::json!({"code": r.code(), "message": r.to_string()}).to_string(),
                )
                    .into_response();
            }
        };
        let mut connect = event("$connect", &id, None, query);
        connect.request_context.authorizer.fields =
            twopc_authorizer::context::to_fields(&principal);
        let reply = twopc_fanout::connections::handle(&self.store, &connect, &SystemClock).await;
        if reply.status_code != 200 {
            let status = StatusCode::from_u16(u16::try_from(reply.status_code).unwrap_or(500))
                .unwrap_or(StatusCode::FORBIDDEN);
            return (
                status,
                [("content-type", "application/json")],
                text(reply.body).unwrap_or_default(),
            )
                .into_response();
        }
        ws.on_upgrade(move |socket| self.session(id, socket))
    }

    async fn session(self: std::sync::Arc<Self>, id: String, mut socket: WebSocket) {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        if let Ok(mut s) = self.senders.lock() {
            s.insert(id.clone(), tx.clone());
        }
        loop {
            tokio::select! {
                outgoing = rx.recv() => match outgoing {
                    Some(msg) => if socket.send(Message::Text(msg.into())).await.is_err() { break },
                    None => break,
                },
                incoming = socket.recv() => match incoming {
                    Some(Ok(Message::Text(body))) => {
                        // Answered once stored (`subscribed`, with `from`): every change
                        // committed after the answer is pushed on this same socket.
                        let reply = twopc_fanout::connections::handle(&self.store, &event("subscribe", &id, Some(body.to_string()), QueryMap::default()), &SystemClock).await;
                        if let Some(t) = text(reply.body) {
                            let _ = tx.send(t);
                        }
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                },
            }
        }
        if let Ok(mut s) = self.senders.lock() {
            s.remove(&id);
        }
        twopc_fanout::connections::handle(
            &self.store,
            &event("$disconnect", &id, None, QueryMap::default()),
            &SystemClock,
        )
        .await;
    }

    /// `POST /@connections/{id}`: the management API's `PostToConnection`.
    pub fn post(&self, id: &str, payload: Bytes) -> Response {
        let sender = self.senders.lock().ok().and_then(|s| s.get(id).cloned());
        match sender {
            Some(tx)
                if tx
                    .send(String::from_utf8_lossy(&payload).into_owned())
                    .is_ok() =>
            {
                StatusCode::OK.into_response()
            }
            _ => (
                StatusCode::GONE,
                [
                    ("x-amzn-errortype", "GoneException"),
                    ("content-type", "application/json"),
                ],
                r#"{"message":"Gone"}"#,
            )
                .into_response(),
        }
    }
}
