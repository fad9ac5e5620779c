//! `twopc serve`: the whole system on one machine, against DynamoDB Local.
//!
//! - the coordinator's HTTP API, answered by the coordinator Lambda's own handler: each request
//!   is turned into the API Gateway proxy event Lambda would receive;
//! - participants through the `direct` transport (the participant logic in-process);
//! - the sweeper on a timer;
//! - DynamoDB Local started and stopped by this process (persisted under the data folder), or
//!   an existing endpoint.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::encodings::Body as ApiBody;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use coordinator::handler::App;
use percent_encoding::percent_decode_str;
use serde_json::{Value, json};
use tracing::warn;
use twopc_core::ports::{ParticipantStore, SystemClock};
use twopc_core::request::KeyType;
use twopc_core::sweeper::{LockTable, SweepConfig, Sweeper};
use twopc_dynamo::tables::ensure_table;
use twopc_runtime::config::{
    Config, DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_METRICS_NAMESPACE, Role,
};
use twopc_runtime::telemetry::Metrics;
use twopc_runtime::{Clients, LiveParticipant, LiveTransport};

use twopc_dynamo::connections::DynamoConnections;
use twopc_fanout::detect::{TableRole, Tables};
use twopc_fanout::poll::Poller;
use twopc_fanout::processor::Processor;
use twopc_fanout::sinks::FileLake;

use crate::demo::Demo;
use crate::dynamodb_local::{DynamoDbLocal, alive};
use crate::gateway::Gateway;
use crate::refusals::{json_refusals, refusal};

/// Options of `twopc serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1", env = "TWOPC_HOST")]
    pub host: String,
    /// Port of the HTTP API.
    #[arg(long, default_value_t = 3000, env = "TWOPC_PORT")]
    pub port: u16,
    /// Use this DynamoDB (Local) endpoint instead of starting DynamoDB Local.
    #[arg(long, env = "TWOPC_DYNAMODB_ENDPOINT")]
    pub dynamodb_endpoint: Option<String>,
    /// Folder for the data (DynamoDB Local's files) and the run's state files.
    #[arg(long, default_value = ".twopc", env = "TWOPC_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Keep DynamoDB Local's data in memory (lost at exit).
    #[arg(long)]
    pub in_memory: bool,
    /// How often the sweeper runs, in milliseconds.
    #[arg(long, default_value_t = 5_000, env = "TWOPC_SWEEP_INTERVAL_MS")]
    pub sweep_interval_ms: u64,
    /// Prefix of the table names.
    #[arg(long, default_value = "twopc-", env = "TWOPC_TABLE_PREFIX")]
    pub table_prefix: String,
    /// Do not write the demo's seed items.
    #[arg(long)]
    pub no_seed: bool,
    /// Folder of the data lake (`dt=YYYY-MM-DD/*.jsonl`).
    #[arg(long, default_value = "data-lake", env = "TWOPC_LAKE_DIR")]
    pub lake_dir: PathBuf,
    /// Require `?token=...` on WebSocket connections.
    #[arg(long, env = "TWOPC_WS_TOKEN")]
    pub ws_token: Option<String>,
    /// How often the streams are polled when idle, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub stream_poll_ms: u64,
}

type LiveSweeper =
    Sweeper<twopc_dynamo::DynamoTxLog, LiveTransport, SystemClock, twopc_dynamo::DynamoItems>;

struct Stack {
    gateway: Arc<Gateway>,
    app: App,
    client: aws_sdk_dynamodb::Client,
    sweeper: LiveSweeper,
    participant: LiveParticipant,
    demo: Demo,
    config: Config,
}

