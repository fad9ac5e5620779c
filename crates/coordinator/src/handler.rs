//! The REST handler: routes, request checks, answers (docs/api.md). The protocol is the
//! core's `Coordinator`; the answers' bodies are the core's `api` module, shared with the
//! local stack.
//!
//! Every answer is an HTTP response: the handler has no error path of its own, so API Gateway
//! never turns a client's mistake into a 502.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayProxyResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderMap, HeaderValue, Method, header};
use lambda_runtime::LambdaEvent;
use serde_json::Value;
use tracing::{Instrument, Span, error, info, warn};
use twopc_core::api::{self, Answer, codes};
use twopc_core::coordinator::Finish;
use twopc_core::ids::TxId;
use twopc_dynamo::DynamoItems;
use twopc_dynamo::txlog::PendingCursor;
use twopc_function::logs::{record_tx, tx_span};
use twopc_runtime::config::CoordinatorSettings;
use twopc_runtime::telemetry::Metrics;
use twopc_runtime::{Clients, LiveCoordinator};

use crate::after::{AfterAnswer, Work};
use twopc_core::ports::{Clock, SystemClock};

/// The header a client names its idempotency key with (matched case-insensitively).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// What the handler needs, built once in `main`.
pub struct App {
    /// The protocol.
    pub coordinator: Arc<LiveCoordinator>,
    /// Where transaction outcomes are counted.
    pub metrics: Metrics,
    /// Bodies larger than this are refused with 413.
    pub max_body_bytes: usize,
    /// Where the work after a staged answer runs.
    pub after_answer: AfterAnswer,
    /// The participant tables the coordinator reads directly: what an item holds, for the
    /// operator API.
    pub items: DynamoItems,
}

impl App {
    /// The coordinator of `settings` over `clients`, counting outcomes in `metrics`; the work
    /// after an answer is spawned (see [`App::with_after_answer`]).
    pub fn new(settings: &CoordinatorSettings, clients: &Clients, metrics: Metrics) -> App {
        App {
            coordinator: Arc::new(twopc_runtime::coordinator(settings, clients)),
            metrics,
            max_body_bytes: settings.max_body_bytes,
            after_answer: AfterAnswer::spawn(),
            items: DynamoItems::new(clients.dynamodb.clone()),
        }
    }

    /// Runs the work after an answer in `after` (the Lambda extension).
    pub fn with_after_answer(self, after: AfterAnswer) -> App {
        App {
            after_answer: after,
            ..self
        }
    }
}

