//! Helpers shared by the local-stack suites: run `twopc serve` as a child, call its API.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::Message;
use twopc_core::ids::TxId;
use twopc_core::ports::Clock;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("twopc-{name}-{}", TxId::random()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

pub struct Serve {
    pub child: Child,
    pub url: String,
}

/// `twopc serve --port PORT` with what the tests control taken from the environment (they say
/// which DynamoDB and which folders with flags), its logs at `warn`; callers add the rest.
pub fn serve_command(port: u16) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_twopc"));
    cmd.arg("serve")
        .arg("--port")
        .arg(port.to_string())
        // The embedded engine warns of each error it answers (failed conditions included).
        .env("RUST_LOG", "warn,dynoxide=error")
        .env_remove("TWOPC_DYNAMODB_ENDPOINT")
        .env_remove("TWOPC_DATA_DIR")
        .env_remove("TWOPC_LAKE_DIR")
        .stdout(Stdio::null());
    cmd
}

/// Waits until a GET of `path` on `url` answers `status`, polling (a starting process signals
/// nothing else); panics if `exited` reports the process gone first, or after `limit`.
pub async fn ready(
    url: &str,
    path: &str,
    status: u16,
    what: &str,
    limit: Duration,
    mut exited: impl FnMut() -> Option<std::process::ExitStatus>,
) {
    let until = Instant::now() + limit;
    loop {
        if let Ok((answered, _)) = call(url, "GET", path, None, None).await
            && answered == status
        {
            return;
        }
        if let Some(code) = exited() {
            panic!("{what} exited before it was ready ({code}); its errors are above");
        }
        assert!(Instant::now() < until, "{what} did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await; // polling a starting process
    }
}

pub async fn start(data_dir: &Path, port: u16, extra: &[&str]) -> Serve {
    let mut cmd = serve_command(port);
    cmd.arg("--data-dir")
        .arg(data_dir)
        .arg("--sweep-interval-ms")
        .arg("200")
        .arg("--lake-dir") // keep the data lake in the test's own folder
        .arg(data_dir.join("lake"))
        .args(extra);
    launch(cmd, port).await
}

/// `twopc serve` on the DynamoDB Local the test run shares (`twopc_tests::endpoint`), with
/// tables of its own (a fresh prefix) and a fresh data folder named after `name`, the data lake
/// in its `lake/`. Returns the stack and that folder.
pub async fn start_on_shared(name: &str, extra: &[&str]) -> (Serve, PathBuf) {
    let endpoint = twopc_tests::endpoint();
    let prefix = format!("{}{}-", &name[..1], &TxId::random().as_str()[..8]);
    let data = temp_dir(name);
    let mut args = vec!["--dynamodb-endpoint", &endpoint, "--table-prefix", &prefix];
    args.extend_from_slice(extra);
    let serve = start(&data, free_port(), &args).await;
    (serve, data)
}

/// `--engine NAME` of the engine under test (`twopc_tests::engine`), for a `twopc serve` that
/// starts an engine of its own.
pub fn engine_args() -> [&'static str; 2] {
    ["--engine", twopc_tests::engine().name()]
}

/// `twopc serve --port PORT` run from `cwd` with every other option at its default (relative
/// data and lake folders) but `extra`, as `make run` runs it. `cwd` must lie inside the
/// repository, so that DynamoDB Local's install in `.tools/` is found by searching upward.
pub async fn start_with_defaults(cwd: &Path, port: u16, extra: &[&str]) -> Serve {
    let mut cmd = serve_command(port);
    cmd.current_dir(cwd).args(extra);
    launch(cmd, port).await
}

/// Starts `cmd` (a [`serve_command`]) and waits until its API answers (a GET of an unknown
/// transaction: 404).
async fn launch(cmd: std::process::Command, port: u16) -> Serve {
    let child = Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn twopc serve");
    let mut serve = Serve {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let unknown = format!("/transactions/{}", TxId::random());
    ready(
        &serve.url,
        &unknown,
        404,
        "twopc serve",
        Duration::from_secs(90),
        || serve.child.try_wait().ok().flatten(),
    )
    .await;
    serve
}

/// A request with raw bytes and headers: the status, the body as JSON (`Null` if it is not)
/// and the `content-type`.
pub async fn call_raw(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: Vec<u8>,
) -> (u16, Value, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"));
    for (name, value) in headers {
        req = req.header(
            *name,
            hyper::header::HeaderValue::from_bytes(value).expect("header"),
        );
    }
    let req = req.body(Full::new(Bytes::from(body))).expect("request");
    let resp = client.request(req).await.expect("answer");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        content_type,
    )
}

pub async fn interrupt(mut serve: Serve) -> std::process::ExitStatus {
    let pid = serve.child.id().expect("pid");
    Command::new("kill")
        .arg("-INT")
        .arg(pid.to_string())
        .status()
        .await
        .expect("kill -INT");
    tokio::time::timeout(Duration::from_secs(30), serve.child.wait())
        .await
        .expect("exits after SIGINT")
        .expect("wait")
}

pub async fn call(
    base: &str,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> Result<(u16, Value), String> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"));
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let req = req
        .body(Full::new(Bytes::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        )))
        .map_err(|e| e.to_string())?;
    let resp = client.request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

pub fn transfer(from: &str, to: &str, amount: i64, timeout_ms: u64) -> Value {
    json!({"timeoutMs": timeout_ms, "participants": [
        {"participant": "accounts", "key": {"id": from}, "op": {"add": {"balance": -amount}, "require": {"balance": {"gte": amount}}}},
        {"participant": "accounts", "key": {"id": to}, "op": {"add": {"balance": amount}}}]})
}

// --- the WebSocket ------------------------------------------------------------------------------

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn open(serve: &Serve, query: &str) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let url = format!("{}/ws{query}", serve.url.replacen("http", "ws", 1));
    tokio_tungstenite::connect_async(url)
        .await
        .map(|(ws, _)| ws)
}

