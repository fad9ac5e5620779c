//! The coordinator's HTTP API, answered by the coordinator Lambda's own handler: each request
//! becomes the API Gateway proxy event Lambda would receive (query parameters included), and the
//! handler's answer becomes the HTTP response.

use std::collections::HashMap;
use std::sync::Arc;

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::encodings::Body as ApiBody;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use percent_encoding::percent_decode_str;
use twopc_core::api::codes;

use super::answers::refusal;
use super::stack::Stack;

/// Every request no other route takes.
pub async fn api_gateway(
    State(stack): State<Arc<Stack>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = match query_params(&uri) {
        Ok(q) => q,
        Err(message) => return refusal(codes::INVALID_QUERY_STRING, message),
    };
    let mut req = ApiGatewayProxyRequest::default();
    // The operator API is authorised apart from submitting: the admin token here, IAM on its
    // routes in AWS; either way the handler learns who asked from the request's identity.
    if uri.path() == "/operator" || uri.path().starts_with("/operator/") {
        let authorization = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match stack.gateway.operator(authorization).await {
            Ok(sub) => req.request_context.identity.user_arn = Some(format!("token:{sub}")),
            Err(refused) => return refused,
        }
    }
    req.http_method = method;
    req.path = Some(uri.path().to_owned());
    req.resource = Some("/{proxy+}".to_owned());
    req.headers = headers;
    req.query_string_parameters = query.clone().into();
    req.multi_value_query_string_parameters = query.into();
    if !body.is_empty() {
        match String::from_utf8(body.to_vec()) {
            Ok(text) => req.body = Some(text),
            Err(e) => {
                return refusal(
                    codes::INVALID_JSON,
                    format!("the body is not UTF-8 text ({e}): send the transaction as JSON"),
                );
            }
        }
    }
    let mut context = lambda_runtime::Context::default();
    context.request_id = twopc_core::ids::TxId::random().to_string();
    let event = lambda_runtime::LambdaEvent::new(req, context);
    let Ok(resp) = coordinator::handler::handle(&stack.app, event).await;
    let status = StatusCode::from_u16(u16::try_from(resp.status_code).unwrap_or(500))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match resp.body {
        Some(ApiBody::Text(t)) => Body::from(t),
        Some(ApiBody::Binary(b)) => Body::from(b),
        _ => Body::empty(),
    };
    let mut out = Response::new(body);
    *out.status_mut() = status;
    *out.headers_mut() = resp.headers;
    out
}

/// A request's query parameters, percent-decoded (`+` is a space); `Err` says which part does
/// not decode to UTF-8 text.
pub fn query_params(uri: &Uri) -> Result<HashMap<String, Vec<String>>, String> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_decode_str(&s)
            .decode_utf8()
            .map(|d| d.into_owned())
            .map_err(|_| {
                format!(
                    "the query parameter {s:?} does not decode to UTF-8 text: percent-encode UTF-8 bytes"
                )
            })
    };
    let mut params: HashMap<String, Vec<String>> = HashMap::new();
    for pair in uri.query().unwrap_or_default().split('&') {
        if pair.is_empty() {
            continue;
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        params.entry(decode(k)?).or_default().push(decode(v)?);
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_decoded_and_undecodable_ones_refused() {
        let uri: Uri = "/ws?token=a%2Fb+c&flag&x=1&x=2".parse().expect("uri");
        let q = query_params(&uri).expect("decodes");
        assert_eq!(q["token"], ["a/b c"]);
        assert_eq!(q["flag"], [""]);
        assert_eq!(q["x"], ["1", "2"]);
        let bad: Uri = "/ws?token=%ff".parse().expect("uri");
        let refused = query_params(&bad).expect_err("not UTF-8");
        assert!(refused.contains("%ff"), "{refused}");
    }
}
