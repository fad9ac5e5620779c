//! The client commands. `submit`, `transfer` and `status` speak the HTTP API through
//! `twopc-client` (HTTPS, a per-request timeout, safe retries with one Idempotency-Key, SigV4 for
//! a deployed stack); `sweep`, `accounts`, `items` and `get` use the local stack's own routes
//! (`/local/...`), which a deployment does not have: pointed at an `https` URL they say so.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use twopc_client::{Client, Config, Decided, Decimal, Error, Op, Outcome, Transaction, TxId, key};

/// Exit code: committed, or the command succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit code: the transaction aborted (HTTP 409 with status ABORTED).
pub const EXIT_ABORTED: u8 = 1;
/// Exit code: bad input, unreachable stack, or any other error.
pub const EXIT_ERROR: u8 = 2;
/// Exit code: not decided yet (outcome `pending`); its coordinator or the sweeper ends it.
pub const EXIT_PENDING: u8 = 3;

/// When a submitted transaction is answered (`--wait`).
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct WaitArg {
    /// `applied`: once every participant applied the outcome, so that what you read next shows
    /// it; `decided`: as soon as the outcome is decided (a staged commit's one-round answer; the
    /// rest finishes in the background).
    #[arg(long, value_enum, default_value_t = Wait::Applied)]
    pub wait: Wait,
}

/// See [`WaitArg`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Wait {
    /// Answered once decided.
    Decided,
    /// Answered once applied everywhere.
    Applied,
}

impl Wait {
    /// The API's `wait` field.
    fn as_str(self) -> &'static str {
        match self {
            Wait::Decided => "decided",
            Wait::Applied => "applied",
        }
    }
}

/// Where the stack is, how to reach it and how to print.
#[derive(Clone, Debug, clap::Args)]
pub struct Common {
    /// Base URL of the HTTP API: the local stack, or a deployed one
    /// (`https://{api}.execute-api.{region}.amazonaws.com/{stage}`).
    #[arg(
        long,
        global = true,
        default_value = "http://127.0.0.1:3000",
        env = "TWOPC_URL"
    )]
    pub url: String,
    /// Print JSON (the API's answer, or `{"code", "message"}` for an error) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// How requests are signed: `auto` signs `https` URLs with SigV4 (API Gateway's IAM
    /// authorisation; credentials and region from the standard AWS chain), `sigv4` always,
    /// `none` never.
    #[arg(long, global = true, value_enum, default_value_t = Sign::Auto)]
    pub sign: Sign,
    /// The API's region for SigV4 (default: from the URL's host, else the AWS chain).
    #[arg(long, global = true, env = "TWOPC_REGION")]
    pub region: Option<String>,
    /// Each request's time limit, in milliseconds (retried with the same Idempotency-Key).
    #[arg(long, global = true, default_value_t = 30_000)]
    pub request_timeout_ms: u64,
}

/// How requests are signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Sign {
    /// SigV4 for `https` URLs, nothing for `http`.
    Auto,
    /// Always SigV4.
    Sigv4,
    /// Never.
    None,
}

impl Common {
    /// Whether the URL is a deployed stack's (`https`): the local stack serves `http`.
    fn is_deployed(&self) -> bool {
        self.url.starts_with("https://")
    }

    fn client(&self) -> Result<Client, Failure> {
        let mut config = Config::new(self.url.clone())
            .timeout(Duration::from_millis(self.request_timeout_ms.max(1)));
        let sign = match self.sign {
            Sign::Auto => self.is_deployed(),
            Sign::Sigv4 => true,
            Sign::None => false,
        };
        if sign {
            let mut sigv4 = twopc_client::SigV4::from_env();
            if let Some(region) = &self.region {
                sigv4 = sigv4.region(region.clone());
            }
            config = config.sigv4(sigv4);
        }
        Client::new(config).map_err(|e| self.failed(e))
    }

