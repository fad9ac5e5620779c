//! `twopc serve` end to end, as a child process: the HTTP API's answers, a SIGKILL in the middle
//! of a load, a restart on the same data, recovery by the sweeper, the bank invariant; and the
//! stack's own engine (the engine under test, `twopc_tests::engine`: embedded in the process, or
//! DynamoDB Local as its child): persistence across restarts and SIGKILLs, one instance per data
//! folder.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{
    call, engine_args, free_port, interrupt, ready, serve_command, start, temp_dir, transfer,
};
use serde_json::{Value, json};
use tokio::process::Command;
use twopc_core::ids::TxId;
use twopc_core::layout;
use twopc_tests::{Engine, openapi};

struct Tables {
    client: aws_sdk_dynamodb::Client,
    prefix: String,
}

impl Tables {
    async fn scan(
        &self,
        table: &str,
    ) -> Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
        let out = self
            .client
            .scan()
            .table_name(format!("{}{table}", self.prefix))
            .consistent_read(true)
            .send()
            .await
            .expect("scan");
        out.items().to_vec()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_like_the_api_and_recovers_after_a_sigkill_mid_load() {
    let endpoint = twopc_tests::endpoint();
    let prefix = format!("s{}-", &TxId::random().as_str()[..8]);
    let data = temp_dir("kill");
    let port = free_port();
    let extra = [
        "--dynamodb-endpoint",
        endpoint.as_str(),
        "--table-prefix",
        prefix.as_str(),
    ];
    let serve = start(&data, port, &extra).await;
    let url = serve.url.clone();
    let tables = Tables {
        client: twopc_dynamo::client(Some(&endpoint)).await,
        prefix: prefix.clone(),
    };

    // The API's answers.
    let (status, body) = call(
        &url,
        "POST",
        "/transactions",
        Some("t-1"),
        Some(transfer("alice", "bob", 10, 5_000)),
    )
    .await
    .expect("commit");
    // Staged (the default): answered once decided, applied right after.
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("committed")),
        "{body}"
    );
    let (status, again) = call(
        &url,
        "POST",
        "/transactions",
        Some("t-1"),
        Some(transfer("alice", "bob", 10, 5_000)),
    )
    .await
    .expect("replay");
    assert_eq!(
        (status, &again["txId"]),
        (200, &body["txId"]),
        "idempotent replay: {again}"
    );
    let (status, body) = call(
        &url,
        "POST",
        "/transactions",
        None,
        Some(transfer("carol", "bob", 5, 5_000)),
    )
    .await
    .expect("abort");
    assert_eq!(
        (status, body["outcome"].as_str(), body["code"].as_str()),
        (409, Some("aborted"), Some("condition")),
        "{body}"
    );
    let records = tables.scan("transactions").await.len();
    let (status, body) = call(
        &url,
        "POST",
        "/transactions",
        None,
        Some(json!({"participants": []})),
    )
    .await
    .expect("bad");
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(
        tables.scan("transactions").await.len(),
        records,
        "a 400 writes nothing"
    );
    let (status, body) = call(
        &url,
        "GET",
        &format!("/transactions/{}", TxId::random()),
        None,
        None,
    )
    .await
    .expect("404");
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );

    // A load, killed in the middle.
    let mut serve = serve;
    let answers = transfers_killed_midway(&url, "load", async {
        serve.child.start_kill().expect("SIGKILL");
        serve.child.wait().await.expect("killed");
    })
    .await;

    // Restart on the same data; the sweeper finishes what the kill left.
    let serve = start(&data, port, &extra).await;
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let open = tables
            .scan("transactions")
            .await
            .into_iter()
            .filter(|r| r.contains_key(layout::PENDING))
            .count();
        let locked = tables
            .scan("accounts")
            .await
            .into_iter()
            .filter(|i| {
                i.contains_key(layout::LOCK)
                    || i.keys().any(|k| k.starts_with(layout::RESERVATION_PREFIX))
            })
            .count();
        if open == 0 && locked == 0 {
            break;
        }
        assert!(
            Instant::now() < until,
            "{open} transactions still open, {locked} items still held after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await; // waiting for the sweeper's timer
    }
    let mut total = 0i128;
    for item in tables.scan("accounts").await {
        let balance = match item.get("balance") {
            Some(aws_sdk_dynamodb::types::AttributeValue::N(n)) => {
                n.parse::<i128>().expect("integral")
            }
            other => panic!("balance: {other:?}"),
        };
        assert!(balance >= 0);
        total += balance;
    }
    assert_eq!(total, 150, "the seeded 100 + 50 + 0 is conserved");
    let records: std::collections::BTreeMap<String, String> = tables
        .scan("transactions")
        .await
        .into_iter()
        .filter_map(|r| match (r.get(layout::TX_ID), r.get(layout::STATUS)) {
            (
                Some(aws_sdk_dynamodb::types::AttributeValue::S(tx)),
                Some(aws_sdk_dynamodb::types::AttributeValue::S(status)),
            ) => Some((tx.clone(), status.clone())),
            _ => None,
        })
        .collect();
    assert_honoured(&answers, false, |tx| records.get(tx).cloned());
    assert!(
        interrupt(serve).await.success(),
        "SIGINT stops serve cleanly"
    );
}

