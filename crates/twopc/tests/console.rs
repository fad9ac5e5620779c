//! The operator console (`/console`) in headless Chromium against a real `twopc serve` on
//! DynamoDB Local (tests/browser/console.mjs drives it; `make browser-tools` installs Chromium and
//! playwright-core, `make test` runs it): a stuck transaction shows overdue with what it waits
//! for, "recover now" ends it and the page shows so without a reload, an abort of it then is
//! refused with the API's error, and a non-admin token's page gets no operator answer; the
//! same page served by `twopc console` works through its relay.
//!
//! It takes a screenshot of the stuck transaction's page (in the test's target folder);
//! `make screenshot` runs it with TWOPC_UPDATE_SCREENSHOT=1, which writes that screenshot to
//! docs/console.png, the one docs/operations.md shows. Only then: a checkout `make test` ran in
//! stays as it was (a timestamp and an id differ in every shot).

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
    let admin = common::token(&data, &["--sub", "ops", "--admin"]);
    let relay = console(
        &["--url", &serve.url, "--sign", "none"],
        &[("TWOPC_OPERATOR_TOKEN", &admin)],
    )
    .await;
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{prefix}console.png"));

    let out = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/console.mjs"))
        .arg(&serve.url)
        .arg(stuck.tx_id.as_str())
        .arg(&viewer)
        .arg(&shot)
        .arg(&relay.url)
        .output()
        .await
        .expect("run node");
    let _ = common::interrupt(relay).await;
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
    if std::env::var_os("TWOPC_UPDATE_SCREENSHOT").is_some() {
        std::fs::copy(&shot, root.join("docs/console.png")).expect("docs/console.png written");
    }
    let _ = std::fs::remove_file(&shot);
}