    /// A client error as the command's failure.
    fn failed(&self, e: Error) -> Failure {
        let code = match &e {
            Error::Api { code, .. } => code.as_str().to_owned(),
            Error::Undetermined { .. } => "undetermined".into(),
            Error::Timeout { .. } => "timeout".into(),
            Error::Transport { .. } => "unreachable".into(),
            Error::Protocol { .. } => "unexpected_answer".into(),
            Error::Unfinished { .. } => "unfinished".into(),
            Error::Signing { .. } => "signing".into(),
            Error::Invalid(_) => "invalid_input".into(),
        };
        let mut message = e.to_string();
        if matches!(e, Error::Transport { .. } | Error::Timeout { .. }) && !self.is_deployed() {
            message = format!(
                "cannot reach the local stack at {}: {message}. Is `twopc serve` (make run) running? Use --url to point elsewhere.",
                self.url
            );
        }
        let mut body = json!({"code": code, "message": message});
        match &e {
            Error::Api {
                body: answer,
                status,
                ..
            } => {
                body = answer.clone();
                if body.get("code").is_none() {
                    body = json!({"code": code, "message": message});
                }
                return Failure::answered(*status, body);
            }
            Error::Undetermined {
                tx_id,
                idempotency_key,
                ..
            } => {
                body["txId"] = json!(tx_id);
                body["idempotencyKey"] = json!(idempotency_key);
            }
            _ => {}
        }
        Failure::with(body)
    }

    /// Refuses a local-only command against a deployed stack.
    fn local_only(&self, command: &str, instead: &str) -> Result<(), Failure> {
        if self.is_deployed() {
            return Err(Failure::new(
                "local_only",
                format!(
                    "`twopc {command}` works with the local stack (twopc serve) only: {} is a deployed stack. {instead}",
                    self.url
                ),
            ));
        }
        Ok(())
    }
}

/// A failed command: a stable `code` and a message that says what to do, as JSON
/// (`{"code", "message", ...}`), and the HTTP status when the API answered it.
#[derive(Debug)]
pub struct Failure {
    /// The JSON (`code`, `message`, and what else the API said).
    pub body: Value,
    /// The API's status, when it answered.
    pub status: Option<u16>,
}

impl Failure {
    /// A failure of the command itself.
    pub fn new(code: &str, message: impl Into<String>) -> Failure {
        Failure::with(json!({"code": code, "message": message.into()}))
    }

    fn with(body: Value) -> Failure {
        Failure { body, status: None }
    }

    fn answered(status: u16, body: Value) -> Failure {
        Failure {
            body,
            status: Some(status),
        }
    }

    /// Prints it: the JSON on standard output with `--json`, else a line on standard error.
    pub fn print(&self, json: bool) {
        if json {
            println!("{}", self.body);
            return;
        }
        let code = self
            .body
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("error");
        let message = self
            .body
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| self.body.to_string(), str::to_owned);
        match self.status {
            Some(status) => eprintln!("error {status} {code}: {message}"),
            None => eprintln!("twopc: {message}"),
        }
    }
}

/// A local route (`/local/...`): the status and the JSON answer.
async fn call_local(common: &Common, method: &str, path: &str) -> Result<(u16, Value), Failure> {
    let client = HttpClient::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let url = format!("{}{path}", common.url.trim_end_matches('/'));
    let req = hyper::Request::builder()
        .method(method)
        .uri(&url)
        .body(Full::new(Bytes::new()))
        .map_err(|e| Failure::new("invalid_input", format!("bad URL {url:?}: {e}")))?;
    let request = client.request(req);
    let resp = tokio::time::timeout(Duration::from_millis(common.request_timeout_ms.max(1)), request)
        .await
        .map_err(|_| {
            Failure::new(
                "timeout",
                format!("{url}: no answer within {} ms", common.request_timeout_ms),
            )
        })?
        .map_err(|e| {
            Failure::new(
                "unreachable",
                format!("cannot reach the local stack at {}: {e}. Is `twopc serve` (make run) running? Use --url to point elsewhere.", common.url),
            )
        })?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| Failure::new("unreachable", format!("reading the answer: {e}")))?
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    if status != 200 {
        let body = if value.get("code").is_some() {
            value
        } else {
            json!({"code": "error", "message": value})
        };
        return Err(Failure::answered(status, body));
    }
    Ok((status, value))
}

fn exit_for(outcome: Decided) -> u8 {
    match outcome {
        Decided::Committed => EXIT_OK,
        Decided::Aborted => EXIT_ABORTED,
        Decided::Pending => EXIT_PENDING,
    }
}