/// The answers heard while a load of transfers ran: (HTTP status, txId, outcome).
type Answer = (u16, String, String);

/// 60 transfers among alice, bob and carol in flight (idempotency keys `{round}-N`), `kill`
/// awaited once 10 are answered: every answer heard, before and around the kill. The kill lands
/// after some answers and before their finish (staged: the work after the answer), during
/// others' stage, and before others began.
async fn transfers_killed_midway(
    url: &str,
    round: &str,
    kill: impl std::future::Future<Output = ()>,
) -> Vec<Answer> {
    let mut load = tokio::task::JoinSet::new();
    for i in 0..60 {
        let (url, names) = (url.to_owned(), ["alice", "bob", "carol"]);
        let key = format!("{round}-{i}");
        load.spawn(async move {
            let (from, to) = (names[i % 3], names[(i + 1) % 3]);
            call(
                &url,
                "POST",
                "/transactions",
                Some(&key),
                Some(transfer(from, to, (i as i64 % 7) + 1, 400)),
            )
            .await
        });
    }
    let mut answers = vec![];
    type Joined = Result<Result<(u16, Value), String>, tokio::task::JoinError>;
    let heard = |done: Joined, answers: &mut Vec<Answer>| {
        if let Ok(Ok((status, body))) = done
            && let (Some(tx), Some(outcome)) = (body["txId"].as_str(), body["outcome"].as_str())
        {
            answers.push((status, tx.to_owned(), outcome.to_owned()));
        }
    };
    while answers.len() < 10 {
        match load.join_next().await {
            Some(done) => heard(done, &mut answers),
            None => panic!("the load ended with {} answers: {answers:?}", answers.len()),
        }
    }
    kill.await;
    while let Some(done) = load.join_next().await {
        heard(done, &mut answers);
    }
    answers
}

/// Every answer is honoured: what was answered committed is COMMITTED (applied), what was
/// answered aborted is ABORTED (`status_of` reads a transaction's status back, `None` when
/// there is no such transaction).
///
/// `engine_killed`: the engine itself was killed after these answers (not only `twopc serve`).
/// There the engines differ (docs/limitations.md, "The embedded engine"): the embedded engine
/// loses nothing it answered, but DynamoDB Local, killed moments after it answered a
/// `TransactWriteItems`, may come back without that transaction, record and items alike. So on
/// DynamoDB Local alone, and only there, an answered transaction may be missing altogether
/// (never the other outcome); the balances' check still holds it to all or nothing.
fn assert_honoured(
    answers: &[Answer],
    engine_killed: bool,
    status_of: impl Fn(&str) -> Option<String>,
) {
    assert!(answers.len() >= 10, "{answers:?}");
    let may_lose = engine_killed && twopc_tests::engine() == Engine::DynamoDbLocal;
    let mut lost = vec![];
    for (status, tx, outcome) in answers {
        let want = match outcome.as_str() {
            "committed" => "COMMITTED",
            "aborted" => "ABORTED",
            _ => continue, // pending: nothing was promised
        };
        match status_of(tx) {
            None if may_lose => lost.push(tx),
            found => assert_eq!(
                found.as_deref(),
                Some(want),
                "{tx} was answered {status} {outcome}"
            ),
        }
    }
    if !lost.is_empty() {
        eprintln!("DynamoDB Local came back without these answered transactions: {lost:?}");
    }
}

