//! The operator console (`/console`) in headless Chromium against a real `twopc serve` on
//! DynamoDB Local (tests/browser/console.mjs drives it; `make browser-tools` installs Chromium and
//! playwright-core, `make test` runs it): a stuck transaction shows overdue with what it waits
//! for, "recover now" ends it and the page shows so without a reload, an abort of it then is
//! refused with the API's error, and a non-admin token's page gets no operator answer. The
//! screenshot it takes is docs/console.png, which docs/operations.md shows.

mod common;

use std::path::PathBuf;

use twopc_core::ids::TxId;
use twopc_core::ports::TxLog;
use twopc_core::status::TxStatus;
use twopc_dynamo::DynamoTxLog;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_stuck_transaction_recovers_it_live_and_shows_refusals() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(
        root.join("tests/browser/node_modules/playwright-core")
            .is_dir(),
        "playwright-core is missing: run `make browser-tools` (make test does)"
    );
    let endpoint = twopc_tests::endpoint();
    let prefix = format!("c{}-", &TxId::random().as_str()[..8]);
    let data = common::temp_dir("console");
    let serve = common::start(
        &data,
        common::free_port(),
        &["--dynamodb-endpoint", &endpoint, "--table-prefix", &prefix],
    )
    .await;
    let viewer = common::token(&data, &["--sub", "viewer", "--topic", "accounts/alice"]);
    let log = DynamoTxLog::new(
        twopc_dynamo::client(Some(&endpoint)).await,
        format!("{prefix}transactions"),
    );
    let stuck = common::stuck(&log, &prefix).await;
    let shot = root.join("docs/console.png");
    let _ = std::fs::remove_file(&shot);

    let out = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/console.mjs"))
        .arg(&serve.url)
        .arg(stuck.tx_id.as_str())
        .arg(&viewer)
        .arg(&shot)
        .output()
        .await
        .expect("run node");
    let _ = common::interrupt(serve).await;
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "browser check failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // What the page showed is what the store holds: the operator's recovery aborted it.
    let record = log.get(&stuck.tx_id).await.expect("get").expect("record");
    assert_eq!(record.status, TxStatus::Aborted);
    assert!(
        std::fs::metadata(&shot)
            .map(|m| m.len() > 10_000)
            .unwrap_or(false),
        "no screenshot at {}",
        shot.display()
    );
}
