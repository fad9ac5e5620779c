//! The commands that use the local stack's own routes (`/local/...`: `sweep`, `accounts`,
//! `items`, `get`), which a deployment does not have; against an `https` URL they refuse and say
//! what to do in AWS instead.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use super::{CliFailure, Common, EXIT_OK};

/// A local route (`/local/...`): the status and the JSON answer.
async fn call_local(common: &Common, method: &str, path: &str) -> Result<(u16, Value), CliFailure> {
    let client = HttpClient::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let url = format!("{}{path}", common.url.trim_end_matches('/'));
    let req = hyper::Request::builder()
        .method(method)
        .uri(&url)
        .body(Full::new(Bytes::new()))
        .map_err(|e| CliFailure::new("invalid_input", format!("bad URL {url:?}: {e}")))?;
    let request = client.request(req);
    let resp = tokio::time::timeout(Duration::from_millis(common.request_timeout_ms.max(1)), request)
        .await
        .map_err(|_| {
            CliFailure::new(
                "timeout",
                format!("{url}: no answer within {} ms", common.request_timeout_ms),
            )
        })?
        .map_err(|e| {
            CliFailure::new(
                "unreachable",
                format!("cannot reach the local stack at {}: {e}. Is `twopc serve` (make run) running? Use --url to point elsewhere.", common.url),
            )
        })?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| CliFailure::new("unreachable", format!("reading the answer: {e}")))?
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    if status != 200 {
        let body = if value.get("code").is_some() {
            value
        } else {
            json!({"code": "error", "message": value})
        };
        return Err(CliFailure::answered(status, body));
    }
    Ok((status, value))
}

/// `twopc sweep`: one recovery pass in the running local stack.
pub async fn sweep(common: &Common) -> Result<u8, CliFailure> {
    common.local_only(
        "sweep",
        "A deployed stack's sweeper runs on its schedule; to run a pass now: `aws lambda invoke --function-name <SweeperFunction> out.json`.",
    )?;
    let (_, body) = call_local(common, "POST", "/local/sweep").await?;
    if common.json {
        println!("{body}");
    } else {
        let n = |k: &str| body.get(k).and_then(Value::as_u64).unwrap_or(0);
        println!(
            "sweep: {} overdue found, {} aborted, {} rolled forward, {} failed; {} expired locks, {} resolved",
            n("found"),
            n("aborted"),
            n("rolledForward"),
            n("failed"),
            n("expiredLocks"),
            n("locksResolved")
        );
    }
    Ok(EXIT_OK)
}

const READ_ITEMS_IN_AWS: &str =
    "In AWS, read the service's own table (`aws dynamodb get-item`/`scan`).";

/// Prints one item row of `/local/items` (`{"item": ..., "lockedBy": ...}`).
fn print_item(row: &Value) {
    let lock = row
        .get("lockedBy")
        .and_then(Value::as_str)
        .map(|t| format!("  [locked by {t}]"))
        .unwrap_or_default();
    println!(
        "{}{lock}",
        row.get("item").map(Value::to_string).unwrap_or_default()
    );
}

/// `twopc items <participant>` / `twopc accounts`.
pub async fn items(common: &Common, participant: &str) -> Result<u8, CliFailure> {
    common.local_only("items", READ_ITEMS_IN_AWS)?;
    let (_, body) = call_local(common, "GET", &format!("/local/items/{participant}")).await?;
    if common.json {
        println!("{body}");
        return Ok(EXIT_OK);
    }
    for row in body
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        print_item(row);
    }
    Ok(EXIT_OK)
}

/// `twopc get <participant> <id>`.
pub async fn get(common: &Common, participant: &str, id: &str) -> Result<u8, CliFailure> {
    common.local_only("get", READ_ITEMS_IN_AWS)?;
    let (_, body) = call_local(common, "GET", &format!("/local/items/{participant}/{id}")).await?;
    if common.json {
        println!("{body}");
    } else {
        print_item(&body);
    }
    Ok(EXIT_OK)
}
