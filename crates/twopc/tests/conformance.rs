//! `twopc conformance`, the black-box runner, against participants over HTTP: the SDK's
//! `payments` as `twopc serve` serves it passes every check it plays; a participant that trusts
//! unsigned requests and answers a duplicate commit as new fails exactly those checks, named,
//! and the run exits 1; the Python example (examples/python-participant, on the Python SDK's
//! installed wheel and DynamoDB Local) passes every check, then takes part in transactions of
//! the local stack beside a Rust participant, committed and aborted, and the Python SDK's client
//! submits, reads and lists against the same stack (sdk/python/tests/test_against_stack.py).

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::{call, free_port, ready, start, start_on_shared, temp_dir};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use twopc_core::ids::TxId;
use twopc_core::memory::MemoryTxLog;
use twopc_core::message::{CompleteReply, CompleteRequest, InquireRequest, PrepareRequest};
use twopc_core::ports::{Clock, SystemClock, TxLog};
use twopc_core::record::TxRecord;
use twopc_core::status::TxStatus;
use twopc_dynamo::DynamoTxLog;
use twopc_participant_sdk::conformance::CHECKS;
use twopc_participant_sdk::{Call, HookError, Hooks, MemoryStates, Reservation, SdkParticipant};

const SECRET: &str = "the secret the runner and the participant share\n";

fn secret_file(dir: &Path) -> PathBuf {
    let path = dir.join("secret.txt");
    std::fs::write(&path, SECRET).expect("secret file");
    path
}

/// The checks the runner plays (those that need only messages), by name.
fn black_box() -> Vec<&'static str> {
    CHECKS
        .iter()
        .filter(|c| c.needs.black_box())
        .map(|c| c.name)
        .collect()
}

/// Runs `twopc conformance`: its exit code and its standard output.
async fn runner(
    url: &str,
    secret: &Path,
    payload: &str,
    invalid: &str,
    json: bool,
) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_twopc"));
    cmd.arg("conformance")
        .arg("--url")
        .arg(url)
        .arg("--secret-file")
        .arg(secret)
        .arg("--payload")
        .arg(payload)
        .arg("--invalid-payload")
        .arg(invalid)
        .env_remove("TWOPC_URL");
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().await.expect("twopc conformance runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), stdout)
}