/// Runs the local stack until Ctrl-C (or SIGTERM).
pub async fn serve(args: ServeArgs) -> Result<(), String> {
    std::fs::create_dir_all(&args.data_dir)
        .map_err(|e| format!("cannot create {}: {e}", args.data_dir.display()))?;
    let pid_file = args.data_dir.join("serve.pid");
    if let Some(pid) = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        && pid != std::process::id()
        && alive(pid)
    {
        let url = std::fs::read_to_string(args.data_dir.join("serve.url")).unwrap_or_default();
        return Err(format!(
            "twopc serve is already running with data folder {} (pid {pid}{}); stop it (Ctrl-C in its terminal, or `kill {pid}`), or pass another --data-dir",
            args.data_dir.display(),
            if url.is_empty() {
                String::new()
            } else {
                format!(", {}", url.trim())
            }
        ));
    }
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .map_err(|e| format!("--host/--port: {e}"))?;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => format!("port {} is already in use (another twopc serve?): stop that process or pass --port", args.port),
        _ => format!("cannot listen on {addr}: {e}"),
    })?;
    let url = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    std::fs::write(&pid_file, std::process::id().to_string()).map_err(|e| e.to_string())?;
    std::fs::write(args.data_dir.join("serve.url"), &url).map_err(|e| e.to_string())?;

    let result = run(&args, listener, &url).await;
    let _ = std::fs::remove_file(&pid_file);
    let _ = std::fs::remove_file(args.data_dir.join("serve.url"));
    result
}

async fn run(args: &ServeArgs, listener: tokio::net::TcpListener, url: &str) -> Result<(), String> {
    let (endpoint, local) = match &args.dynamodb_endpoint {
        Some(endpoint) => {
            eprintln!("- using DynamoDB at {endpoint}");
            (endpoint.clone(), None)
        }
        None => {
            let storage = if args.in_memory {
                "in memory".to_owned()
            } else {
                format!("data in {}", args.data_dir.join("dynamodb").display())
            };
            eprintln!("- starting DynamoDB Local ({storage})");
            let db_dir = (!args.in_memory).then(|| args.data_dir.join("dynamodb"));
            let local = DynamoDbLocal::start(db_dir.as_deref(), &args.data_dir).await?;
            (local.url.clone(), Some(local))
        }
    };
    let outcome = run_with(args, listener, url, &endpoint).await;
    if let Some(local) = local {
        eprintln!("- stopping DynamoDB Local");
        local.stop().await;
    }
    outcome
}

async fn run_with(
    args: &ServeArgs,
    listener: tokio::net::TcpListener,
    url: &str,
    endpoint: &str,
) -> Result<(), String> {
    let demo = Demo {
        prefix: args.table_prefix.clone(),
    };
    let config = Config {
        role: Role::Coordinator,
        transactions_table: demo.transactions_table(),
        services: demo.services(),
        participant_table: None,
        lock_tables: demo
            .services()
            .into_iter()
            .map(|(name, s)| LockTable {
                table: demo.table(&name),
                key: s.key,
            })
            .collect(),
        sweep: SweepConfig::default(),
        dynamodb_endpoint: Some(endpoint.to_owned()),
        lambda_endpoint: None,
        coordinator_id: "twopc-serve".into(),
        call_timeout: DEFAULT_CALL_TIMEOUT,
        limits: Default::default(),
        max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        metrics_namespace: DEFAULT_METRICS_NAMESPACE.into(),
        participant: Default::default(),
    };
    let clients = Clients::load(&config).await;
    eprintln!("- creating tables {}* if missing", args.table_prefix);
    for spec in demo.tables() {
        ensure_table(&clients.dynamodb, &spec).await.map_err(|e| {
            format!(
                "creating table {}: {e} (is {endpoint} reachable?)",
                spec.name
            )
        })?;
    }
    if !args.no_seed {
        let written = demo.seed(&clients.dynamodb).await?;
        if written > 0 {
            eprintln!("- seeded {written} demo items");
        }
    }
    let gateway = Arc::new(Gateway::new(
        DynamoConnections::new(clients.dynamodb.clone(), demo.connections_table(), 7_200),
        args.ws_token.clone(),
    ));
    start_streams(args, &demo, &clients.dynamodb, endpoint, url).await?;
    let stack = Arc::new(Stack {
        gateway,
        client: clients.dynamodb.clone(),
        app: App {
            coordinator: twopc_runtime::coordinator(&config, &clients),
            metrics: Metrics::in_memory("twopc-serve"),
            max_body_bytes: config.max_body_bytes,
        },
        sweeper: Sweeper::new(
            twopc_runtime::coordinator(&config, &clients),
            twopc_runtime::participant(&config, &clients),
            SystemClock,
            config.lock_tables.clone(),
            config.sweep.clone(),
        ),
        participant: twopc_runtime::participant(&config, &clients),
        demo,
        config,
    });

    let sweeping = tokio::spawn(sweep_forever(
        stack.clone(),
        Duration::from_millis(args.sweep_interval_ms.max(10)),
    ));
    let router = Router::new()
        .route("/", get(live_page))
        .route("/ws", get(websocket))
        .route("/@connections/{id}", post(post_to_connection))
        .route("/local/sweep", post(sweep_once))
        .route("/local/items/{participant}", get(list_items))
        .route("/local/items/{participant}/{id}", get(get_item))
        .fallback(api_gateway)
        .with_state(stack.clone())
        .layer(DefaultBodyLimit::max(stack.config.max_body_bytes))
        .layer(middleware::from_fn_with_state(
            stack.config.max_body_bytes,
            json_refusals,
        ));
    banner(url, endpoint, args);
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown_signal())
        .await;
    sweeping.abort();
    eprintln!("- shutting down");
    served.map_err(|e| format!("HTTP server failed: {e}"))
}

