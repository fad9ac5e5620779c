//! The client commands: they talk to a running `twopc serve` over HTTP.

use std::io::Read;
use std::path::PathBuf;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use twopc_core::decimal::Decimal;

/// Exit code: committed, or the command succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit code: the transaction aborted (HTTP 409 with status ABORTED).
pub const EXIT_ABORTED: u8 = 1;
/// Exit code: bad input, unreachable stack, or any other error.
pub const EXIT_ERROR: u8 = 2;
/// Exit code: decided but not finished yet (HTTP 202); the sweeper finishes it.
pub const EXIT_PENDING: u8 = 3;

/// Where the stack is and how to print.
#[derive(Clone, Debug, clap::Args)]
pub struct Common {
    /// Base URL of the HTTP API.
    #[arg(
        long,
        global = true,
        default_value = "http://127.0.0.1:3000",
        env = "TWOPC_URL"
    )]
    pub url: String,
    /// Print the API's JSON answer instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

/// A failed command: the message says what to do.
pub struct Failure(pub String);

async fn call(
    common: &Common,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<String>,
) -> Result<(u16, Value), Failure> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let url = format!("{}{path}", common.url.trim_end_matches('/'));
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(&url)
        .header("content-type", "application/json");
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| Failure(format!("bad URL {url:?}: {e}")))?;
    let resp = client.request(req).await.map_err(|e| {
        Failure(format!("cannot reach the local stack at {}: {e}. Is `twopc serve` (make run) running? Use --url to point elsewhere.", common.url))
    })?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| Failure(format!("reading the answer: {e}")))?
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok((status, value))
}

fn exit_for(status: u16, body: &Value) -> u8 {
    match (status, body.get("status").and_then(Value::as_str)) {
        (200, _) => EXIT_OK,
        (202, _) => EXIT_PENDING,
        (409, Some("ABORTED" | "ABORTING")) => EXIT_ABORTED,
        _ => EXIT_ERROR,
    }
}

/// Prints a transaction answer; returns the exit code.
fn print_transaction(common: &Common, status: u16, body: &Value) -> u8 {
    if common.json {
        println!("{body}");
        return exit_for(status, body);
    }
    match body.get("status").and_then(Value::as_str) {
        Some(tx_status) => {
            let id = body.get("txId").and_then(Value::as_str).unwrap_or("?");
            println!("{tx_status}  transaction {id}");
            if let Some(code) = body.get("code").and_then(Value::as_str) {
                println!(
                    "  reason: {code}: {}",
                    body.get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                );
            }
            for p in body
                .get("participants")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                // A no with its reason; a yes with how the item is held (reserved, exclusive).
                let vote = match (
                    p.get("vote").and_then(Value::as_str),
                    p.get("reason")
                        .or_else(|| p.get("mode"))
                        .and_then(Value::as_str),
                ) {
                    (Some(v), Some(r)) => format!("{v} ({r})"),
                    (Some(v), None) => v.to_owned(),
                    _ => "-".to_owned(),
                };
                println!(
                    "  {:<10} {:<24} {vote}",
                    p.get("participant").and_then(Value::as_str).unwrap_or("?"),
                    p.get("key").map(Value::to_string).unwrap_or_default()
                );
            }
            if status == 202 {
                println!(
                    "  decided, not finished yet: the sweeper completes it; check with `twopc status {id}`"
                );
            }
        }
        None => print_error(status, body),
    }
    exit_for(status, body)
}

fn print_error(status: u16, body: &Value) {
    let code = body.get("code").and_then(Value::as_str).unwrap_or("error");
    let message = body
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| body.to_string(), str::to_owned);
    eprintln!("error {status} {code}: {message}");
}

/// `twopc submit`: a transaction from a JSON file (or `-` for standard input).
pub async fn submit(common: &Common, file: &PathBuf, key: Option<&str>) -> Result<u8, Failure> {
    let text = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| Failure(format!("reading standard input: {e}")))?;
        s
    } else {
        std::fs::read_to_string(file)
            .map_err(|e| Failure(format!("reading {}: {e}", file.display())))?
    };
    let (status, body) = call(common, "POST", "/transactions", key, Some(text)).await?;
    Ok(print_transaction(common, status, &body))
}

