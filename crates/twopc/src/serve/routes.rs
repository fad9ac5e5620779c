//! The local gateway's routes: the live page, the WebSocket and its management API, the local
//! helpers (`/local/...`), and everything else to the coordinator's handler; every refusal in
//! JSON ([`super::answers`]).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{StatusCode, Uri, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

use super::answers::{json_refusals, json_response, refusal};
use super::apigw::{api_gateway, query_params};
use super::items::{get_item, list_items};
use super::stack::Stack;

/// The router over `stack`.
pub fn router(stack: Arc<Stack>) -> Router {
    let max_body = stack.config.max_body_bytes;
    Router::new()
        .route("/", get(live_page))
        .route("/ws", get(websocket))
        .route("/@connections/{id}", post(post_to_connection))
        .route("/local/sweep", post(sweep_once))
        .route("/local/items/{participant}", get(list_items))
        .route("/local/items/{participant}/{id}", get(get_item))
        .fallback(api_gateway)
        .with_state(stack)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(max_body, json_refusals))
}

async fn live_page() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        include_str!("live.html"),
    )
        .into_response()
}

async fn websocket(
    State(stack): State<Arc<Stack>>,
    uri: Uri,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let query = match query_params(&uri) {
        Ok(q) => q,
        Err(message) => return refusal(StatusCode::BAD_REQUEST, "invalid_query_string", message),
    };
    match ws {
        Ok(ws) => stack.gateway.clone().upgrade(ws, query.into()).await,
        Err(e) => refusal(
            e.status(),
            "invalid_websocket_request",
            format!(
                "{}: connect with a WebSocket client (ws://host:port/ws)",
                e.body_text()
            ),
        ),
    }
}

async fn post_to_connection(
    State(stack): State<Arc<Stack>>,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Response {
    stack.gateway.post(&id, body)
}

/// `POST /local/sweep`: one recovery pass now (`twopc sweep`).
async fn sweep_once(State(stack): State<Arc<Stack>>) -> Response {
    match stack.sweeper.run().await {
        Ok(report) => json_response(
            StatusCode::OK,
            serde_json::to_value(report).unwrap_or(Value::Null),
        ),
        Err(e) => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        ),
    }
}