/// `twopc console ARGS` on a free port, its environment `env`; waits until it serves the page.
async fn console(args: &[&str], env: &[(&str, &str)]) -> common::Serve {
    let port = common::free_port();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_twopc"))
        .arg("console")
        .arg("--port")
        .arg(port.to_string())
        .args(args)
        .env_remove("TWOPC_OPERATOR_TOKEN")
        .env_remove("TWOPC_WS_TOKEN")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn twopc console");
    let mut console = common::Serve {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    common::ready(
        &console.url,
        "/console",
        200,
        "twopc console",
        std::time::Duration::from_secs(30),
        || console.child.try_wait().ok().flatten(),
    )
    .await;
    console
}

/// The secret of this run the console's page holds (its `CONFIG.token`).
fn page_secret(page: &str) -> String {
    let start = page.find(r#""token":"console-"#).expect("the page's token") + r#""token":""#.len();
    let len = page[start..].find('"').expect("its end");
    page[start..start + len].to_owned()
}

/// The page as text.
async fn page_text(url: &str) -> String {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let uri: hyper::Uri = format!("{url}/console").parse().expect("uri");
    let resp = client.get(uri).await.expect("answer");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    String::from_utf8(body.to_vec()).expect("utf-8")
}

#[tokio::test]
async fn twopc_console_relays_operator_calls_only_with_the_operators_own_credential() {
    // GIVEN a local stack with a stuck transaction, and twopc console pointed at it with an
    // admin token (a local stack takes a bearer token where AWS takes SigV4).
    let endpoint = twopc_tests::endpoint();
    let prefix = format!("r{}-", &TxId::random().as_str()[..8]);
    let data = common::temp_dir("console-relay");
    let serve = common::start(
        &data,
        common::free_port(),
        &["--dynamodb-endpoint", &endpoint, "--table-prefix", &prefix],
    )
    .await;
    let admin = common::token(&data, &["--sub", "ops", "--admin"]);
    let log = DynamoTxLog::new(
        twopc_dynamo::client(Some(&endpoint)).await,
        format!("{prefix}transactions"),
    );
    let stuck = common::stuck(&log, &prefix).await;
    let id = stuck.tx_id.to_string();
    let relay = console(
        &["--url", &serve.url, "--sign", "none"],
        &[("TWOPC_OPERATOR_TOKEN", &admin)],
    )
    .await;

    // The page holds no credential of the operator's, only this run's secret, and polls: no
    // WebSocket token was given.
    let page = page_text(&relay.url).await;
    assert!(page.contains(r#""ws":null"#), "polls");
    assert!(
        !page.contains(&admin),
        "the page must not carry the operator's token"
    );
    let secret = format!("Bearer {}", page_secret(&page));
    let from_page = [("authorization", secret.as_bytes())];

    // Only the console's own page is relayed: not a request without its secret (another site's
    // page), not one naming another host (DNS rebinding).
    let (status, refused, _) =
        common::call_raw(&relay.url, "GET", "/operator/counts", &[], vec![]).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("console_forbidden")),
        "{refused}"
    );
    let rebound = [("host", &b"attacker.example:3100"[..]), from_page[0]];
    let (status, _, _) =
        common::call_raw(&relay.url, "GET", "/operator/counts", &rebound, vec![]).await;
    assert_eq!(status, 403);
    let (status, _, _) =
        common::call_raw(&relay.url, "GET", "/console", &rebound[..1], vec![]).await;
    assert_eq!(
        status, 403,
        "the page (and its secret) only to this console's own host"
    );

    // Operator calls go through, query and all, as the operator (token:ops).
    let (status, listing, _) = common::call_raw(
        &relay.url,
        "GET",
        "/operator/transactions?overdue=true",
        &from_page,
        vec![],
    )
    .await;
    assert_eq!(status, 200, "{listing}");
    assert_eq!(listing["transactions"][0]["txId"], id.as_str());
    let (status, acted, _) = common::call_raw(
        &relay.url,
        "POST",
        &format!("/operator/transactions/{id}/recover"),
        &from_page,
        vec![],
    )
    .await;
    assert_eq!(
        (status, acted["ended"].as_bool()),
        (200, Some(true)),
        "{acted}"
    );
    let record = log.get(&stuck.tx_id).await.expect("get").expect("record");
    assert_eq!(record.operator_actions[0].by, "token:ops");
    // Nothing but the operator API is relayed: not the client API, not the local routes.
    for path in [
        format!("/transactions/{id}"),
        "/local/items/accounts".to_owned(),
    ] {
        let (status, _, _) = common::call_raw(&relay.url, "GET", &path, &from_page, vec![]).await;
        assert_eq!(status, 404, "{path} was relayed");
    }
    let _ = common::interrupt(relay).await;

    // Without a credential the API's own refusal comes back as it was.
    let bare = console(&["--url", &serve.url, "--sign", "none"], &[]).await;
    let secret = format!("Bearer {}", page_secret(&page_text(&bare.url).await));
    let (status, refused, _) = common::call_raw(
        &bare.url,
        "GET",
        "/operator/counts",
        &[("authorization", secret.as_bytes())],
        vec![],
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (401, Some("operator_token")),
        "{refused}"
    );
    let _ = common::interrupt(bare).await;
    let _ = common::interrupt(serve).await;
}

#[tokio::test]
async fn twopc_console_signs_each_relayed_call_with_sigv4_for_execute_api() {
    // GIVEN an endpoint that records the request it gets and answers an amount, and twopc
    // console pointed at it (a stage path, as API Gateway's URLs have) with static test keys.
    // This proves a SigV4 signature for execute-api is on the relayed call, not that AWS would
    // accept it: the client crate's own tests check the signature itself.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let api = format!("http://{}/Prod", listener.local_addr().expect("addr"));
    let seen = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.expect("read");
            assert!(n > 0, "the request ended early");
            head.extend_from_slice(&buf[..n]);
        }
        let body = r#"{"pending":1,"amount":12.50}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(answer.as_bytes()).await.expect("write");
        String::from_utf8(head).expect("utf-8").to_lowercase()
    });
    let keys = [
        ("AWS_ACCESS_KEY_ID", "AKIDCONSOLETEST"),
        ("AWS_SECRET_ACCESS_KEY", "console-test-secret"),
        ("AWS_CONFIG_FILE", "/nonexistent"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    let relay = console(
        &["--url", &api, "--sign", "sigv4", "--region", "eu-west-1"],
        &keys,
    )
    .await;

    let secret = format!("Bearer {}", page_secret(&page_text(&relay.url).await));
    let (status, answer, _) = common::call_raw(
        &relay.url,
        "GET",
        "/operator/counts?since=5",
        &[("authorization", secret.as_bytes())],
        vec![],
    )
    .await;
    let head = seen.await.expect("the endpoint saw a request");
    let _ = common::interrupt(relay).await;
    assert_eq!(status, 200, "{answer}");
    // The amount's text as the API wrote it (numbers never pass through a float).
    assert_eq!(answer["amount"].to_string(), "12.50");
    assert!(
        head.starts_with("get /prod/operator/counts?since=5 http/1.1"),
        "{head}"
    );
    assert!(
        head.contains("authorization: aws4-hmac-sha256 credential=akidconsoletest/")
            && head.contains("/eu-west-1/execute-api/aws4_request"),
        "{head}"
    );
    assert!(head.contains("x-amz-date: "), "{head}");
}
