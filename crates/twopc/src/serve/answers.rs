//! The local gateway's JSON answers. Every refusal is JSON with a stable `code`, whatever layer
//! refuses.
//!
//! The coordinator's handler and the WebSocket routes answer their own errors in JSON; what is
//! left are the refusals axum makes before a handler runs (no route for a method, a body over the
//! buffer limit, a path that does not decode, a failed WebSocket upgrade). [`json_refusals`] runs
//! around every route and rewrites any error answer that is not JSON yet. Only requests that are
//! not HTTP at all (an unparseable request line or header) are refused by hyper's parser itself,
//! with a bare `400` before any request exists, as API Gateway's own front end does.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use twopc_core::api::codes::{self, Code};

/// The stable `code` of an error answer that carries no code of its own (the answer keeps its
/// status).
pub fn code_for(status: StatusCode) -> Code {
    match status {
        StatusCode::NOT_FOUND => codes::NOT_FOUND,
        StatusCode::METHOD_NOT_ALLOWED => codes::METHOD_NOT_ALLOWED,
        StatusCode::PAYLOAD_TOO_LARGE => codes::REQUEST_TOO_LARGE,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => codes::UNSUPPORTED_MEDIA_TYPE,
        StatusCode::UPGRADE_REQUIRED => codes::UPGRADE_REQUIRED,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => codes::UNAUTHORIZED,
        StatusCode::SERVICE_UNAVAILABLE => codes::UNAVAILABLE,
        s if s.is_server_error() => codes::INTERNAL,
        _ => codes::INVALID_REQUEST,
    }
}

/// A JSON answer.
pub fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A JSON error answer with the code's status: `{"code", "message"}`.
pub fn refusal(code: Code, message: impl Into<String>) -> Response {
    let status = StatusCode::from_u16(code.status).unwrap_or(StatusCode::BAD_REQUEST);
    refusal_as(status, code, message)
}

/// The same with another status than the code's (a local route's own reading of it).
pub fn refusal_as(status: StatusCode, code: Code, message: impl Into<String>) -> Response {
    json_response(
        status,
        json!({"code": code.name, "message": message.into()}),
    )
}

/// Middleware: rewrites a non-JSON error answer (status 400 or more) into
/// `{"code", "message"}`, keeping its status and headers (axum adds `Allow` to a 405). `max_body` is the
/// buffer limit the router was given, named in the 413 message.
pub async fn json_refusals(State(max_body): State<usize>, req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if status.as_u16() < 400 || is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => format!(
            "the body is larger than the {max_body} bytes accepted: send fewer participants or smaller operations"
        ),
        StatusCode::METHOD_NOT_ALLOWED => {
            format!(
                "{method} is not allowed on {path}; the Allow header lists the methods that are"
            )
        }
        StatusCode::NOT_FOUND if text.is_empty() => format!("no route {path:?}"),
        _ if text.is_empty() => status
            .canonical_reason()
            .unwrap_or("refused")
            .to_lowercase(),
        _ => text,
    };
    let body = json!({"code": code_for(status).name, "message": message}).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framework_statuses_map_to_the_codes_the_readme_promises() {
        assert_eq!(
            code_for(StatusCode::PAYLOAD_TOO_LARGE).name,
            "request_too_large"
        );
        assert_eq!(
            code_for(StatusCode::METHOD_NOT_ALLOWED).name,
            "method_not_allowed"
        );
        assert_eq!(code_for(StatusCode::NOT_FOUND).name, "not_found");
        assert_eq!(code_for(StatusCode::BAD_REQUEST).name, "invalid_request");
        assert_eq!(code_for(StatusCode::BAD_GATEWAY).name, "internal");
    }
}