/// A payload that is not an API Gateway REST proxy request (a console test event, a direct
/// `aws lambda invoke`): the invocation fails with this, as a Lambda function error.
#[derive(Debug, thiserror::Error)]
#[error(
    "the coordinator answers API Gateway REST proxy requests (events/coordinator-post-transaction.json is one); this payload is not one: {0}"
)]
pub struct NotAnApiRequest(#[source] serde_json::Error);

impl From<NotAnApiRequest> for lambda_runtime::Diagnostic {
    fn from(e: NotAnApiRequest) -> Self {
        lambda_runtime::Diagnostic {
            error_type: "NotAnApiRequest".to_owned(),
            error_message: e.to_string(),
        }
    }
}

/// Handles one invocation, whatever its payload: an API Gateway request is [`handle`]d; any
/// other payload fails the invocation at once, saying why, and still tells the after-answer
/// extension that nothing is left (else the invocation would run to its timeout).
pub async fn invoke(
    app: &App,
    event: LambdaEvent<Value>,
) -> Result<ApiGatewayProxyResponse, NotAnApiRequest> {
    let (payload, ctx) = event.into_parts();
    match serde_json::from_value::<ApiGatewayProxyRequest>(payload) {
        Ok(req) => Ok(handle(app, LambdaEvent::new(req, ctx))
            .await
            .unwrap_or_else(|never| match never {})),
        Err(e) => {
            app.after_answer.invocation(&ctx.request_id).hand_over(None);
            warn!(request_id = %ctx.request_id, error = %e, "not an API Gateway request");
            Err(NotAnApiRequest(e))
        }
    }
}

/// Handles one API Gateway request.
pub async fn handle(
    app: &App,
    event: LambdaEvent<ApiGatewayProxyRequest>,
) -> Result<ApiGatewayProxyResponse, Infallible> {
    let started = Instant::now();
    let (req, ctx) = event.into_parts();
    // Exactly one hand-over per invocation, even if what follows panics (the guard's drop).
    let invocation = app.after_answer.invocation(&ctx.request_id);
    let span = tx_span(None, &ctx.request_id);
    // The participants' invocations join the API request's trace.
    let (answer, allow, after) = twopc_runtime::trace::within(
        ctx.xray_trace_id.clone(),
        route(app, &req, &span).instrument(span.clone()),
    )
    .await;
    invocation.hand_over(after.map(|work| -> Work { Box::pin(work.instrument(span.clone())) }));
    span.in_scope(|| {
        info!(
            method = %req.http_method,
            path = req.path.as_deref().unwrap_or_default(),
            status = answer.status,
            latency_ms = started.elapsed().as_millis() as u64,
            "answered"
        );
    });
    Ok(response(answer, allow))
}

/// The path's segments, without empty ones (a trailing slash is ignored).
fn segments(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

async fn route(
    app: &App,
    req: &ApiGatewayProxyRequest,
    span: &Span,
) -> (Answer, Option<&'static str>, Option<Work>) {
    let path = req.path.as_deref().unwrap_or_default();
    match (segments(path).as_slice(), &req.http_method) {
        (["operator", rest @ ..], _) => {
            // Boxed: recovery's future is large, and every request's would carry it.
            let (answer, allow) = Box::pin(crate::operator::route(app, req, rest)).await;
            (answer, allow, None)
        }
        (["transactions"], &Method::POST) => {
            let (answer, after) = submit(app, req, span).await;
            (answer, None, after)
        }
        (["transactions", id], &Method::GET) => (status(app, id, span).await, None, None),
        (["transactions"], &Method::GET) => (pending(app, req).await, None, None),
        (["transactions"], _) => (
            method_not_allowed(&req.http_method, "GET or POST"),
            Some("GET, POST"),
            None,
        ),
        (["transactions", _], _) => (
            method_not_allowed(&req.http_method, "GET"),
            Some("GET"),
            None,
        ),
        _ => (
            api::error(
                codes::NOT_FOUND,
                format!(
                    "no route {path:?}: use POST /transactions, GET /transactions/{{txId}} or GET /transactions?status=pending"
                ),
            ),
            None,
            None,
        ),
    }
}

fn method_not_allowed(method: &Method, allowed: &str) -> Answer {
    api::error(
        codes::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed here; use {allowed}"),
    )
}

/// The request's body as JSON, or the answer refusing it.
fn body_json(req: &ApiGatewayProxyRequest, max: usize) -> Result<Value, Answer> {
    let body = req.body.as_deref().unwrap_or_default();
    if body.len() > max {
        return Err(api::error(
            codes::REQUEST_TOO_LARGE,
            format!(
                "the body has {} bytes; at most {max} are accepted: send fewer participants or smaller operations",
                body.len()
            ),
        ));
    }
    if req.is_base64_encoded {
        return Err(api::error(
            codes::INVALID_JSON,
            "the body arrived base64-encoded (a binary media type): send it as application/json text",
        ));
    }
    if body.trim().is_empty() {
        return Err(api::error(
            codes::INVALID_JSON,
            "the body is empty: send the transaction as a JSON object with \"participants\"",
        ));
    }
    serde_json::from_str(body).map_err(|e| {
        api::error(
            codes::INVALID_JSON,
            format!("the body is not valid JSON ({e}): send a JSON object with \"participants\""),
        )
    })
}

/// The `Idempotency-Key` header as text; the coordinator checks it (`submit`, before anything
/// is written), so bytes that are not text become U+FFFD, which it refuses with the others.
fn idempotency_key(headers: &HeaderMap) -> Option<Cow<'_, str>> {
    headers
        .get(IDEMPOTENCY_KEY)
        .map(|v| String::from_utf8_lossy(v.as_bytes()))
}

async fn submit(app: &App, req: &ApiGatewayProxyRequest, span: &Span) -> (Answer, Option<Work>) {
    let started = Instant::now();
    let body = match body_json(req, app.max_body_bytes) {
        Ok(b) => b,
        Err(refusal) => return (refusal, None),
    };
    let key = idempotency_key(&req.headers);
    if let Some(k) = &key {
        // Known before anything is written: every line of this transaction carries it. The
        // key itself is checked once, by `submit`.
        record_tx(span, &TxId::for_idempotency_key(k));
    }
    // The work after the answer comes back unless the request asked to wait for it.
    let answered = match app.coordinator.submit(&body, key.as_deref()).await {
        Ok(answered) => answered,
        Err(e) => {
            let answer = api::failed(&e);
            if answer.status >= 500 {
                error!(error = %e, source = ?std::error::Error::source(&e), "submit failed");
            }
            return (answer, None);
        }
    };
    record_tx(span, &answered.answer.record.tx_id);
    let (answered, after) = (answered.answer, answered.finish);
    app.metrics
        .transaction(&answered, started.elapsed().as_millis() as u64);
    info!(status = %answered.record.status, outcome = answered.outcome.as_str(), "transaction answered");
    let after = after.map(|finish| finish_after(app.coordinator.clone(), finish));
    (api::submitted(&answered), after)
}

/// What is left of a staged transaction, to run after its answer.
fn finish_after(coordinator: Arc<LiveCoordinator>, finish: Finish) -> Work {
    Box::pin(async move {
        let tx = finish.tx_id().clone();
        match coordinator.finish(finish).await {
            Ok(record) => info!(tx_id = %tx, status = %record.status, "finished after the answer"),
            Err(e) => {
                warn!(tx_id = %tx, error = %e, "finishing after the answer failed; the stream's completer and the sweeper finish it");
            }
        }
    })
}

async fn status(app: &App, id: &str, span: &Span) -> Answer {
    let tx = match TxId::parse(id) {
        Ok(tx) => tx,
        Err(e) => return api::error(codes::INVALID_TX_ID, e.to_string()),
    };
    record_tx(span, &tx);
    match app.coordinator.status_helping(&tx).await {
        Ok(Some(record)) => api::record(&record),
        Ok(None) => api::error(codes::NOT_FOUND, format!("no transaction {tx}")),
        Err(e) => {
            error!(error = %e, "reading the record failed");
            api::error(
                codes::UNAVAILABLE,
                format!("the transaction store could not be read ({e}); retry"),
            )
        }
    }
}

/// Most transactions a page of a listing (`GET /transactions?status=pending`, `GET
/// /operator/transactions`) reads, and the default.
pub const MAX_PAGE: usize = 100;
const DEFAULT_PAGE: usize = 50;

/// `GET /transactions?status=pending[&overdue=true][&limit=N][&next=CURSOR]`: unfinished
/// transactions, oldest deadline first, from the index the sweeper reads.
async fn pending(app: &App, req: &ApiGatewayProxyRequest) -> Answer {
    let query = match listing_query(req) {
        Ok(q) => q,
        Err(message) => return api::error(codes::INVALID_LISTING, message),
    };
    let now = SystemClock.now_ms();
    let log = app.coordinator.log();
    match log
        .pending(
            query.after.as_ref(),
            query.overdue.then_some(now),
            query.limit,
        )
        .await
    {
        Ok(page) => api::listing(&page.records, page.next.map(|c| c.token())),
        Err(e) => {
            error!(error = %e, "listing pending transactions failed");
            api::error(
                codes::UNAVAILABLE,
                format!("the transaction store could not be read ({e}); retry"),
            )
        }
    }
}

struct ListingQuery {
    after: Option<PendingCursor>,
    overdue: bool,
    limit: usize,
}

/// The listing's query parameters, or what is wrong with them.
/// A listing's `limit`: a page of [`DEFAULT_PAGE`] unless it asks for 1 to [`MAX_PAGE`]. The
/// pending listing and the operator's share it.
pub(crate) fn page_limit(params: &aws_lambda_events::query_map::QueryMap) -> Result<usize, String> {
    match params.first("limit") {
        None => Ok(DEFAULT_PAGE),
        Some(n) => match n.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
            _ => Err(format!(
                "limit={n:?}: use a whole number from 1 to {MAX_PAGE}"
            )),
        },
    }
}