/// Prints a transaction as the API answered it; returns the exit code.
fn print_outcome(common: &Common, outcome: &Outcome) -> u8 {
    if common.json {
        println!("{}", outcome.body);
        return exit_for(outcome.outcome);
    }
    let body = &outcome.body;
    let id = &outcome.tx_id;
    println!(
        "{}  transaction {id}",
        outcome.outcome.as_str().to_ascii_uppercase()
    );
    if let Some(abort) = &outcome.abort {
        println!("  reason: {}: {}", abort.code.as_str(), abort.message);
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
    match (outcome.outcome, outcome.applied) {
        (Decided::Pending, _) => println!(
            "  not decided yet ({}): its coordinator or the sweeper ends it; check with `twopc status {id}`",
            outcome.status
        ),
        (_, false) => println!(
            "  decided, not applied everywhere yet ({}): it finishes in the background; check with `twopc status {id}`",
            outcome.status
        ),
        (_, true) => {}
    }
    exit_for(outcome.outcome)
}

/// `twopc submit`: a transaction from a JSON file (or `-` for standard input).
pub async fn submit(
    common: &Common,
    file: &PathBuf,
    key: Option<&str>,
    wait: WaitArg,
) -> Result<u8, Failure> {
    let text = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| Failure::new("invalid_input", format!("reading standard input: {e}")))?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| {
            Failure::new("invalid_input", format!("reading {}: {e}", file.display()))
        })?
    };
    let body: Value = serde_json::from_str(&text).map_err(|e| {
        let from = if file.as_os_str() == "-" {
            "standard input".to_owned()
        } else {
            file.display().to_string()
        };
        Failure::new(
            "invalid_json",
            format!("{from} is not JSON ({e}); expected a transaction, README \"A transaction\""),
        )
    })?;
    // The body's own `wait` wins over the option's default.
    let mut body = body;
    if let Some(fields) = body.as_object_mut() {
        fields
            .entry("wait")
            .or_insert_with(|| Value::from(wait.wait.as_str()));
    }
    let client = common.client()?;
    let outcome = client
        .submit_json(&body, key)
        .await
        .map_err(|e| common.failed(e))?;
    Ok(print_outcome(common, &outcome))
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
    #[command(flatten)]
    pub wait: WaitArg,
}

/// The transaction of a transfer: debit (refused below zero) and credit.
pub fn transfer_tx(a: &TransferArgs) -> Result<Transaction, Failure> {
    let amount = Decimal::parse(&a.amount)
        .map_err(|e| Failure::new("invalid_number", format!("--amount: {e}")))?;
    if amount.is_negative() {
        return Err(Failure::new(
            "invalid_number",
            "--amount must not be negative: swap --from and --to instead",
        ));
    }
    let mut tx = Transaction::new()
        .table(
            &a.participant,
            key("id", a.from.as_str()),
            Op::debit("balance", &amount),
        )
        .table(
            &a.participant,
            key("id", a.to.as_str()),
            Op::credit("balance", &amount),
        );
    if let Some(t) = a.timeout_ms {
        tx = tx.timeout_ms(t);
    }
    if a.wait.wait == Wait::Applied {
        tx = tx.wait_applied();
    }
    Ok(tx)
}

/// `twopc transfer`.
pub async fn transfer(common: &Common, a: &TransferArgs) -> Result<u8, Failure> {
    let tx = transfer_tx(a)?;
    let client = common.client()?;
    let outcome = client
        .submit(&tx, a.idempotency_key.as_deref())
        .await
        .map_err(|e| common.failed(e))?;
    Ok(print_outcome(common, &outcome))
}

/// `twopc status`.
pub async fn status(common: &Common, tx: &str) -> Result<u8, Failure> {
    let tx = TxId::parse(tx).map_err(|e| Failure::new("invalid_tx_id", format!("{tx:?}: {e}")))?;
    let client = common.client()?;
    let outcome = client.status(&tx).await.map_err(|e| common.failed(e))?;
    Ok(print_outcome(common, &outcome))
}

/// The demo items of the deployed stack (`template.yaml`'s services `accounts` and `wallets`),
/// which docs/deploy.md's examples move money between (curl: alice's account to bob's
/// wallet; the CLI: alice's account to bob's).
const SEED: &[(&str, &str, &str, &str)] = &[
    ("accounts", "alice", "Alice", "200"),
    ("accounts", "bob", "Bob", "0"),
    ("wallets", "bob", "Bob", "0"),
];