/// Options of `twopc transfer`.
#[derive(Clone, Debug, clap::Args)]
pub struct TransferArgs {
    /// Account to debit.
    #[arg(long)]
    pub from: String,
    /// Account to credit.
    #[arg(long)]
    pub to: String,
    /// Amount (an exact decimal, e.g. 12.50).
    #[arg(long)]
    pub amount: String,
    /// Service holding the accounts.
    #[arg(long, default_value = "accounts")]
    pub participant: String,
    /// Idempotency key (a retry with the same key never transfers twice).
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// Prepare timeout in milliseconds.
    #[arg(long)]
    pub timeout_ms: Option<u64>,
}

/// The body of a transfer: debit (refused below zero) and credit.
pub fn transfer_body(a: &TransferArgs) -> Result<Value, Failure> {
    let amount = Decimal::parse(&a.amount).map_err(|e| Failure(format!("--amount: {e}")))?;
    if amount.is_negative() {
        return Err(Failure(
            "--amount must not be negative: swap --from and --to instead".into(),
        ));
    }
    let n = amount.to_json();
    let negated = Decimal::parse(&format!("-{}", amount.as_str()))
        .map_err(|e| Failure(e.to_string()))?
        .to_json();
    let mut body = json!({"participants": [
        {"participant": a.participant, "key": {"id": a.from}, "op": {"add": {"balance": negated}, "require": {"balance": {"gte": n}}}},
        {"participant": a.participant, "key": {"id": a.to}, "op": {"add": {"balance": n}}}
    ]});
    if let Some(t) = a.timeout_ms {
        body["timeoutMs"] = json!(t);
    }
    Ok(body)
}

/// `twopc transfer`.
pub async fn transfer(common: &Common, a: &TransferArgs) -> Result<u8, Failure> {
    let body = transfer_body(a)?;
    let (status, answer) = call(
        common,
        "POST",
        "/transactions",
        a.idempotency_key.as_deref(),
        Some(body.to_string()),
    )
    .await?;
    Ok(print_transaction(common, status, &answer))
}

/// `twopc status`.
pub async fn status(common: &Common, tx: &str) -> Result<u8, Failure> {
    let (status, body) = call(common, "GET", &format!("/transactions/{tx}"), None, None).await?;
    if status != 200 {
        if common.json {
            println!("{body}");
        } else {
            print_error(status, &body);
        }
        return Ok(EXIT_ERROR);
    }
    print_transaction(common, 200, &body);
    Ok(match body.get("status").and_then(Value::as_str) {
        Some("COMMITTED") => EXIT_OK,
        Some("ABORTED") => EXIT_ABORTED,
        _ => EXIT_PENDING,
    })
}

/// `twopc sweep`: one recovery pass in the running stack.
pub async fn sweep(common: &Common) -> Result<u8, Failure> {
    let (status, body) = call(common, "POST", "/local/sweep", None, None).await?;
    if status != 200 {
        print_error(status, &body);
        return Ok(EXIT_ERROR);
    }
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
pub async fn items(common: &Common, participant: &str) -> Result<u8, Failure> {
    let (status, body) = call(
        common,
        "GET",
        &format!("/local/items/{participant}"),
        None,
        None,
    )
    .await?;
    if status != 200 {
        print_error(status, &body);
        return Ok(EXIT_ERROR);
    }
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
pub async fn get(common: &Common, participant: &str, id: &str) -> Result<u8, Failure> {
    let (status, body) = call(
        common,
        "GET",
        &format!("/local/items/{participant}/{id}"),
        None,
        None,
    )
    .await?;
    if status != 200 {
        if common.json {
            println!("{body}");
        } else {
            print_error(status, &body);
        }
        return Ok(EXIT_ERROR);
    }
    if common.json {
        println!("{body}");
    } else {
        print_item(&body);
    }
    Ok(EXIT_OK)
}