fn listing_query(req: &ApiGatewayProxyRequest) -> Result<ListingQuery, String> {
    let params = &req.query_string_parameters;
    if let Some((name, _)) = params
        .iter()
        .find(|(k, _)| !["status", "overdue", "limit", "next"].contains(k))
    {
        return Err(format!(
            "unknown query parameter {name:?}: use status=pending, overdue, limit and next"
        ));
    }
    match params.first("status") {
        Some("pending") => {}
        Some(other) => {
            return Err(format!(
                "status={other:?} is not listed: only status=pending (every unfinished transaction) is"
            ));
        }
        None => {
            return Err(
                "status is missing: GET /transactions?status=pending lists unfinished transactions"
                    .into(),
            );
        }
    }
    let overdue = match params.first("overdue") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(format!("overdue={other:?}: use true or false")),
    };
    let limit = page_limit(params)?;
    let after = match params.first("next") {
        None => None,
        Some(token) => Some(PendingCursor::parse(token).ok_or_else(|| {
            format!(
                "next={token:?} is not a cursor: pass the \"next\" of the previous page as it is"
            )
        })?),
    };
    Ok(ListingQuery {
        after,
        overdue,
        limit,
    })
}

fn response(answer: Answer, allow: Option<&'static str>) -> ApiGatewayProxyResponse {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(methods) = allow {
        headers.insert(header::ALLOW, HeaderValue::from_static(methods));
    }
    let mut response = ApiGatewayProxyResponse::default();
    response.status_code = answer.status.into();
    response.headers = headers;
    response.body = Some(Body::Text(answer.body.to_string()));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use lambda_runtime::Context;
    use serde_json::json;
    use twopc_core::ports::{Clock, TxLog};
    use twopc_function::var;
    use twopc_runtime::Clients;
    use twopc_runtime::config::Settings;

    const POST: &str = include_str!("../../../events/coordinator-post-transaction.json");
    const GET: &str = include_str!("../../../events/coordinator-get-transaction.json");
    const BIG: &str = "12345678901234567890123456789012345678";

    fn event(text: &str) -> ApiGatewayProxyRequest {
        serde_json::from_str(text).expect("an API Gateway REST event")
    }

    /// The sample POST with another body and key; the key's header is spelled in capitals, as
    /// a client may (header names are case-insensitive).
    fn post(body: &str, key: Option<&str>) -> ApiGatewayProxyRequest {
        let mut v: Value = serde_json::from_str(POST).expect("json");
        v["body"] = json!(body);
        for headers in ["headers", "multiValueHeaders"] {
            if let Some(h) = v[headers].as_object_mut() {
                h.remove("Idempotency-Key");
            }
        }
        if let Some(k) = key {
            v["headers"]["IDEMPOTENCY-KEY"] = json!(k);
            v["multiValueHeaders"]["IDEMPOTENCY-KEY"] = json!([k]);
        }
        event(&v.to_string())
    }

    fn get(id: &str) -> ApiGatewayProxyRequest {
        let mut e = event(GET);
        e.path = Some(format!("/transactions/{id}"));
        e.path_parameters = [("id".to_owned(), id.to_owned())].into();
        e
    }

    async fn app_for(env: BTreeMap<&'static str, String>) -> App {
        let settings =
            CoordinatorSettings::from_lookup(|name| env.get(name).cloned()).expect("config");
        let clients = Clients::load(&settings).await;
        App::new(&settings, &clients, Metrics::in_memory("coordinator"))
    }

    /// An app whose stores are unreachable: only answers that write nothing can succeed.
    async fn offline_app() -> App {
        app_for(
            [
                (var::TRANSACTIONS_TABLE, "tx".to_owned()),
                (
                    var::SERVICES,
                    r#"{"accounts":{"target":{"transport":"direct","table":"accounts"},"key":{"hash":{"name":"id","type":"S"}}}}"#.to_owned(),
                ),
                (var::DYNAMODB_ENDPOINT, "http://127.0.0.1:9".to_owned()),
            ]
            .into(),
        )
        .await
    }

    async fn call(app: &App, req: ApiGatewayProxyRequest) -> (i64, Value, HeaderMap) {
        let r = handle(app, LambdaEvent::new(req, Context::default()))
            .await
            .unwrap_or_else(|never| match never {});
        let body = match r.body {
            Some(Body::Text(t)) => serde_json::from_str(&t).expect("a JSON body"),
            other => panic!("expected a text body, got {other:?}"),
        };
        (r.status_code, body, r.headers)
    }

    #[test]
    fn the_sample_events_round_trip_through_the_api_gateway_types() {
        for text in [POST, GET] {
            let e = event(text);
            let again: ApiGatewayProxyRequest =
                serde_json::from_value(serde_json::to_value(&e).expect("serialize"))
                    .expect("deserialize");
            assert_eq!(again.path, e.path);
            assert_eq!(again.http_method, e.http_method);
            assert_eq!(again.body, e.body);
            assert_eq!(again.headers, e.headers);
            assert_eq!(again.path_parameters, e.path_parameters);
            assert_eq!(
                again.request_context.request_time_epoch,
                e.request_context.request_time_epoch
            );
        }
        let post = event(POST);
        assert_eq!(post.http_method, Method::POST);
        assert_eq!(
            post.headers
                .get("idempotency-key")
                .map(HeaderValue::as_bytes),
            Some(&b"order-42"[..])
        );
        assert!(post.request_context.request_time_epoch > 0);
        let get = event(GET);
        assert_eq!(
            get.path_parameters.get("id").map(String::as_str),
            Some("0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69")
        );
    }

    #[test]
    fn numbers_anywhere_in_an_event_do_not_break_its_parsing() {
        // serde_json's arbitrary_precision breaks serde's buffered (untagged/flattened) types
        // on numbers; this event carries them in the request context and the authorizer.
        let mut v: Value = serde_json::from_str(POST).expect("json");
        v["requestContext"]["authorizer"] = json!({"principalId": "me", "clientId": 1, "n": 1.5});
        v["requestContext"]["requestTimeEpoch"] = json!(1_700_000_000_123u64);
        let e: ApiGatewayProxyRequest =
            serde_json::from_str(&v.to_string()).expect("parses under arbitrary_precision");
        assert_eq!(e.request_context.request_time_epoch, 1_700_000_000_123);
    }

    #[tokio::test]
    async fn unknown_routes_and_wrong_methods_are_refused() {
        let app = offline_app().await;
        let mut e = get("x");
        e.path = Some("/nope".into());
        let (status, body, _) = call(&app, e).await;
        assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));

        let mut e = get("x");
        e.http_method = Method::DELETE;
        let (status, body, headers) = call(&app, e).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (405, Some("method_not_allowed"))
        );
        assert_eq!(
            headers.get(header::ALLOW).map(HeaderValue::as_bytes),
            Some(&b"GET"[..])
        );

        let mut e = post("{}", None);
        e.http_method = Method::PUT;
        let (status, _, headers) = call(&app, e).await;
        assert_eq!(status, 405);
        assert_eq!(
            headers.get(header::ALLOW).map(HeaderValue::as_bytes),
            Some(&b"GET, POST"[..])
        );
    }

    #[tokio::test]
    async fn bad_bodies_ids_and_keys_are_refused_before_anything_is_written() {
        let app = offline_app().await;
        let cases = [
            (post("{\"participants\": [", None), 400, "invalid_json"),
            (post("", None), 400, "invalid_json"),
            (
                post(&format!("{{\"pad\": \"{}\"}}", "x".repeat(70_000)), None),
                413,
                "request_too_large",
            ),
            (post("[]", None), 400, "invalid_request"),
            (
                post(
                    r#"{"participants": [{"participant": "nope", "key": {"id": "a"}, "op": {"delete": true}}]}"#,
                    None,
                ),
                400,
                "unknown_participant",
            ),
            (
                post(r#"{"participants": []}"#, Some("has space")),
                400,
                "invalid_idempotency_key",
            ),
            (get("not-a-uuid"), 400, "invalid_tx_id"),
        ];
        for (req, want_status, want_code) in cases {
            let (status, body, headers) = call(&app, req).await;
            assert_eq!(
                (status, body["code"].as_str()),
                (want_status, Some(want_code)),
                "{body}"
            );
            assert!(
                body["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{body}"
            );
            assert_eq!(
                headers.get(header::CONTENT_TYPE).map(HeaderValue::as_bytes),
                Some(&b"application/json"[..])
            );
        }
    }

    #[tokio::test]
    async fn an_unreachable_store_is_a_503_that_says_to_retry() {
        let app = offline_app().await;
        let body = r#"{"participants": [{"participant": "accounts", "key": {"id": "a"}, "op": {"add": {"balance": 1}}}]}"#;
        let (status, body, _) = call(&app, post(body, Some("k-503"))).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (503, Some("unavailable")),
            "{body}"
        );
        assert_eq!(body["txId"], TxId::for_idempotency_key("k-503").to_string());
        let (status, body, _) = call(&app, get("0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69")).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (503, Some("unavailable")),
            "{body}"
        );
    }

    // ---------------------------------------------------------------- against DynamoDB Local

    /// The app staging every transaction: what the extension does after an answer.
    async fn live_app(w: &twopc_tests::World) -> App {
        live_app_in(w, "staged").await
    }

    /// The app committing in `mode` (`TWOPC_COMMIT_MODE`).
    async fn live_app_in(w: &twopc_tests::World, mode: &str) -> App {
        let services = json!({
            "accounts": {"target": {"transport": "direct", "table": w.accounts}, "key": {"hash": {"name": "id", "type": "S"}}},
            "wallets": {"target": {"transport": "direct", "table": w.wallets}, "key": {"hash": {"name": "id", "type": "S"}}},
        });
        app_for(
            [
                (var::TRANSACTIONS_TABLE, w.tx_table.clone()),
                (var::SERVICES, services.to_string()),
                (var::DYNAMODB_ENDPOINT, twopc_tests::endpoint()),
                (var::COMMIT_MODE, mode.to_owned()),
            ]
            .into(),
        )
        .await
    }

    /// The app with its work after an answer handed over as to the Lambda extension, and the
    /// extension's end of it: [`after_answer`] runs what one invocation left.
    fn with_extension(
        app: App,
    ) -> (
        App,
        tokio::sync::mpsc::UnboundedReceiver<crate::after::HandOver>,
    ) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        (app.with_after_answer(AfterAnswer::Lambda(sender)), receiver)
    }

    /// Runs what the last invocation handed over (the extension's job); true if there was work.
    async fn after_answer(
        handed: &mut tokio::sync::mpsc::UnboundedReceiver<crate::after::HandOver>,
    ) -> bool {
        match handed.recv().await.expect("one message per invocation").1 {
            Some(work) => {
                work.await;
                true
            }
            None => false,
        }
    }

    #[tokio::test]
    async fn by_default_the_sample_post_is_committed_natively_and_answered_applied() {
        let w = twopc_tests::World::new().await;
        w.seed("accounts", "alice", json!({"balance": 100})).await;
        w.seed("wallets", "bob", json!({"balance": 0})).await;
        let (app, mut handed) = with_extension(live_app_in(&w, "auto").await);
        let (status, body, _) = call(&app, event(POST)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            (
                body["outcome"].as_str(),
                body["applied"].as_bool(),
                body["status"].as_str()
            ),
            (Some("committed"), Some(true), Some("COMMITTED")),
            "{body}"
        );
        assert!(
            !after_answer(&mut handed).await,
            "nothing left after the answer"
        );
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some("0")
        );
        assert_eq!(
            w.attr("wallets", "bob", "balance").await.as_deref(),
            Some("100")
        );
        // A replay answers the same, applying nothing again.
        let (status, again, _) = call(&app, event(POST)).await;
        assert_eq!((status, &again["txId"]), (200, &body["txId"]));
        assert_eq!(again["status"], "COMMITTED");
        assert_eq!(
            w.attr("wallets", "bob", "balance").await.as_deref(),
            Some("100")
        );
    }

    #[tokio::test]
    async fn the_sample_post_commits_and_the_record_reads_back() {
        let w = twopc_tests::World::new().await;
        w.seed("accounts", "alice", json!({"balance": 100})).await;
        w.seed("wallets", "bob", json!({"balance": 0})).await;
        let (app, mut handed) = with_extension(live_app(&w).await);

        // Staged: answered once decided, before it is applied.
        let (status, body, _) = call(&app, event(POST)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            (body["outcome"].as_str(), body["applied"].as_bool()),
            (Some("committed"), Some(false)),
            "{body}"
        );
        assert_eq!(
            body["txId"],
            TxId::for_idempotency_key("order-42").to_string()
        );
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some("100"),
            "not applied before the work after the answer"
        );
        assert!(
            after_answer(&mut handed).await,
            "the finish was handed over"
        );
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some("0")
        );
        assert_eq!(
            w.attr("wallets", "bob", "balance").await.as_deref(),
            Some("100")
        );
        let lines = app.metrics.lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["Committed"], 1);

        // The same key and body again: the same transaction, nothing applied twice.
        let (status, again, _) = call(&app, event(POST)).await;
        assert_eq!((status, &again["txId"]), (200, &body["txId"]));
        assert!(!after_answer(&mut handed).await, "a replay leaves nothing");
        assert_eq!(
            w.attr("wallets", "bob", "balance").await.as_deref(),
            Some("100")
        );

        let id = body["txId"].as_str().expect("txId");
        let (status, record, _) = call(&app, get(id)).await;
        assert_eq!(status, 200, "{record}");
        assert_eq!(record["status"], "COMMITTED");
        assert_eq!(record["participants"][0]["vote"], "yes");

        let (status, body, _) = call(&app, get(&TxId::random().to_string())).await;
        assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
    }

    #[tokio::test]
    async fn a_status_read_helps_a_staging_record_its_stager_left_to_commit() {
        let w = twopc_tests::World::new().await;
        w.seed("accounts", "alice", json!({"balance": 100})).await;
        w.seed("wallets", "bob", json!({"balance": 0})).await;
        let app = live_app(&w).await;
        // A staged transaction whose stager answered and died two seconds ago: its record is
        // STAGING and both participants hold it.
        let body = twopc_tests::transfer("alice", "bob", 10);
        let request = app.coordinator.validate(&body).expect("valid");
        let began = twopc_core::ports::SystemClock.now_ms() - 2_000;
        let mut record = request.begin(TxId::random(), None, "gone".into(), began);
        record.status = twopc_core::status::TxStatus::Staging;
        w.log.create(&record).await.expect("stage");
        for (service, p) in ["accounts", "wallets"]
            .into_iter()
            .zip(&record.participants)
        {
            let req = twopc_core::message::PrepareRequest {
                tx_id: record.tx_id.clone(),
                deadline: record.deadline,
                began,
                key: p.key.clone(),
                op: p.op.clone(),
                coordinator: "gone".into(),
                payload: None,
                hot_until: None,
            };
            assert!(w.prepare(service, &req).await.vote.is_yes());
        }
        // A status read finds every participant holding it: it commits and finishes it.
        let (status, read, _) = call(&app, get(record.tx_id.as_str())).await;
        assert_eq!(status, 200, "{read}");
        assert_eq!(
            (
                read["status"].as_str(),
                read["outcome"].as_str(),
                read["applied"].as_bool()
            ),
            (Some("COMMITTED"), Some("committed"), Some(true)),
            "{read}"
        );
        assert_eq!(
            w.attr("wallets", "bob", "balance").await.as_deref(),
            Some("10")
        );
    }

    #[tokio::test]
    async fn a_38_digit_amount_in_the_body_survives_to_the_record_and_the_items() {
        let w = twopc_tests::World::new().await;
        w.seed("accounts", "alice", json!({"balance": 0})).await;
        w.seed("wallets", "bob", json!({"balance": 0.1})).await;
        let (app, mut handed) = with_extension(live_app(&w).await);
        let body = format!(
            r#"{{"participants": [
                {{"participant": "accounts", "key": {{"id": "alice"}}, "op": {{"add": {{"balance": {BIG}}}}}}},
                {{"participant": "wallets", "key": {{"id": "bob"}}, "op": {{"add": {{"balance": 0.2}}}}}}]}}"#
        );
        let (status, answer, _) = call(&app, post(&body, Some("Big-Amount-1"))).await;
        assert_eq!(status, 200, "{answer}");
        let tx = TxId::parse(answer["txId"].as_str().expect("txId")).expect("id");
        assert_eq!(tx, TxId::for_idempotency_key("Big-Amount-1"));
        assert!(after_answer(&mut handed).await, "applied after the answer");

        let record = w.log.get(&tx).await.expect("read").expect("a record");
        let add = &record.participants[0].op.add["balance"];
        assert_eq!(add.as_str(), BIG, "the record keeps every digit");
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some(BIG)
        );
        assert_eq!(
            w.attr("wallets", "bob", "balance").await.as_deref(),
            Some("0.3")
        );
    }

    #[tokio::test]
    async fn a_refused_transfer_answers_409_with_the_reason_and_a_reused_key_409_too() {
        let w = twopc_tests::World::new().await;
        w.seed("accounts", "alice", json!({"balance": 10})).await;
        w.seed("wallets", "bob", json!({"balance": 0})).await;
        let (app, mut handed) = with_extension(live_app(&w).await);

        // Staged: answered once the abort is recorded, released after the answer.
        let (status, body, _) = call(&app, event(POST)).await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(
            (body["outcome"].as_str(), body["status"].as_str()),
            (Some("aborted"), Some("ABORTING")),
            "{body}"
        );
        assert_eq!(body["code"], "condition");
        assert!(after_answer(&mut handed).await);
        let id = body["txId"].as_str().expect("txId");
        let (_, record, _) = call(&app, get(id)).await;
        assert_eq!(record["status"], "ABORTED", "{record}");
        after_answer(&mut handed).await;
        assert_eq!(app.metrics.lines()[0]["Reason"], "condition");
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some("10")
        );

        let other = r#"{"participants": [{"participant": "wallets", "key": {"id": "bob"}, "op": {"add": {"balance": 1}}}]}"#;
        let (status, body, _) = call(&app, post(other, Some("order-42"))).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (409, Some("idempotency_key_reused")),
            "{body}"
        );
    }

    #[tokio::test]
    async fn a_payload_that_is_not_an_api_request_fails_at_once_and_releases_the_extension() {
        let (app, mut handed) = with_extension(offline_app().await);
        let mut ctx = Context::default();
        ctx.request_id = "console-test".to_owned();
        let err = invoke(&app, LambdaEvent::new(json!({"key1": "value1"}), ctx))
            .await
            .expect_err("not an API Gateway request");
        assert!(err.to_string().contains("API Gateway"), "{err}");
        let (request_id, work) = handed.try_recv().expect("the hand-over was sent");
        assert_eq!(request_id, "console-test");
        assert!(work.is_none());
    }

    #[tokio::test]
    async fn an_api_request_given_as_json_is_handled_and_handed_over_once() {
        let (app, mut handed) = with_extension(offline_app().await);
        let mut ctx = Context::default();
        ctx.request_id = "r-404".to_owned();
        let payload = serde_json::to_value(get("not-a-uuid")).expect("JSON");
        let r = invoke(&app, LambdaEvent::new(payload, ctx))
            .await
            .expect("an API Gateway answer");
        assert_eq!(r.status_code, 400);
        assert_eq!(handed.try_recv().expect("the hand-over").0, "r-404");
        assert!(handed.try_recv().is_err(), "exactly one hand-over");
    }
}