/// `twopc seed`: creates the demo items through the API, in one transaction of `put`s (so a
/// deployed stack, which has no other way in, can be seeded by anyone allowed to invoke it).
/// Repeated, it changes nothing: the same idempotency key answers the first outcome, and once
/// that has expired the `put`s find the items and vote `condition`.
pub async fn seed(common: &Common) -> Result<u8, Failure> {
    let mut tx = Transaction::new();
    for (participant, id, owner, balance) in SEED {
        let balance = Decimal::parse(balance)
            .map_err(|e| Failure::new("invalid_number", format!("{balance:?}: {e}")))?;
        tx = tx.table(
            participant,
            key("id", *id),
            Op::put([
                ("owner".to_owned(), json!(owner)),
                ("balance".to_owned(), balance.to_json()),
            ]),
        );
    }
    let client = common.client()?;
    let outcome = client
        .submit(&tx.wait_applied(), Some("twopc-seed-demo-items"))
        .await
        .map_err(|e| common.failed(e))?;
    let there = outcome
        .abort
        .as_ref()
        .is_some_and(|a| a.code == twopc_client::AbortCode::Condition);
    if there && !common.json {
        println!("the demo items exist already: nothing changed (seed creates all or none)");
        return Ok(EXIT_OK);
    }
    if outcome.outcome == Decided::Committed && !common.json {
        for (participant, id, _, balance) in SEED {
            println!("seeded {participant} {{\"id\":\"{id}\"}} balance {balance}");
        }
        return Ok(EXIT_OK);
    }
    Ok(if there {
        EXIT_OK
    } else {
        print_outcome(common, &outcome)
    })
}

/// What `twopc pending` lists.
#[derive(Clone, Debug, clap::Args)]
pub struct PendingArgs {
    /// Only transactions past their deadline (what the StuckTransactions alarm counts).
    #[arg(long)]
    pub overdue: bool,
    /// Most transactions a page (1 to 100).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: Option<u32>,
    /// Start after a previous page (its `next`).
    #[arg(long)]
    pub next: Option<String>,
}

/// `twopc pending`: unfinished transactions, oldest deadline first (`GET
/// /transactions?status=pending`), one page; the local stack's or a deployed one's.
pub async fn pending(common: &Common, args: &PendingArgs) -> Result<u8, Failure> {
    let client = common.client()?;
    let page = client
        .pending(args.overdue, args.limit, args.next.as_deref())
        .await
        .map_err(|e| common.failed(e))?;
    if common.json {
        let mut body = json!({
            "transactions": page.transactions.iter().map(|t| t.body.clone()).collect::<Vec<_>>(),
        });
        if let Some(next) = &page.next {
            body["next"] = json!(next);
        }
        println!("{body}");
        return Ok(EXIT_OK);
    }
    if page.transactions.is_empty() {
        println!(
            "no {} transaction",
            if args.overdue { "overdue" } else { "pending" }
        );
    }
    for t in &page.transactions {
        let deadline = t.body.get("deadline").and_then(Value::as_u64).unwrap_or(0);
        println!(
            "{:<11} {}  deadline {deadline}  {} participant(s)",
            t.status.as_str(),
            t.tx_id,
            t.participants.len()
        );
    }
    if let Some(next) = &page.next {
        println!(
            "more: twopc pending{} --next {next}",
            if args.overdue { " --overdue" } else { "" }
        );
    }
    Ok(EXIT_OK)
}

/// `twopc sweep`: one recovery pass in the running local stack.
pub async fn sweep(common: &Common) -> Result<u8, Failure> {
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
pub async fn items(common: &Common, participant: &str) -> Result<u8, Failure> {
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
pub async fn get(common: &Common, participant: &str, id: &str) -> Result<u8, Failure> {
    common.local_only("get", READ_ITEMS_IN_AWS)?;
    let (_, body) = call_local(common, "GET", &format!("/local/items/{participant}/{id}")).await?;
    if common.json {
        println!("{body}");
    } else {
        print_item(&body);
    }
    Ok(EXIT_OK)
}
