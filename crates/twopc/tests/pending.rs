//! Stuck transactions listed through the local stack: `GET /transactions?status=pending` (the
//! coordinator Lambda's own handler behind the local gateway) and `twopc pending`, on DynamoDB
//! Local.

mod common;

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::process::Command;
use twopc_core::ids::TxId;
use twopc_core::ports::{Clock, SystemClock, TxLog};
use twopc_core::record::TxRecord;
use twopc_core::status::TxStatus;
use twopc_dynamo::DynamoTxLog;

fn now_ms() -> u64 {
    SystemClock.now_ms()
}

fn record(deadline: u64, status: TxStatus) -> TxRecord {
    let mut r = TxRecord::never_began(&TxId::random(), deadline.saturating_sub(5_000));
    r.status = status;
    r.deadline = deadline;
    r.begun_by = "pending-test".into();
    r
}

/// `twopc ARGS` against `url`: (exit code, stdout).
async fn twopc(url: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_twopc"))
        .arg("--url")
        .arg(url)
        .args(args)
        .env_remove("TWOPC_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .await
        .expect("twopc runs");
    (
        out.status.code().expect("an exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn ids(listing: &Value) -> Vec<String> {
    listing["transactions"]
        .as_array()
        .expect("transactions")
        .iter()
        .map(|t| t["txId"].as_str().expect("txId").to_owned())
        .collect()
}

#[tokio::test]
async fn stuck_transactions_are_listed_by_the_api_and_the_cli_and_finished_ones_are_not() {
    let endpoint = twopc_tests::endpoint();
    let prefix = format!("p{}-", &TxId::random().as_str()[..8]);
    let data = common::temp_dir("pending");
    let serve = common::start(
        &data,
        common::free_port(),
        &["--dynamodb-endpoint", &endpoint, "--table-prefix", &prefix],
    )
    .await;
    let url = serve.url.clone();

    // GIVEN nothing unfinished: an empty listing.
    let (status, listing) = common::call(&url, "GET", "/transactions?status=pending", None, None)
        .await
        .expect("answer");
    assert_eq!((status, listing), (200, json!({"transactions": []})));
    assert_eq!(
        twopc(&url, &["pending"]).await,
        (0, "no pending transaction\n".to_owned())
    );

    // GIVEN a committed transfer, a staged commit in flight (deadline ahead), and a transaction
    // stuck past its deadline that the sweeper is backing off from (so it stays stuck while
    // the stack's sweeper runs).
    let (status, committed) = common::call(
        &url,
        "POST",
        "/transactions",
        Some("pending-committed"),
        Some(json!({"participants": [
            {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": -1}}},
            {"participant": "accounts", "key": {"id": "bob"}, "op": {"add": {"balance": 1}}}]})),
    )
    .await
    .expect("answer");
    assert_eq!(status, 200, "{committed}");
    let log = DynamoTxLog::new(
        twopc_dynamo::client(Some(&endpoint)).await,
        format!("{prefix}transactions"),
    );
    let now = now_ms();
    let staging = record(now + 600_000, TxStatus::Staging);
    let stuck = record(now - 60_000, TxStatus::Preparing);
    for r in [&staging, &stuck] {
        log.create(r).await.expect("create");
    }
    log.note_failed_attempt(&stuck.tx_id, now + 3_600_000, now)
        .await
        .expect("back off");

    // WHEN listed, THEN both unfinished ones, oldest deadline first, as GET /transactions/{id}
    // shows them; not the committed one.
    let (status, listing) = common::call(&url, "GET", "/transactions?status=pending", None, None)
        .await
        .expect("answer");
    assert_eq!(status, 200, "{listing}");
    assert_eq!(
        ids(&listing),
        [stuck.tx_id.to_string(), staging.tx_id.to_string()]
    );
    assert_eq!(listing["transactions"][1]["status"], "STAGING");
    assert!(listing.get("next").is_none(), "one page: {listing}");
    let (_, one) = common::call(
        &url,
        "GET",
        &format!("/transactions/{}", stuck.tx_id),
        None,
        None,
    )
    .await
    .expect("answer");
    assert_eq!(listing["transactions"][0], one);

    // WHEN only the overdue ones, or a page of one, THEN the stuck one, and the next page
    // holds the other.
    let (_, overdue) = common::call(
        &url,
        "GET",
        "/transactions?status=pending&overdue=true",
        None,
        None,
    )
    .await
    .expect("answer");
    assert_eq!(ids(&overdue), [stuck.tx_id.to_string()]);
    let (_, first) = common::call(
        &url,
        "GET",
        "/transactions?status=pending&limit=1",
        None,
        None,
    )
    .await
    .expect("answer");
    assert_eq!(ids(&first), [stuck.tx_id.to_string()]);
    let next = first["next"].as_str().expect("a next page");
    let (_, second) = common::call(
        &url,
        "GET",
        &format!("/transactions?status=pending&limit=1&next={next}"),
        None,
        None,
    )
    .await
    .expect("answer");
    assert_eq!(ids(&second), [staging.tx_id.to_string()]);
    assert!(second.get("next").is_none(), "{second}");

    // THEN the command line says the same: a line each, --overdue, --json, pages.
    let (code, text) = twopc(&url, &["pending"]).await;
    assert_eq!(code, 0);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("PREPARING") && lines[0].contains(&stuck.tx_id.to_string()),
        "{text}"
    );
    assert!(
        lines[1].starts_with("STAGING") && lines[1].contains(&staging.tx_id.to_string()),
        "{text}"
    );
    let (_, text) = twopc(&url, &["pending", "--overdue", "--json"]).await;
    let json: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(json, overdue);
    let (_, text) = twopc(&url, &["pending", "--limit", "1"]).await;
    assert!(
        text.ends_with(&format!("more: twopc pending --next {next}\n")),
        "{text}"
    );

    // WHEN asked wrongly, THEN a 400 with a code that says what to fix, from the API and the CLI.
    for query in [
        "",
        "?status=committed",
        "?status=pending&limit=0",
        "?status=pending&limit=101",
        "?status=pending&overdue=yes",
        "?status=pending&next=nonsense",
        "?status=pending&color=red",
    ] {
        let (status, refusal) =
            common::call(&url, "GET", &format!("/transactions{query}"), None, None)
                .await
                .expect("answer");
        assert_eq!(
            (status, refusal["code"].as_str()),
            (400, Some("invalid_listing")),
            "{query}: {refusal}"
        );
    }
    let (code, _) = twopc(&url, &["pending", "--next", "1.not-a-uuid"]).await;
    assert_eq!(code, 2, "refused, an error exit");
}
