//! The operator API (`/operator/...`, docs/api.md "The operator API"): list transactions by
//! status and time, count them, one transaction's whole story, one item's holds, and the two
//! actions (recover now, abort) run by the sweeper's own functions
//! (`Coordinator::act`). Authorised apart from submitting: IAM on the `/operator` routes in AWS
//! (the caller's ARN is who asked), an admin token locally (the local gateway checks it and
//! names the caller `token:<sub>`); a request without a caller is refused. Every action is
//! audited: a log line, a metric, and a note on the record the stream turns into a lake row.

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::http::Method;
use serde_json::Value;
use tracing::{error, info};
use twopc_core::api::{self, Answer, codes, operator as answers};
use twopc_core::coordinator::Acted;
use twopc_core::ids::TxId;
use twopc_core::item::Key;
use twopc_core::operator::{ListCursor, ListQuery, OperatorAction};
use twopc_core::ports::{Clock, OperatorLog, ParticipantStore, PortError, SystemClock, TxLog};
use twopc_core::record::Target;
use twopc_core::status::TxStatus;

use crate::handler::{App, page_limit};

/// The counts' default window: the last day.
const DAY_MS: u64 = 86_400_000;

/// Answers a request under `/operator` (`rest`: the segments after it), with the methods
/// allowed when the method is not.
pub async fn route(
    app: &App,
    req: &ApiGatewayProxyRequest,
    rest: &[&str],
) -> (Answer, Option<&'static str>) {
    let Some(by) = caller(req) else {
        return (
            api::error(
                codes::OPERATOR_FORBIDDEN,
                "the operator API needs an operator's identity: sign with credentials allowed execute-api:Invoke on /operator/* (locally, an admin token)",
            ),
            None,
        );
    };
    let m = &req.http_method;
    match (rest, m) {
        (["transactions"], &Method::GET) => (list(app, req).await, None),
        (["counts"], &Method::GET) => (counts(app, req).await, None),
        (["transactions", id], &Method::GET) => (story(app, id).await, None),
        (["transactions", id, action], &Method::POST) => match parse_action(action) {
            Some(action) => (act(app, id, action, &by).await, None),
            None => (no_route(req), None),
        },
        (["items", participant], &Method::GET) => (item(app, req, participant).await, None),
        (["transactions" | "counts"] | ["transactions", _] | ["items", _], _) => {
            (not_allowed(m, "GET"), Some("GET"))
        }
        (["transactions", _, "recover" | "abort"], _) => (not_allowed(m, "POST"), Some("POST")),
        _ => (no_route(req), None),
    }
}

/// Who asked: the IAM caller API Gateway names (or the local gateway's `token:<sub>`).
fn caller(req: &ApiGatewayProxyRequest) -> Option<String> {
    let id = &req.request_context.identity;
    id.user_arn
        .clone()
        .or_else(|| id.caller.clone())
        .filter(|c| !c.is_empty())
}

fn parse_action(s: &str) -> Option<OperatorAction> {
    match s {
        "recover" => Some(OperatorAction::Recover),
        "abort" => Some(OperatorAction::Abort),
        _ => None,
    }
}

fn no_route(req: &ApiGatewayProxyRequest) -> Answer {
    api::error(
        codes::NOT_FOUND,
        format!(
            "no operator route {:?}: use GET /operator/transactions, GET /operator/counts, GET /operator/transactions/{{txId}}, POST /operator/transactions/{{txId}}/recover|abort or GET /operator/items/{{service}}?key=...",
            req.path.as_deref().unwrap_or_default()
        ),
    )
}

fn not_allowed(method: &Method, allowed: &str) -> Answer {
    api::error(
        codes::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed here; use {allowed}"),
    )
}

fn unavailable(doing: &str, e: &PortError) -> Answer {
    error!(error = %e, "{doing} failed");
    api::error(
        codes::UNAVAILABLE,
        format!("{doing}: the store could not be reached ({e}); retry"),
    )
}

fn bad_query(message: String) -> Answer {
    api::error(codes::INVALID_OPERATOR_QUERY, message)
}

async fn list(app: &App, req: &ApiGatewayProxyRequest) -> Answer {
    let now = SystemClock.now_ms();
    let q = match list_query(req, now) {
        Ok(q) => q,
        Err(message) => return bad_query(message),
    };
    match app.coordinator.log().list(&q).await {
        Ok(page) => answers::listing(&page, now),
        Err(e) => unavailable("listing transactions", &e),
    }
}

async fn counts(app: &App, req: &ApiGatewayProxyRequest) -> Answer {
    let now = SystemClock.now_ms();
    let params = &req.query_string_parameters;
    if let Some((name, _)) = params.iter().find(|(k, _)| *k != "since") {
        return bad_query(format!("unknown query parameter {name:?}: use since"));
    }
    let since = match params.first("since").map(|s| ms(s, "since")).transpose() {
        Ok(s) => s.unwrap_or(now.saturating_sub(DAY_MS)),
        Err(message) => return bad_query(message),
    };
    match app.coordinator.log().counts(since, now).await {
        Ok(c) => answers::counts(&c),
        Err(e) => unavailable("counting transactions", &e),
    }
}

async fn story(app: &App, id: &str) -> Answer {
    let tx = match TxId::parse(id) {
        Ok(tx) => tx,
        Err(e) => return api::error(codes::INVALID_TX_ID, e.to_string()),
    };
    let record = match app.coordinator.log().get(&tx).await {
        Ok(Some(r)) => r,
        Ok(None) => return api::error(codes::NOT_FOUND, format!("no transaction {tx}")),
        Err(e) => return unavailable("reading the transaction", &e),
    };
    let holds = app.coordinator.holds(&record, &app.items).await;
    answers::story(&record, &holds, SystemClock.now_ms())
}