/// The checks the text report marks `FAIL`.
fn failed(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter_map(|l| l.strip_prefix("FAIL  "))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_participant_the_local_stack_serves_passes_every_check_played_over_http() {
    let dir = temp_dir("conformance-sdk");
    let secret = secret_file(&dir);
    let secret_arg = secret.to_str().expect("utf-8 path");
    let (serve, _) = start_on_shared("conformance", &["--signing-secret-file", secret_arg]).await;
    let url = format!("{}/services/payments", serve.url);
    let payment = r#"{"card": "4242", "amount": 1.25}"#;
    let (code, report) = runner(&url, &secret, payment, r#"{"card": 4242}"#, false).await;
    assert_eq!(code, 0, "{report}");
    for name in black_box() {
        assert!(
            report.contains(&format!("PASS  {name}\n")),
            "{name}: {report}"
        );
    }
    assert!(failed(&report).is_empty(), "{report}");
    assert!(report.contains(&format!("{} passed, 0 failed", black_box().len())));

    // The JSON report: every bad input sent, refused with its code; nothing held after each.
    let (code, report) = runner(&url, &secret, payment, r#"{"card": 4242}"#, true).await;
    assert_eq!(code, 0, "{report}");
    let report: Value = serde_json::from_str(&report).expect("a JSON report");
    let sent: Vec<&Value> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .flat_map(|c| c["sent"].as_array().into_iter().flatten())
        .collect();
    let code_of = |what: &str| -> Vec<(u64, &str)> {
        sent.iter()
            .filter(|s| s["what"].as_str().is_some_and(|w| w.contains(what)))
            .map(|s| {
                (
                    s["status"].as_u64().unwrap_or(0),
                    s["code"].as_str().unwrap_or(""),
                )
            })
            .collect()
    };
    assert_eq!(code_of("an unsigned prepare"), [(401, "unsigned")]);
    assert_eq!(code_of("signed 10 minutes ago"), [(401, "stale_request")]);
    assert_eq!(code_of("signed for another"), [(401, "wrong_transaction")]);
    assert_eq!(code_of("not JSON"), [(400, "invalid_request")]);
    assert_eq!(code_of("another secret"), [(401, "bad_signature")]);
    assert_eq!(report["failed"], 0);
    assert!(
        report["notPlayed"]
            .as_array()
            .is_some_and(|n| n.contains(&json!("a_silent_coordinator_is_resolved_by_the_record"))),
        "{report}"
    );
}

/// Holds any payload with an `amount`.
#[derive(Clone)]
struct Anything;

impl Hooks for Anything {
    type Payload = Value;

    async fn reserve(&self, call: Call<'_, Value>) -> Result<Reservation, HookError> {
        Ok(match call.payload.get("amount") {
            Some(_) => Reservation::Held,
            None => Reservation::invalid("no amount"),
        })
    }
    async fn confirm(&self, _: Call<'_, Value>) -> Result<(), HookError> {
        Ok(())
    }
    async fn cancel(&self, _: Call<'_, Value>) -> Result<(), HookError> {
        Ok(())
    }
}

type Broken = Arc<SdkParticipant<Anything, MemoryStates, MemoryTxLog, SystemClock>>;

fn answer(status: StatusCode, body: Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn invalid(e: serde_json::Error) -> Response {
    answer(
        StatusCode::BAD_REQUEST,
        json!({"code": "invalid_request", "message": e.to_string()}),
    )
}

/// A participant with two bugs a newcomer could write: it never checks signatures, and it
/// answers a duplicate commit as a new one (`done`, as if it had applied it again).
async fn serve_broken() -> String {
    let participant: Broken = Arc::new(
        SdkParticipant::builder(Anything)
            .states(MemoryStates::default())
            .log(MemoryTxLog::default())
            .clock(SystemClock)
            .build(),
    );
    let app = Router::new()
        .route(
            "/prepare",
            post(|State(p): State<Broken>, body: Bytes| async move {
                match serde_json::from_slice::<PrepareRequest>(&body) {
                    Ok(req) => match p.prepare(&req).await {
                        Ok(r) => answer(StatusCode::OK, json!(r)),
                        Err(e) => answer(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            json!({"code": "internal", "message": e.to_string()}),
                        ),
                    },
                    Err(e) => invalid(e),
                }
            }),
        )
        .route(
            "/commit",
            post(|State(p): State<Broken>, body: Bytes| async move {
                match serde_json::from_slice::<CompleteRequest>(&body) {
                    Ok(req) => match p.commit(&req).await {
                        Ok(CompleteReply::AlreadyDone) => {
                            answer(StatusCode::OK, json!({"result": "done"}))
                        }
                        Ok(r) => answer(StatusCode::OK, json!(r)),
                        Err(e) => answer(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            json!({"code": "internal", "message": e.to_string()}),
                        ),
                    },
                    Err(e) => invalid(e),
                }
            }),
        )
        .route(
            "/abort",
            post(|State(p): State<Broken>, body: Bytes| async move {
                match serde_json::from_slice::<CompleteRequest>(&body) {
                    Ok(req) => match p.abort(&req).await {
                        Ok(r) => answer(StatusCode::OK, json!(r)),
                        Err(e) => answer(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            json!({"code": "internal", "message": e.to_string()}),
                        ),
                    },
                    Err(e) => invalid(e),
                }
            }),
        )
        .route(
            "/inquire",
            post(|State(p): State<Broken>, body: Bytes| async move {
                match serde_json::from_slice::<InquireRequest>(&body) {
                    Ok(req) => match p.inquire(&req).await {
                        Ok(r) => answer(StatusCode::OK, json!(r)),
                        Err(e) => answer(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            json!({"code": "internal", "message": e.to_string()}),
                        ),
                    },
                    Err(e) => invalid(e),
                }
            }),
        )
        .with_state(participant);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_participant_that_breaks_the_rules_fails_the_checks_it_breaks_and_the_run_exits_1() {
    let dir = temp_dir("conformance-broken");
    let secret = secret_file(&dir);
    let url = serve_broken().await;
    let (code, report) = runner(&url, &secret, r#"{"amount": 1}"#, r#"{"card": 1}"#, false).await;
    assert_eq!(code, 1, "{report}");
    let mut fails = failed(&report);
    fails.sort_unstable();
    let mut want = vec![
        // It trusts every request:
        "an_unsigned_request_is_refused_and_holds_nothing",
        "a_forged_signature_is_refused_and_holds_nothing",
        "a_stale_request_is_refused_and_holds_nothing",
        "a_request_signed_for_another_transaction_is_refused_and_holds_nothing",
        // and answers a duplicate commit as new:
        "commit_confirms_once_and_a_duplicate_is_already_done",
    ];
    want.sort_unstable();
    assert_eq!(fails, want, "{report}");
    assert!(
        report.contains("guards against: a retried commit applying twice"),
        "each check says what it guards against: {report}"
    );
    assert!(
        report.contains(&format!("{} passed, 5 failed", black_box().len() - 5)),
        "{report}"
    );
}

// --- the Python example ---------------------------------------------------------------------

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Python {
    _child: Child,
    url: String,
}

/// The interpreter of the virtualenv `make python-sdk` makes: the SDK's wheel installed, with
/// its pinned requirements.
fn python_bin() -> PathBuf {
    let python = repo().join(".tools/python-participant/bin/python");
    assert!(
        python.exists(),
        "{} is missing: `make python-sdk` builds the Python SDK's wheel and installs it there",
        python.display()
    );
    python
}

/// examples/python-participant on the shared DynamoDB Local, its table `table`.
async fn start_python(secret: &Path, table: &str) -> Python {
    let python = python_bin();
    let port = free_port();
    let child = Command::new(python)
        .arg(repo().join("examples/python-participant/participant.py"))
        .arg("--port")
        .arg(port.to_string())
        .arg("--secret-file")
        .arg(secret)
        .arg("--dynamodb-endpoint")
        .arg(twopc_tests::endpoint())
        .arg("--table")
        .arg(table)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python participant");
    let mut py = Python {
        _child: child,
        url: format!("http://127.0.0.1:{port}"),
    };
    ready(
        &py.url,
        "/members/alice",
        200,
        "the Python participant",
        Duration::from_secs(60),
        || py._child.try_wait().ok().flatten(),
    )
    .await;
    py
}

async fn points(py: &Python, member: &str) -> Value {
    let (status, body) = call(&py.url, "GET", &format!("/members/{member}"), None, None)
        .await
        .expect("points");
    assert_eq!(status, 200, "{body}");
    body["points"].clone()
}

async fn balance(url: &str, id: &str) -> String {
    let (status, body) = call(
        url,
        "GET",
        &format!("/local/items/accounts/{id}"),
        None,
        None,
    )
    .await
    .expect("item");
    assert_eq!(status, 200, "{body}");
    body["item"]["balance"].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_participant_passes_the_runner_and_commits_and_aborts_beside_a_rust_one() {
    let dir = temp_dir("conformance-python");
    let secret = secret_file(&dir);
    let table = format!("py{}-loyalty", &TxId::random().as_str()[..8]);
    let py = start_python(&secret, &table).await;

    // GIVEN the runner passes it.
    let payload = r#"{"member": "conformance", "points": 1}"#;
    let invalid = r#"{"member": 42, "points": 1}"#;
    let (code, report) = runner(&py.url, &secret, payload, invalid, false).await;
    assert_eq!(code, 0, "{report}");
    for name in black_box() {
        assert!(
            report.contains(&format!("PASS  {name}\n")),
            "{name}: {report}"
        );
    }

    // WHEN the local stack names it, an order pays 10 from Alice's account (a Rust participant
    // on its table) and 100 of her loyalty points (the Python one): both apply.
    let secret_arg = secret.to_str().expect("utf-8 path");
    let loyalty = format!("loyalty={}", py.url);
    let endpoint = twopc_tests::endpoint();
    let prefix = format!("y{}-", &TxId::random().as_str()[..8]);
    let serve = start(
        &temp_dir("polyglot"),
        free_port(),
        &[
            "--dynamodb-endpoint",
            &endpoint,
            "--table-prefix",
            &prefix,
            "--http-participant",
            &loyalty,
            "--signing-secret-file",
            secret_arg,
        ],
    )
    .await;
    let order = |account: &str, amount: i64, member: &str, pts: i64| {
        json!({"wait": "applied", "participants": [
            {"participant": "accounts", "key": {"id": account}, "op": {"add": {"balance": -amount}, "require": {"balance": {"gte": amount}}}},
            {"participant": "loyalty", "payload": {"member": member, "points": pts}}]})
    };
    let (status, paid) = call(
        &serve.url,
        "POST",
        "/transactions",
        None,
        Some(order("alice", 10, "alice", 100)),
    )
    .await
    .expect("order");
    assert_eq!(
        (status, paid["status"].as_str()),
        (200, Some("COMMITTED")),
        "{paid}"
    );
    assert_eq!(
        paid["participants"][1],
        json!({"participant": "loyalty", "vote": "yes"})
    );
    assert_eq!(balance(&serve.url, "alice").await, "90");
    assert_eq!(points(&py, "alice").await, json!(900));

    // THEN an order the Rust participant refuses (Carol has 0) aborts: the points the Python
    // participant held for it are given back.
    let (status, refused) = call(
        &serve.url,
        "POST",
        "/transactions",
        None,
        Some(order("carol", 5, "bob", 20)),
    )
    .await
    .expect("order");
    assert_eq!(
        (status, refused["status"].as_str()),
        (409, Some("ABORTED")),
        "{refused}"
    );
    assert_eq!(refused["code"], "condition", "{refused}");
    assert_eq!(refused["participants"][1]["vote"], "yes", "{refused}");
    assert_eq!(points(&py, "bob").await, json!(50), "the hold was released");
    assert_eq!(balance(&serve.url, "carol").await, "0");

    // AND one the Python participant refuses (Bob has 50 points) aborts: Alice's debit is undone.
    let (status, declined) = call(
        &serve.url,
        "POST",
        "/transactions",
        None,
        Some(order("alice", 1, "bob", 51)),
    )
    .await
    .expect("order");
    assert_eq!(
        (status, declined["status"].as_str()),
        (409, Some("ABORTED")),
        "{declined}"
    );
    let python = &declined["participants"][1];
    assert_eq!(
        (
            python["participant"].as_str(),
            python["vote"].as_str(),
            python["reason"].as_str()
        ),
        (Some("loyalty"), Some("no"), Some("condition")),
        "{declined}"
    );
    assert_eq!(balance(&serve.url, "alice").await, "90");
    assert_eq!(points(&py, "bob").await, json!(50));

    // AND the Python client submits, reads and lists against the same stack: one transaction
    // is left pending (preparing, its deadline ahead: the sweeper leaves it; a staged one with
    // no participants would be completed at once).
    let log = DynamoTxLog::new(
        twopc_dynamo::client(Some(&endpoint)).await,
        format!("{prefix}transactions"),
    );
    let now = SystemClock.now_ms();
    let mut pending = TxRecord::never_began(&TxId::random(), now);
    (pending.status, pending.deadline) = (TxStatus::Preparing, now + 600_000);
    pending.begun_by = "python-client-test".into();
    log.create(&pending).await.expect("a pending record");
    let out = Command::new(python_bin())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"])
        .arg(repo().join("sdk/python/tests/test_against_stack.py"))
        .env("TWOPC_STACK_URL", &serve.url)
        .env("TWOPC_STACK_PENDING", pending.tx_id.as_str())
        .output()
        .await
        .expect("pytest runs");
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("4 passed") && !report.contains("skipped"),
        "{report}"
    );
}
