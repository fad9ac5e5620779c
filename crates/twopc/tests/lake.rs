//! The local data lake as a real run of `twopc serve` builds it, queried the way `make lake`
//! does (DuckDB over the Parquet files, with the SQL Athena saves): the balances the saved query
//! reports are the ones the API reports, exact; aborted transactions are listed; a clean stop
//! rolls what was buffered.

mod common;

use std::path::Path;
use std::process::Command;

use common::{call, interrupt, next_json, open_with, send, start_on_shared, token, transfer};
use serde_json::{Value, json};

/// `make lake` with `Q=name` over the lake in `lake`: one JSON object per row.
fn make_lake(lake: &Path, name: &str) -> Vec<Value> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = repo.join(".tools/venv/bin/python");
    assert!(
        python.exists(),
        "DuckDB is installed by `make tools` (into .tools/venv): run it first"
    );
    let out = Command::new(python)
        .arg(repo.join("infra/lake/query.py"))
        .env("LAKE_DIR", lake)
        .env("Q", name)
        .env("LAKE_FORMAT", "json")
        .env_remove("QUERY")
        .output()
        .expect("run infra/lake/query.py");
    assert!(
        out.status.success(),
        "make lake Q={name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON row"))
        .collect()
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

/// Decimal text without trailing fraction zeros (`90.500000` and `90.5` are one value).
fn canonical(text: &str) -> String {
    let text = text.trim_matches('"');
    match text.split_once('.') {
        Some((whole, fraction)) => {
            let fraction = fraction.trim_end_matches('0');
            if fraction.is_empty() {
                whole.to_owned()
            } else {
                format!("{whole}.{fraction}")
            }
        }
        None => text.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_saved_queries_over_a_real_run_report_the_committed_balances_and_the_aborts() {
    let (serve, data) = start_on_shared("lake", &[]).await;
    let lake = data.join("lake");
    // The stream processor's pushes say when it has read each transaction's end: the lake's
    // rows come from the same deliveries.
    let mut ws = open_with(&serve, &token(&data, &["--sub", "analyst", "--admin"])).await;
    send(&mut ws, json!({"action": "subscribe", "all": true})).await;
    assert_eq!(next_json(&mut ws).await["type"], "subscribed");
    let mut ended = std::collections::BTreeSet::new();
    let mut aborted = vec![];
    for (from, to, amount) in [
        ("alice", "bob", 10),
        ("bob", "carol", 3),
        ("carol", "alice", 1_000_000),
        ("alice", "carol", 7),
    ] {
        // Answered once applied: the balances are read right after.
        let mut request = transfer(from, to, amount, 5_000);
        request["wait"] = "applied".into();
        let (status, body) = call(&serve.url, "POST", "/transactions", None, Some(request))
            .await
            .expect("transfer");
        if status == 409 {
            aborted.push(body["txId"].as_str().expect("txId").to_owned());
        } else {
            assert_eq!(status, 200, "{body}");
        }
        ended.insert(body["txId"].as_str().expect("txId").to_owned());
    }
    while !ended.is_empty() {
        let m = next_json(&mut ws).await;
        if m["type"] == "transaction.completed" {
            ended.remove(m["txId"].as_str().unwrap_or_default());
        }
    }
    assert_eq!(aborted.len(), 1, "the overdraft aborts");
    let mut balances = vec![];
    for id in ["alice", "bob", "carol"] {
        balances.push((id.to_owned(), canonical(&balance(&serve.url, id).await)));
    }
    // A clean stop rolls what is buffered and saves the positions.
    assert!(interrupt(serve).await.success());

    let rows = make_lake(&lake, "balance-changes-per-day");
    let reported: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["account"].as_str().unwrap_or_default().to_owned(),
                canonical(&r["balance"].to_string()),
            )
        })
        .collect();
    assert_eq!(reported, balances, "{rows:#?}");
    let changes: i64 = rows.iter().filter_map(|r| r["changes"].as_i64()).sum();
    assert_eq!(
        changes, 6,
        "two item changes per committed transfer, each once"
    );

    let listed = make_lake(&lake, "aborted-and-stuck-today");
    let ids: Vec<&str> = listed.iter().filter_map(|r| r["txid"].as_str()).collect();
    assert_eq!(ids, aborted, "only the abort: every commit was applied");
    assert_eq!(listed[0]["status"], "ABORTED");
}
