//! The local stack's WebSocket gateway, behaving like API Gateway's WebSocket API: each
//! connection gets an id; `$connect`, `$disconnect` and every message (`subscribe`) go to the
//! connections handler the Lambda runs; the management API (`POST /@connections/{id}`, 410 for
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
use twopc_dynamo::connections::DynamoConnections;

/// Open connections and the subscription store.
pub struct Gateway {
    senders: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
    store: DynamoConnections,
    token: Option<String>,
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
    /// A gateway over the connections table; `token` protects `$connect` when set.
    pub fn new(store: DynamoConnections, token: Option<String>) -> Self {
        Gateway {
            senders: Mutex::default(),
            store,
            token,
        }
    }

    /// `GET /ws`: runs `$connect`, then upgrades (or refuses with the handler's status).
    pub async fn upgrade(
        self: std::sync::Arc<Self>,
        ws: WebSocketUpgrade,
        query: QueryMap,
    ) -> Response {
        let id = connection_id();
        let reply = twopc_fanout::connections::handle(
            &self.store,
            &event("$connect", &id, None, query),
            self.token.as_deref(),
            now_secs(),
        )
        .await;
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
                        let reply = twopc_fanout::connections::handle(&self.store, &event("subscribe", &id, Some(body.to_string()), QueryMap::default()), self.token.as_deref(), now_secs()).await;
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
            None,
            now_secs(),
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
