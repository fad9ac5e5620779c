//! The local gateway's routes: the live page, the operator console, the WebSocket and its management API, the local
//! helpers (`/local/...`), the demo's custom participant (`/services/payments/...`), and everything else to the coordinator's handler; every refusal in
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
use twopc_core::api::codes;

use super::answers::{json_refusals, json_response, refusal, refusal_as};
use super::apigw::{api_gateway, query_params};
use super::demo::PAYMENTS_PATH;
use super::items::{get_item, list_items};
use super::stack::Stack;

/// The router over `stack`.
pub fn router(stack: Arc<Stack>) -> Router {
    let max_body = stack.settings.max_body_bytes;
    Router::new()
        .route("/", get(live_page))
        .route("/console", get(console_page))
        .route("/ws", get(websocket))
        .route("/@connections/{id}", post(post_to_connection))
        .route("/local/sweep", post(sweep_once))
        .route("/local/items/{participant}", get(list_items))
        .route("/local/items/{participant}/{id}", get(get_item))
        .fallback(api_gateway)
        .with_state(stack.clone())
        .nest(PAYMENTS_PATH, payments(&stack))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(max_body, json_refusals))
}

/// The demo's custom participant as a service of its own would serve it: the SDK's signed
/// `POST /prepare|commit|abort` and the card gateway's `GET /authorisations`.
fn payments(stack: &Stack) -> Router {
    let signed = twopc_participant_sdk::http::HttpConfig::new(stack.secret.clone());
    twopc_participant_sdk::http::router(stack.payments.clone(), signed)
        .merge(payments::routes(stack.cards.clone()))
}

/// The live page, with a token of its own (the local demo's admin: it shows every change).
async fn live_page(State(stack): State<Arc<Stack>>) -> Response {
    let token = match stack.gateway.page_token() {
        Ok(t) => t,
        Err(e) => return refusal(codes::UNAVAILABLE, format!("minting the page's token: {e}")),
    };
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        include_str!("live.html").replace("__TWOPC_PAGE_TOKEN__", &token),
    )
        .into_response()
}

/// The operator console, with the same admin token: for the operator API (`Authorization:
/// Bearer`) and the WebSocket.
async fn console_page(State(stack): State<Arc<Stack>>) -> Response {
    let token = match stack.gateway.page_token() {
        Ok(t) => t,
        Err(e) => return refusal(codes::UNAVAILABLE, format!("minting the page's token: {e}")),
    };
    crate::console::page(&serde_json::json!({
        "token": token,
        "ws": {"url": null, "token": token},
        "where": "the local stack (twopc serve)",
        "pollSecs": crate::console::POLL_SECS_LIVE,
    }))
    .into_response()
}

async fn websocket(
    State(stack): State<Arc<Stack>>,
    uri: Uri,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let query = match query_params(&uri) {
        Ok(q) => q,
        Err(message) => return refusal(codes::INVALID_QUERY_STRING, message),
    };
    match ws {
        Ok(ws) => stack.gateway.clone().upgrade(ws, query.into()).await,
        Err(e) => refusal_as(
            e.status(),
            codes::INVALID_WEBSOCKET_REQUEST,
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

/// `POST /local/sweep`: one recovery pass now (`twopc sweep`): the sweeper's, then the custom
/// participant's own (`customResolved`: how many of its states it resolved).
async fn sweep_once(State(stack): State<Arc<Stack>>) -> Response {
    let report = match stack.sweeper.run().await {
        Ok(report) => report,
        Err(e) => {
            return refusal(codes::UNAVAILABLE, e.to_string());
        }
    };
    match stack.payments.sweep(super::SWEEP_LIMIT).await {
        Ok(resolved) => {
            let mut body = serde_json::to_value(report).unwrap_or(Value::Null);
            body["customResolved"] = Value::from(resolved.len());
            json_response(StatusCode::OK, body)
        }
        Err(e) => refusal(codes::UNAVAILABLE, format!("the payments sweep: {e}")),
    }
}