/// The pid of the DynamoDB Local a `twopc serve` on `data` runs as its child, when the engine
/// under test is DynamoDB Local; the embedded engine lives and dies with serve's process. (One
/// of the two places these tests tell the engines apart: their processes.)
fn own_dynamodb_local(data: &Path) -> Option<u32> {
    match twopc_tests::engine() {
        Engine::Embedded => None,
        Engine::DynamoDbLocal => Some(recorded_pid(&data.join("dynamodb.pid"))),
    }
}

/// `twopc serve` with an engine of its own (the engine under test), its data in the data folder:
/// a second serve on the folder is refused, the engine stops with serve, a restart finds the
/// committed transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_its_own_engine_persists_data_and_refuses_a_second_start() {
    let data = temp_dir("own");
    let port = free_port();
    let serve = start(&data, port, &engine_args()).await;
    let (status, body) = call(
        &serve.url,
        "POST",
        "/transactions",
        None,
        Some(transfer("alice", "bob", 1, 5_000)),
    )
    .await
    .expect("commit");
    assert_eq!(status, 200, "{body}");
    let tx = body["txId"].as_str().expect("txId").to_owned();

    // A second serve on the same data folder says so and stops.
    let mut second = serve_command(free_port());
    second.arg("--data-dir").arg(&data).args(engine_args());
    let second = Command::from(second).output().await.expect("second");
    assert_eq!(second.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("already running"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );

    let child = own_dynamodb_local(&data);
    assert!(interrupt(serve).await.success());
    if let Some(pid) = child {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "DynamoDB Local must stop with serve"
        );
    }

    let serve = start(&data, port, &engine_args()).await;
    let (status, body) = call(
        &serve.url,
        "GET",
        &format!("/transactions/{tx}"),
        None,
        None,
    )
    .await
    .expect("status");
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("COMMITTED")),
        "persisted across restarts: {body}"
    );
    assert!(interrupt(serve).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_default_options_starts_from_any_folder_and_keeps_its_data_there() {
    // `make run` is `twopc serve` from the repository with a relative data folder (`.twopc`):
    // the embedded engine by default; DynamoDB Local, which runs inside that folder, with
    // `--engine`, and it must still be handed absolute paths.
    let cwd = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("defaults-{}", TxId::random()));
    std::fs::create_dir_all(&cwd).expect("folder");
    let engine = twopc_tests::engine();
    let extra = match engine {
        Engine::Embedded => vec![],
        Engine::DynamoDbLocal => engine_args().to_vec(),
    };
    let serve = common::start_with_defaults(&cwd, free_port(), &extra).await;
    let (status, body) = call(
        &serve.url,
        "POST",
        "/transactions",
        None,
        Some(transfer("alice", "bob", 1, 5_000)),
    )
    .await
    .expect("commit");
    assert_eq!(status, 200, "{body}");
    assert!(interrupt(serve).await.success());
    let data = cwd.join(".twopc");
    // Where each engine keeps its tables (the other place these tests tell them apart).
    match engine {
        Engine::Embedded => {
            let file = data.join(twopc_engine::FILE_NAME);
            let size = std::fs::metadata(&file)
                .unwrap_or_else(|e| panic!("the embedded engine's file {}: {e}", file.display()))
                .len();
            assert!(
                size > 0,
                "the embedded engine stored nothing in {}",
                file.display()
            );
        }
        Engine::DynamoDbLocal => {
            let stored = std::fs::read_dir(data.join("dynamodb"))
                .expect("DynamoDB Local's files in .twopc/dynamodb")
                .count();
            assert!(
                stored > 0,
                "DynamoDB Local stored nothing in .twopc/dynamodb"
            );
            assert!(
                data.join("dynamodb-local.log").is_file(),
                "DynamoDB Local's output is kept in .twopc/dynamodb-local.log"
            );
            for dir in [&cwd, &data] {
                assert!(
                    !dir.join("dynamodb-local-metadata.json").exists(),
                    "telemetry is disabled, so DynamoDB Local writes no metadata file in {}",
                    dir.display()
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&cwd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_of_the_local_gateway_is_json_with_a_stable_code() {
    let endpoint = twopc_tests::endpoint();
    let prefix = format!("r{}-", &TxId::random().as_str()[..8]);
    let data = temp_dir("refusals");
    let serve = start(
        &data,
        free_port(),
        &["--dynamodb-endpoint", &endpoint, "--table-prefix", &prefix],
    )
    .await;
    struct Refused {
        method: &'static str,
        path: String,
        header: Option<(&'static str, &'static [u8])>,
        body: Vec<u8>,
        status: u16,
        code: &'static str,
    }
    let refused = |method, path: &str, status, code| Refused {
        method,
        path: path.to_owned(),
        header: None,
        body: vec![],
        status,
        code,
    };
    let with_body = |body: Vec<u8>, r: Refused| Refused { body, ..r };
    let cases = [
        // Over the API's 64 KiB (the router's only body limit). Not a body of megabytes: the
        // server answers before reading it and closes, and the client, still writing, may see
        // the connection reset before it reads the answer (a flaky test, not a server fault).
        with_body(
            vec![b'a'; 70_000],
            refused("POST", "/transactions", 413, "request_too_large"),
        ),
        refused("GET", "/nope", 404, "not_found"),
        refused("GET", "/local/items/nope", 404, "unknown_participant"),
        refused("DELETE", "/transactions", 405, "method_not_allowed"),
        refused("PUT", "/local/items/accounts", 405, "method_not_allowed"),
        refused("POST", "/", 405, "method_not_allowed"),
        refused("GET", "/@connections/x", 405, "method_not_allowed"),
        with_body(
            vec![0xff, 0xfe, b'{'],
            refused("POST", "/transactions", 400, "invalid_json"),
        ),
        Refused {
            header: Some(("idempotency-key", &[0xff])),
            ..with_body(
                b"{}".to_vec(),
                refused("POST", "/transactions", 400, "invalid_idempotency_key"),
            )
        },
        refused("GET", "/ws?token=%ff", 400, "invalid_query_string"),
        refused(
            "GET",
            &format!("/transactions/{}?a=%ff", TxId::random()),
            400,
            "invalid_query_string",
        ),
        refused("GET", "/ws", 400, "invalid_websocket_request"),
        refused("GET", "/local/items/%ff", 400, "invalid_request"),
    ];
    let mut on_the_api = vec![];
    for case in cases {
        let (method, path) = (case.method, &case.path);
        let headers: Vec<(&str, &[u8])> = case.header.into_iter().collect();
        let (got, answer, content_type) =
            common::call_raw(&serve.url, method, path, &headers, case.body).await;
        assert_eq!(
            (got, answer["code"].as_str(), content_type.as_str()),
            (case.status, Some(case.code), "application/json"),
            "{method} {path}: {answer}"
        );
        assert!(
            answer["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{method} {path}: a message says what to fix: {answer}"
        );
        if let Some(api_path) = path
            .split('?')
            .next()
            .filter(|p| p.starts_with("/transactions"))
        {
            on_the_api.push(openapi::answer(method, api_path, got, &answer));
        }
    }
    // The refusals on the API's paths, the framework's included, are ones docs/openapi.json
    // declares.
    openapi::validate_answers(&on_the_api);
    let written = twopc_dynamo::client(Some(&endpoint))
        .await
        .scan()
        .table_name(format!("{prefix}transactions"))
        .send()
        .await
        .expect("scan")
        .count();
    assert_eq!(written, 0, "a refused request writes nothing");
    assert!(interrupt(serve).await.success());
}

/// The state letter of `/proc/<pid>/stat` (`Z` for a zombie), or `None` once the pid is gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": the state follows the last ')' (comm may hold parentheses).
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn recorded_pid(file: &Path) -> u32 {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .trim()
        .parse()
        .expect("pid")
}

async fn kill(args: &[&str]) {
    let status = Command::new("kill")
        .args(args)
        .status()
        .await
        .expect("kill");
    assert!(status.success(), "kill {args:?}");
}

/// A `twopc serve` in a process group of its own. A std child: nothing reaps it unless the test
/// waits for it. Dropped while it still runs (a test that failed half-way), its whole group is
/// killed and reaped, so neither it nor its DynamoDB Local outlives the test.
struct Serve(std::process::Child);

impl std::ops::Deref for Serve {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Serve {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // Only while it runs: a reaped pid (and its group's id) may already name another process.
        if let Ok(None) = self.0.try_wait() {
            let group = format!("-{}", self.0.id());
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &group])
                .status();
            let _ = self.0.wait();
        }
    }
}

/// `twopc serve` as a plain child in a process group of its own (as make's recipe runs it), with
/// the engine under test, ready once the API answers.
async fn spawn_serve(data: &Path, port: u16) -> Serve {
    use std::os::unix::process::CommandExt;
    let child = serve_command(port)
        .arg("--data-dir")
        .arg(data)
        .arg("--lake-dir")
        .arg(data.join("lake"))
        .arg("--sweep-interval-ms")
        .arg("200")
        .args(engine_args())
        .process_group(0)
        .spawn()
        .expect("spawn twopc serve");
    // Guarded before it may fail to answer: a timeout below must not leak it.
    let mut serve = Serve(child);
    ready(
        &format!("http://127.0.0.1:{port}"),
        "/transactions?status=pending",
        200,
        "twopc serve",
        Duration::from_secs(90),
        || serve.try_wait().ok().flatten(),
    )
    .await;
    serve
}

/// Waits until `pid` no longer runs: gone, or a zombie.
async fn dead(pid: u32) {
    let until = Instant::now() + Duration::from_secs(10);
    while !matches!(process_state(pid), None | Some('Z')) {
        assert!(Instant::now() < until, "pid {pid} still runs after SIGKILL");
        tokio::time::sleep(Duration::from_millis(20)).await; // the kernel tearing it down
    }
}

/// Once the sweeper has finished what a kill left (nothing pending, no item locked), read
/// through the API: every answer in `answers` is honoured (the engine was killed with serve:
/// `assert_honoured`), and the accounts still hold the seeded 100 + 50 + 0, none below zero.
async fn settled_and_honoured(url: &str, answers: &[Answer]) {
    let until = Instant::now() + Duration::from_secs(60);
    let accounts = loop {
        let (_, pending) = call(url, "GET", "/transactions?status=pending", None, None)
            .await
            .expect("pending");
        let (_, accounts) = call(url, "GET", "/local/items/accounts", None, None)
            .await
            .expect("accounts");
        let open = pending["transactions"].as_array().map(Vec::len);
        let locked = accounts["items"]
            .as_array()
            .map(|items| items.iter().filter(|i| !i["lockedBy"].is_null()).count());
        if (open, locked) == (Some(0), Some(0)) {
            break accounts;
        }
        assert!(
            Instant::now() < until,
            "after 60 s: {pending} pending, {accounts} (lockedBy)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await; // waiting for the sweeper's timer
    };
    let mut total = 0i128;
    for item in accounts["items"].as_array().expect("items") {
        let balance: i128 = item["item"]["balance"]
            .to_string()
            .parse()
            .unwrap_or_else(|e| panic!("balance of {item}: {e}"));
        assert!(balance >= 0, "{item}");
        total += balance;
    }
    assert_eq!(
        total, 150,
        "the seeded 100 + 50 + 0 is conserved: {accounts}"
    );
    let mut statuses = std::collections::BTreeMap::new();
    for (_, tx, _) in answers {
        let (_, body) = call(url, "GET", &format!("/transactions/{tx}"), None, None)
            .await
            .expect("status");
        statuses.insert(tx.clone(), body["status"].as_str().map(str::to_owned));
    }
    assert_honoured(answers, true, |tx| statuses.get(tx).cloned().flatten());
}

/// `make run` killed with SIGKILL in the middle of transfers, as a terminal closing or an OOM
/// killer would, and started again at once on the same data folder, on the engine under test:
/// nothing it answered is lost, the sweeper finishes the rest, the balances add up.
/// 1. `twopc serve` alone: the embedded engine dies with it; DynamoDB Local lives on as an
///    orphan holding the database, and the next start stops it;
/// 2. the whole process group (serve, and DynamoDB Local when it is the engine).
///
/// Each time the killed serve is left a zombie under its pid, as where its parent died too and
/// PID 1 does not reap orphans (a container without an init): here the test is its parent and
/// does not reap it until the end, so the case is the same on any machine. A pid-based check
/// refused these restarts ("already running").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_killed_with_sigkill_mid_transfers_restarts_at_once_losing_nothing() {
    let data = temp_dir("sigkill");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let first = spawn_serve(&data, port).await;

    // 1. serve alone: a zombie; DynamoDB Local, if it is the engine, runs on.
    let child = own_dynamodb_local(&data);
    let answers = transfers_killed_midway(&url, "first", async {
        kill(&["-KILL", &first.id().to_string()]).await;
        dead(first.id()).await;
    })
    .await;
    assert_eq!(process_state(first.id()), Some('Z'), "unreaped: a zombie");
    if let Some(pid) = child {
        assert!(
            matches!(process_state(pid), Some(s) if s != 'Z'),
            "DynamoDB Local outlives a killed serve"
        );
    }
    let second = spawn_serve(&data, port).await;
    if let Some(pid) = child {
        assert!(
            matches!(process_state(pid), None | Some('Z')),
            "the orphaned DynamoDB Local was stopped"
        );
    }
    settled_and_honoured(&url, &answers).await;

    // 2. The whole process group, in the middle of transfers again.
    let child = own_dynamodb_local(&data);
    let more = transfers_killed_midway(&url, "second", async {
        kill(&["-KILL", "--", &format!("-{}", second.id())]).await;
        dead(second.id()).await;
        if let Some(pid) = child {
            dead(pid).await;
        }
    })
    .await;
    assert_eq!(process_state(second.id()), Some('Z'), "unreaped: a zombie");
    let mut third = spawn_serve(&data, port).await;
    settled_and_honoured(&url, &[answers, more].concat()).await;

    // A clean stop still works.
    kill(&["-INT", &third.id().to_string()]).await;
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = third.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < until, "serve did not stop after SIGINT");
        tokio::time::sleep(Duration::from_millis(50)).await; // polling a std child's exit
    };
    assert!(status.success(), "{status}");
    for mut zombie in [first, second] {
        zombie.wait().expect("reap");
    }
    let _ = std::fs::remove_dir_all(&data);
}

/// A test that fails half-way leaves no `twopc serve` (nor its DynamoDB Local) running: the
/// guard kills the child's whole process group when dropped while the child runs.
#[tokio::test]
async fn a_serve_dropped_while_it_runs_takes_its_process_group_with_it() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    // GIVEN a child in a group of its own with a grandchild (as serve and its engine)
    let mut child = std::process::Command::new("sh")
        .args(["-c", "sleep 300 & echo $!; wait"])
        .stdout(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("sh");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the grandchild's pid");
    let grandchild: u32 = line.trim().parse().expect("a pid");
    let pid = child.id();

    // WHEN its guard is dropped while it runs
    drop(Serve(child));

    // THEN the child is gone (killed and reaped) and so is the grandchild
    assert_eq!(process_state(pid), None, "reaped");
    dead(grandchild).await;
}
