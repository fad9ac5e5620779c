//! The operator API through the local stack (`twopc serve` on DynamoDB Local): an admin token
//! lists a stuck transaction, reads its story, recovers it, and is refused an abort of a decided
//! one; no token and a non-admin token reach no operator call; every action lands in the data
//! lake with who asked.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::process::Command;
use twopc_core::ids::TxId;
use twopc_core::ports::TxLog;
use twopc_core::status::TxStatus;
use twopc_dynamo::DynamoTxLog;

/// A token of the stack's issuer (`twopc token ARGS` with its data folder).
async fn token(data: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_twopc"))
        .arg("token")
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .stdout(Stdio::piped())
        .output()
        .await
        .expect("twopc token");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A call with an optional bearer token: (status, body).
async fn call(url: &str, method: &str, path: &str, bearer: Option<&str>) -> (u16, Value) {
    let auth = bearer.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &[u8])> = auth
        .iter()
        .map(|a| ("authorization", a.as_bytes()))
        .collect();
    let (status, body, _) = common::call_raw(url, method, path, &headers, vec![]).await;
    (status, body)
}

#[tokio::test]
async fn an_admin_recovers_a_stuck_transaction_and_nobody_else_reaches_the_operator_api() {
    let endpoint = twopc_tests::endpoint();
    let prefix = format!("o{}-", &TxId::random().as_str()[..8]);
    let data = common::temp_dir("operator");
    let serve = common::start(
        &data,
        common::free_port(),
        &["--dynamodb-endpoint", &endpoint, "--table-prefix", &prefix],
    )
    .await;
    let url = serve.url.clone();
    let admin = token(&data, &["--sub", "ops", "--admin"]).await;
    let viewer = token(&data, &["--sub", "viewer", "--topic", "accounts/alice"]).await;
    let log = DynamoTxLog::new(
        twopc_dynamo::client(Some(&endpoint)).await,
        format!("{prefix}transactions"),
    );
    let r = common::stuck(&log, &prefix).await;
    let id = r.tx_id.to_string();
    let story = format!("/operator/transactions/{id}");

    // No token, a bad one, and a token that is not an admin's reach no operator call.
    for path in ["/operator/transactions", story.as_str()] {
        let (status, body) = call(&url, "GET", path, None).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (401, Some("operator_token"))
        );
        // What to send, in this call's terms (not the WebSocket's `?token=`).
        assert_eq!(
            body["message"],
            "no token: send Authorization: Bearer <a token of twopc token --admin>"
        );
        let (status, body) = call(&url, "GET", path, Some("not-a-jwt")).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (401, Some("operator_token"))
        );
        let (status, body) = call(&url, "GET", path, Some(&viewer)).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (403, Some("operator_forbidden")),
            "{body}"
        );
    }
    let (status, _) = call(&url, "POST", &format!("{story}/recover"), Some(&viewer)).await;
    assert_eq!(status, 403);
    assert_eq!(
        log.get(&r.tx_id)
            .await
            .expect("get")
            .expect("record")
            .status,
        TxStatus::Preparing,
        "a refused caller moved nothing"
    );

    // An admin sees it overdue, with what it waits for, and its story.
    let admin = Some(admin.as_str());
    let (status, listing) = call(&url, "GET", "/operator/transactions?overdue=true", admin).await;
    assert_eq!(status, 200, "{listing}");
    let listed = &listing["transactions"][0];
    assert_eq!(
        (listed["txId"].as_str(), listed["overdue"].as_bool()),
        (Some(id.as_str()), Some(true))
    );
    assert!(
        listed["waitingFor"]
            .as_str()
            .is_some_and(|w| w.starts_with("recovery")),
        "{listed}"
    );
    let (status, before) = call(&url, "GET", &story, admin).await;
    assert_eq!(status, 200, "{before}");
    // alice is there and unheld: nothing of it, and a prepare could not land any more.
    assert_eq!(
        before["participants"][0]["holds"]["kind"], "nothing",
        "{before}"
    );

    // Recover now: aborted at once, whatever the sweeper's backoff.
    let (status, acted) = call(&url, "POST", &format!("{story}/recover"), admin).await;
    assert_eq!(status, 200, "{acted}");
    assert_eq!(
        (acted["before"].as_str(), acted["ended"].as_bool()),
        (Some("PREPARING"), Some(true))
    );
    assert_eq!(acted["transaction"]["status"], "ABORTED");
    let (_, read) = common::call(&url, "GET", &format!("/transactions/{id}"), None, None)
        .await
        .expect("answer");
    assert_eq!(read["status"], "ABORTED");

    // An abort of it now is refused with the API's error; the story shows both asks by ops.
    let (status, refused) = call(&url, "POST", &format!("{story}/abort"), admin).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (409, Some("already_decided")),
        "{refused}"
    );
    let (_, after) = call(&url, "GET", &story, admin).await;
    let asks: Vec<(&str, &str, &str)> = after["transaction"]["operatorActions"]
        .as_array()
        .expect("operatorActions")
        .iter()
        .map(|n| {
            (
                n["action"].as_str().unwrap_or_default(),
                n["by"].as_str().unwrap_or_default(),
                n["result"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        asks,
        [
            ("recover", "token:ops", "done"),
            ("abort", "token:ops", "already_decided")
        ]
    );
    assert_eq!(
        after["participants"][0]["holds"]["kind"], "ended",
        "{after}"
    );

    // And the lake has a row for each ask, with who asked.
    let rows = lake_rows(&data, |rows| {
        rows.iter()
            .filter(|r| r["type"] == "operator" && r["txid"] == id.as_str())
            .count()
            == 2
    })
    .await;
    let by: Vec<&str> = rows
        .iter()
        .filter(|r| r["type"] == "operator" && r["txid"] == id.as_str())
        .map(|r| r["item"]["by"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(by, ["token:ops", "token:ops"]);
    common::interrupt(serve).await;
}

/// The local lake's rows (their keys the columns, in lower case) once `done` holds of them (the stream reaches the lake in its own
/// time: polled, up to a minute).
async fn lake_rows(data: &std::path::Path, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = twopc_fanout::parquet_lake::read_rows(&data.join("lake")).unwrap_or_default();
        if done(&rows) {
            return rows;
        }
        assert!(
            Instant::now() < until,
            "the lake did not get the rows: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await; // polling the stream's output
    }
}