async fn act(app: &App, id: &str, action: OperatorAction, by: &str) -> Answer {
    let tx = match TxId::parse(id) {
        Ok(tx) => tx,
        Err(e) => return api::error(codes::INVALID_TX_ID, e.to_string()),
    };
    let (acted, note) = match Box::pin(app.coordinator.act(&tx, action, by)).await {
        Ok(done) => done,
        Err(e) => {
            app.metrics
                .operator_action(action.as_str(), codes::UNAVAILABLE.name);
            return unavailable(&format!("{} of {tx}", action.as_str()), &e);
        }
    };
    let now = SystemClock.now_ms();
    let result = note.as_ref().map_or(codes::NOT_FOUND.name, |n| &n.result);
    app.metrics.operator_action(action.as_str(), result);
    match acted {
        Acted::NotFound => {
            info!(tx_id = %tx, action = action.as_str(), by, result, "operator action");
            api::error(codes::NOT_FOUND, format!("no transaction {tx}"))
        }
        Acted::Refused { code, record } => {
            info!(tx_id = %tx, action = action.as_str(), by, result, status = %record.status, "operator action");
            answers::refused(action, code, &record, now)
        }
        Acted::Ran { before, record } => {
            info!(tx_id = %tx, action = action.as_str(), by, result, before = %before, status = %record.status, "operator action");
            answers::acted(action, before, &record, now)
        }
    }
}

async fn item(app: &App, req: &ApiGatewayProxyRequest, participant: &str) -> Answer {
    let params = &req.query_string_parameters;
    if let Some((name, _)) = params.iter().find(|(k, _)| *k != "key") {
        return bad_query(format!("unknown query parameter {name:?}: use key"));
    }
    let Some(service) = app.coordinator.config().services.get(participant) else {
        return api::error(
            codes::UNKNOWN_PARTICIPANT,
            format!("no service {participant:?} is configured"),
        );
    };
    let Target::Direct { table } = &service.target else {
        return api::error(
            codes::ITEM_NOT_READABLE,
            format!("{participant}'s items are behind its own function or URL: ask it"),
        );
    };
    let key = match params.first("key").map(json_key).transpose() {
        Ok(Some(k)) => k,
        Ok(None) => return bad_query("key is missing: key={\"id\":\"alice\"}".into()),
        Err(message) => return bad_query(message),
    };
    match app.items.read(table, &key).await {
        Ok(state) => answers::item(participant, &key, state.as_ref()),
        Err(e) => unavailable("reading the item", &e),
    }
}

/// An epoch-ms parameter.
fn ms(s: &str, name: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .map_err(|_| format!("{name}={s:?}: use epoch milliseconds (a whole number)"))
}

/// An item's key as a JSON object.
fn json_key(s: &str) -> Result<Key, String> {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) if !m.is_empty() => Ok(m.into_iter().collect()),
        _ => Err(format!(
            "key={s:?} is not a key: a JSON object of the key's attributes, key={{\"id\":\"alice\"}}"
        )),
    }
}

const LIST_PARAMS: [&str; 8] = [
    "status",
    "overdue",
    "since",
    "until",
    "participant",
    "key",
    "limit",
    "next",
];

/// The listing's query, or what is wrong with it.
fn list_query(req: &ApiGatewayProxyRequest, now: u64) -> Result<ListQuery, String> {
    let params = &req.query_string_parameters;
    if let Some((name, _)) = params.iter().find(|(k, _)| !LIST_PARAMS.contains(k)) {
        return Err(format!(
            "unknown query parameter {name:?}: use {}",
            LIST_PARAMS.join(", ")
        ));
    }
    let status = match params.first("status") {
        None | Some("pending") => None,
        Some(s) => Some(TxStatus::parse(s).ok_or_else(|| {
            format!("status={s:?}: use pending, PREPARING, STAGING, COMMITTING, ABORTING, COMMITTED or ABORTED")
        })?),
    };
    let ended = status.is_some_and(TxStatus::is_terminal);
    let overdue = match params.first("overdue") {
        None | Some("false") => false,
        Some("true") if !ended => true,
        Some("true") => return Err("overdue applies to unfinished transactions only".into()),
        Some(other) => return Err(format!("overdue={other:?}: use true or false")),
    };
    let since = params.first("since").map(|s| ms(s, "since")).transpose()?;
    let until = params.first("until").map(|s| ms(s, "until")).transpose()?;
    if (since.is_some() || until.is_some()) && !ended {
        return Err(
            "since and until apply to ended transactions: status=COMMITTED or ABORTED".into(),
        );
    }
    let participant = match params.first("participant") {
        Some("") => return Err("participant is empty: name a service, participant=accounts".into()),
        p => p.map(str::to_owned),
    };
    let key = params.first("key").map(json_key).transpose()?;
    if key.is_some() && participant.is_none() {
        return Err("key needs participant: the service whose item it is".into());
    }
    let limit = page_limit(params)?;
    let after = match params.first("next") {
        None => None,
        Some(t) => Some(ListCursor::parse(t).ok_or_else(|| {
            format!("next={t:?} is not a cursor: pass the \"next\" of the previous page as it is")
        })?),
    };
    Ok(ListQuery {
        status,
        overdue_at: overdue.then_some(now),
        since,
        until,
        participant,
        key,
        after,
        limit,
    })
}