/// Feeds the tables' streams to the stream processor, as Lambda's event source mappings would.
async fn start_streams(
    args: &ServeArgs,
    demo: &Demo,
    client: &aws_sdk_dynamodb::Client,
    endpoint: &str,
    url: &str,
) -> Result<(), String> {
    let mut tables: Tables = [(demo.transactions_table(), TableRole::Transactions)].into();
    for (name, service) in demo.services() {
        tables.insert(
            demo.table(&name),
            TableRole::Participant {
                participant: name.clone(),
                key: service.key,
            },
        );
    }
    let mut arns = vec![];
    for table in tables.keys() {
        arns.push(twopc_fanout::poll::stream_arn(client, table).await?);
    }
    let lake = FileLake::new(
        &args.lake_dir,
        format!("twopc-serve-{}", std::process::id()),
    );
    let subscriptions = DynamoConnections::new(client.clone(), demo.connections_table(), 7_200);
    let push = twopc_fanout::poll::local_push(url).await;
    let processor = Arc::new(Processor::new(tables, lake, subscriptions, push));
    let checkpoints = args.data_dir.join(format!(
        "streams-{}.json",
        args.table_prefix.trim_end_matches('-')
    ));
    let poller = Poller::new(
        twopc_fanout::poll::local_client(endpoint).await,
        arns,
        Some(checkpoints),
    );
    tokio::spawn(poller.run(
        Duration::from_millis(args.stream_poll_ms.max(10)),
        move |event| {
            let processor = processor.clone();
            async move { processor.handle(&event).await }
        },
    ));
    Ok(())
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
        Err(message) => {
            return refusal(StatusCode::BAD_REQUEST, "invalid_query_string", message);
        }
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

/// A request's query parameters, percent-decoded (`+` is a space); `Err` says which part does
/// not decode to UTF-8 text.
fn query_params(uri: &Uri) -> Result<HashMap<String, Vec<String>>, String> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_decode_str(&s)
            .decode_utf8()
            .map(|d| d.into_owned())
            .map_err(|_| {
                format!("the query parameter {s:?} does not decode to UTF-8 text: percent-encode UTF-8 bytes")
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

async fn post_to_connection(
    State(stack): State<Arc<Stack>>,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Response {
    stack.gateway.post(&id, body)
}

fn banner(url: &str, endpoint: &str, args: &ServeArgs) {
    println!(
        r#"
dynamo-2pc local stack
  HTTP API      {url}   (POST /transactions, GET /transactions/{{txId}})
  DynamoDB      {endpoint}   (tables {prefix}transactions, {prefix}accounts, {prefix}inventory)
  live page     {url}/   (WebSocket {ws}/ws)
  sweeper       every {sweep} ms
  data          {data}
  data lake     {lake}/dt=YYYY-MM-DD/*.jsonl

Try a transfer:
  curl -s -X POST {url}/transactions -H 'Idempotency-Key: demo-1' -d '{{"participants": [
    {{"participant": "accounts", "key": {{"id": "alice"}}, "op": {{"add": {{"balance": -10}}, "require": {{"balance": {{"gte": 10}}}}}}}},
    {{"participant": "accounts", "key": {{"id": "bob"}}, "op": {{"add": {{"balance": 10}}}}}}]}}'
or: twopc transfer --from alice --to bob --amount 10
Ctrl-C stops everything this process started.
"#,
        prefix = args.table_prefix,
        ws = url.replacen("http", "ws", 1),
        lake = args.lake_dir.display(),
        sweep = args.sweep_interval_ms,
        data = if args.in_memory && args.dynamodb_endpoint.is_none() {
            "in memory".to_owned()
        } else {
            args.data_dir.display().to_string()
        },
    );
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

async fn sweep_forever(stack: Arc<Stack>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // The sweeper logs what it did; only a failed pass is ours to report.
        if let Err(e) = stack.sweeper.run().await {
            warn!(error = %e, "sweeper pass failed");
        }
    }
}

/// Every other request goes to the coordinator Lambda's handler, as API Gateway would send it.
async fn api_gateway(
    State(stack): State<Arc<Stack>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = match query_params(&uri) {
        Ok(q) => q,
        Err(message) => {
            return refusal(StatusCode::BAD_REQUEST, "invalid_query_string", message);
        }
    };
    let mut req = ApiGatewayProxyRequest::default();
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
                    StatusCode::BAD_REQUEST,
                    "invalid_json",
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

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn sweep_once(State(stack): State<Arc<Stack>>) -> Response {
    match stack.sweeper.run().await {
        Ok(report) => json_response(
            StatusCode::OK,
            serde_json::to_value(report).unwrap_or(Value::Null),
        ),
        Err(e) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"code": "unavailable", "message": e.to_string()}),
        ),
    }
}

fn item_view(state: &twopc_core::model::ItemState) -> Option<Value> {
    let item = twopc_dynamo::items::business_view(state)?;
    Some(json!({"item": item, "lockedBy": state.lock.as_ref().map(|l| l.tx_id.to_string())}))
}

async fn list_items(
    State(stack): State<Arc<Stack>>,
    UrlPath(participant): UrlPath<String>,
) -> Response {
    if !stack.config.services.contains_key(&participant) {
        return unknown_participant(&stack, &participant);
    }
    let table = stack.demo.table(&participant);
    let client = &stack.client;
    let mut items = vec![];
    let mut start = None;
    loop {
        let page = match client
            .scan()
            .table_name(&table)
            .set_exclusive_start_key(start)
            .send()
            .await
        {
            Ok(p) => p,
            Err(e) => {
                return json_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    json!({"code": "unavailable", "message": twopc_dynamo::error::classify("scan", e).to_string()}),
                );
            }
        };
        for raw in page.items() {
            if let Some(v) = twopc_dynamo::items::item_state(raw)
                .ok()
                .as_ref()
                .and_then(item_view)
            {
                items.push(v);
            }
        }
        start = page.last_evaluated_key().cloned();
        if start.is_none() {
            break;
        }
    }
    let key_name = stack
        .config
        .services
        .get(&participant)
        .map(|s| s.key.hash.name.clone())
        .unwrap_or_default();
    items.sort_by_key(|v| v["item"].get(&key_name).map(Value::to_string));
    json_response(
        StatusCode::OK,
        json!({"participant": participant, "items": items}),
    )
}

async fn get_item(
    State(stack): State<Arc<Stack>>,
    UrlPath((participant, id)): UrlPath<(String, String)>,
) -> Response {
    let Some(service) = stack.config.services.get(&participant) else {
        return unknown_participant(&stack, &participant);
    };
    let value = match service.key.hash.kind {
        KeyType::S => Value::String(id.clone()),
        KeyType::N => match id.parse::<serde_json::Number>() {
            Ok(n) => Value::Number(n),
            Err(_) => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    json!({"code": "invalid_key", "message": format!("{participant} is keyed by a number; {id:?} is not one")}),
                );
            }
        },
    };
    let key = [(service.key.hash.name.clone(), value)].into();
    match stack
        .participant
        .store()
        .read(&stack.demo.table(&participant), &key)
        .await
    {
        Ok(Some(state)) => match item_view(&state) {
            Some(v) => json_response(StatusCode::OK, v),
            None => not_found(&participant, &id),
        },
        Ok(None) => not_found(&participant, &id),
        Err(e) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"code": "unavailable", "message": e.to_string()}),
        ),
    }
}

fn not_found(participant: &str, id: &str) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        json!({"code": "not_found", "message": format!("no item {id:?} in {participant}")}),
    )
}

fn unknown_participant(stack: &Stack, participant: &str) -> Response {
    let known: Vec<&String> = stack.config.services.keys().collect();
    json_response(
        StatusCode::NOT_FOUND,
        json!({"code": "unknown_participant", "message": format!("no service {participant:?}; configured: {known:?}")}),
    )
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