/// A token minted by `twopc token --data-dir data ARGS` (the stack's own signing key).
pub fn token(data: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_twopc"))
        .arg("token")
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .expect("twopc token runs");
    assert!(
        out.status.success(),
        "twopc token {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// A connection with `token`.
pub async fn open_with(serve: &Serve, token: &str) -> Ws {
    open(serve, &format!("?token={token}"))
        .await
        .expect("the token is accepted")
}

/// How `$connect` refuses `query`: the HTTP status and the JSON answer.
pub async fn refused(serve: &Serve, query: &str) -> (u16, Value) {
    match open(serve, query).await {
        Ok(_) => panic!("{query}: accepted"),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => (
            resp.status().as_u16(),
            serde_json::from_slice(resp.body().as_deref().unwrap_or_default())
                .unwrap_or(Value::Null),
        ),
        Err(e) => panic!("{query}: {e}"),
    }
}

pub async fn next_json(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("a message within 20 s")
            .expect("open")
            .expect("frame");
        if let Message::Text(t) = msg {
            return serde_json::from_str(&t).expect("json frame");
        }
    }
}

/// Reads frames until one matches, or fails after 20 s.
pub async fn until(ws: &mut Ws, what: impl Fn(&Value) -> bool) -> Value {
    loop {
        let v = next_json(ws).await;
        if what(&v) {
            return v;
        }
    }
}

pub async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string().into()))
        .await
        .expect("send");
}

/// The rows of the local lake under `lake` (Parquet under `committed/dt=…/`), each as an
/// object of its non-null columns (lower-case names, as Athena shows them), once `enough`.
pub async fn lake_rows(lake: &Path, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    fn present(v: Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k, present(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.into_iter().map(present).collect()),
            other => other,
        }
    }
    let until_time = Instant::now() + Duration::from_secs(20);
    loop {
        let rows: Vec<Value> = twopc_fanout::parquet_lake::read_rows(lake)
            .expect("the lake's files are whole Parquet")
            .into_iter()
            .map(present)
            .collect();
        if enough(&rows) {
            return rows;
        }
        assert!(
            Instant::now() < until_time,
            "the lake did not get the rows expected; it has {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await; // polling files written by another process
    }
}

/// A transaction stuck past its deadline, undecided, on accounts/alice, that the stack's
/// sweeper backs off from for an hour (so only an operator moves it).
pub async fn stuck(log: &twopc_dynamo::DynamoTxLog, prefix: &str) -> twopc_core::record::TxRecord {
    let now = twopc_core::ports::SystemClock.now_ms();
    let mut r = twopc_core::record::TxRecord::never_began(&TxId::random(), now - 65_000);
    r.status = twopc_core::status::TxStatus::Preparing;
    r.deadline = now - 60_000;
    r.begun_by = "operator-test".into();
    r.participants = vec![
        serde_json::from_value(json!({
            "participant": "accounts",
            "target": {"transport": "direct", "table": format!("{prefix}accounts")},
            "key": {"id": "alice"}, "op": {"add": {"balance": -1}}
        }))
        .expect("an entry"),
    ];
    // Written backing off already: the stack's sweeper runs every 200 ms.
    r.attempts = 1;
    r.retry_after = Some(now + 3_600_000);
    twopc_core::ports::TxLog::create(log, &r)
        .await
        .expect("create");
    r
}
