//! The Firehose data lake: rows land in S3 through moto's Firehose (a real Firehose API server),
//! and a partial failure (`FailedPutCount > 0`) is retried for the failed records only, checked
//! against a fault-injecting PutRecordBatch shim on loopback.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use serde_json::{Value, json};
use twopc_fanout::firehose::FirehoseLake;
use twopc_fanout::ports::Lake;
use twopc_tests::loopback::{FirehoseShim, serve};

async fn firehose(endpoint: &str) -> aws_sdk_firehose::Client {
    aws_sdk_firehose::Client::new(&twopc_dynamo::sdk_config(Some(endpoint)).await)
}

fn rows(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"eventId": format!("e{i}"), "type": "item", "committedAt": 1}))
        .collect()
}

#[tokio::test]
async fn a_partial_failure_is_retried_for_the_failed_records_only() {
    let shim = FirehoseShim::rejecting(|call, row| call == 1 && row.contains("\"e1\""));
    let url = serve(shim.router()).await;
    let lake =
        FirehoseLake::new(firehose(&url).await, "lake").with_retries(3, Duration::from_millis(1));
    let failed = lake.put(&rows(3)).await.expect("put");
    assert!(failed.is_empty(), "{failed:?}");
    let calls = shim.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].len(), 3);
    assert_eq!(calls[1].len(), 1, "only the rejected record is sent again");
    assert!(calls[1][0].contains("\"e1\"") && calls[1][0].ends_with('\n'));
}

#[tokio::test]
async fn records_that_keep_failing_are_reported_back() {
    let shim = FirehoseShim::rejecting(|_, row| row.contains("\"e2\""));
    let url = serve(shim.router()).await;
    let lake =
        FirehoseLake::new(firehose(&url).await, "lake").with_retries(3, Duration::from_millis(1));
    assert_eq!(lake.put(&rows(4)).await.expect("put"), vec![2]);
    assert_eq!(shim.calls().len(), 3, "one call per attempt");
}

/// moto's server, started from the tools virtualenv on a free loopback port.
struct Moto {
    child: tokio::process::Child,
    url: String,
}

async fn moto() -> Moto {
    let bin =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/venv/bin/moto_server");
    assert!(
        bin.is_file(),
        "moto is missing: run `make py-tools` (make test does)"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let child = tokio::process::Command::new(bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("moto_server");
    let url = format!("http://127.0.0.1:{port}");
    // Ready when it answers HTTP: an accepted connection is not enough (a starting server
    // may close it before answering: hyper's IncompleteMessage, seen once on a loaded run).
    let until = Instant::now() + Duration::from_secs(30);
    while try_http("GET", &url).await.is_err() {
        assert!(Instant::now() < until, "moto_server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await; // polling a starting process
    }
    Moto { child, url }
}

async fn http(method: &str, url: &str) -> (u16, String) {
    try_http(method, url).await.expect("moto answers")
}

async fn try_http(method: &str, url: &str) -> Result<(u16, String), String> {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<Bytes>>();
    // moto does not check signatures, but takes a request without credentials as anonymous
    // and refuses it private objects.
    let req = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0")
        .body(http_body_util::Full::new(Bytes::new()))
        .expect("request");
    let resp = client.request(req).await.map_err(|e| format!("{e:?}"))?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("{e:?}"))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::test]
async fn rows_land_in_s3_through_firehose() {
    let mut moto = moto().await;
    let bucket = "lake";
    assert_eq!(http("PUT", &format!("{}/{bucket}", moto.url)).await.0, 200);
    let client = firehose(&moto.url).await;
    let s3 = aws_sdk_firehose::types::ExtendedS3DestinationConfiguration::builder()
        .bucket_arn(format!("arn:aws:s3:::{bucket}"))
        .role_arn("arn:aws:iam::123456789012:role/firehose")
        // moto does not evaluate prefix expressions (`dt=!{timestamp:yyyy-MM-dd}/` in the template)
        .prefix("lake/")
        .error_output_prefix("errors/")
        .build()
        .expect("destination");
    client
        .create_delivery_stream()
        .delivery_stream_name("committed-changes")
        .extended_s3_destination_configuration(s3)
        .send()
        .await
        .expect("create stream");

    let lake = FirehoseLake::new(client, "committed-changes");
    let sent = rows(3);
    assert!(lake.put(&sent).await.expect("put").is_empty());

    let (status, listing) = http("GET", &format!("{}/{bucket}?list-type=2", moto.url)).await;
    assert_eq!(status, 200, "{listing}");
    let keys: Vec<&str> = listing
        .split("<Key>")
        .skip(1)
        .filter_map(|k| k.split("</Key>").next())
        .collect();
    assert!(!keys.is_empty(), "no object in the bucket: {listing}");
    let mut text = String::new();
    for key in keys {
        // moto keeps Firehose's prefix expression literally: the key needs percent-encoding.
        let encoded: String = key
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"/-_.".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let (status, body) = http("GET", &format!("{}/{bucket}/{encoded}", moto.url)).await;
        assert_eq!(status, 200, "GET {key}: {body}");
        text.push_str(&body);
    }
    let landed: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for row in &sent {
        assert!(landed.contains(row), "{row} did not land: {text}");
    }
    let _ = moto.child.kill().await;
}
