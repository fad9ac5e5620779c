//! `infra/after-deploy.py --local` (docs/deploy.md, "Check a deploy"): the operator's check after
//! `sam deploy`, run against a fresh local stack started without its demo seed, as a new deployed
//! stack starts empty. Every step but the AWS lookups (the stack's outputs, the bucket listing)
//! is the one an operator runs: `twopc seed` commits the demo items, the transfer commits, its
//! status is read, the WebSocket push arrives, a data-lake object appears. A second run changes
//! no seeded item and passes again; rows under the lake's `errors/` stop a third at once.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{call, interrupt, start_on_shared};

fn after_deploy(url: &str, data: &Path) -> Output {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = repo.join(".tools/venv/bin/python");
    assert!(
        python.exists(),
        "websockets and boto3 are installed by `make tools` (into .tools/venv): run it first"
    );
    Command::new(python)
        .arg(repo.join("infra/after-deploy.py"))
        .args(["--local", url, "--data-dir"])
        .arg(data)
        .arg("--lake-dir")
        .arg(data.join("lake"))
        .arg("--twopc")
        .arg(env!("CARGO_BIN_EXE_twopc"))
        .args(["--lake-timeout", "60"])
        .env_remove("TWOPC_URL")
        .output()
        .expect("run infra/after-deploy.py")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn balance(url: &str, service: &str, id: &str) -> String {
    let (status, body) = call(
        url,
        "GET",
        &format!("/local/items/{service}/{id}"),
        None,
        None,
    )
    .await
    .expect("item");
    assert_eq!(status, 200, "{body}");
    body["item"]["balance"].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_after_deploy_check_passes_against_a_fresh_local_stack() {
    let (serve, data) = start_on_shared("after-deploy", &["--no-seed"]).await;

    let first = after_deploy(&serve.url, &data);
    let out = text(&first);
    assert!(first.status.success(), "{out}");
    for expected in [
        "2. twopc seed",
        "   seeded accounts {\"id\":\"alice\"} balance 200",
        "   seeded wallets {\"id\":\"bob\"} balance 0",
        "4. twopc transfer --from alice --to bob --amount 1",
        "   COMMITTED  transaction ",
        "\"type\":\"entity.committed\",\"participant\":\"accounts\",\"key\":{\"id\":\"bob\"}",
        "7. data lake: an object since ",
        "OK: seed, transfer, status, push and data lake all work",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    assert_eq!(balance(&serve.url, "accounts", "alice").await, "199");
    assert_eq!(balance(&serve.url, "accounts", "bob").await, "1");
    assert_eq!(balance(&serve.url, "wallets", "bob").await, "0");

    // Again: the seed changes nothing (its idempotency key answers the first seed's outcome),
    // and the check passes with a second transfer.
    let second = after_deploy(&serve.url, &data);
    let out = text(&second);
    assert!(second.status.success(), "{out}");
    assert_eq!(balance(&serve.url, "accounts", "alice").await, "198");
    assert_eq!(balance(&serve.url, "accounts", "bob").await, "2");

    // Rows that went under errors/ (in AWS: Firehose could not convert them to Parquet) stop
    // the check at once, naming the object and where the reason is, instead of waiting out
    // the lake timeout. The local lake is laid out as the bucket is; the file is dated ahead
    // so that it counts as written after the run's transfer.
    let errors = data.join("lake/errors/format-conversion-failed/dt=2026-01-01");
    std::fs::create_dir_all(&errors).expect("errors folder");
    let failed = errors.join("rows-1");
    std::fs::write(&failed, b"{\"rawData\": \"...\"}\n").expect("error object");
    let ahead = std::time::SystemTime::now() + std::time::Duration::from_secs(3_600);
    std::fs::File::options()
        .write(true)
        .open(&failed)
        .and_then(|f| f.set_modified(ahead))
        .expect("dated ahead");
    let third = after_deploy(&serve.url, &data);
    let out = text(&third);
    assert_eq!(third.status.code(), Some(1), "{out}");
    assert!(
        out.contains("went under") && out.contains("errors/") && out.contains("rows-1"),
        "{out}"
    );
    assert!(out.contains("says why"), "{out}");

    assert!(interrupt(serve).await.success());
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn a_deployed_stack_is_named_or_local_is_given_not_both() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(repo.join(".tools/venv/bin/python"))
        .arg(repo.join("infra/after-deploy.py"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("name a deployed stack, or --local URL"));
}
