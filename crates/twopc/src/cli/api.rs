//! The commands that speak the HTTP API (`submit`, `transfer`, `status`, `seed`, `pending`),
//! the local stack's or a deployed one's, and how a transaction's answer is printed.

use std::io::Read;
use std::path::PathBuf;

use serde_json::{Value, json};
use twopc_client::{Decimal, Op, Outcome, Transaction, TxAnswer, TxId, key};

use super::{CliFailure, Common, EXIT_ABORTED, EXIT_OK, EXIT_PENDING, WaitArg, WaitFor};

fn exit_for(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Committed => EXIT_OK,
        Outcome::Aborted => EXIT_ABORTED,
        Outcome::Pending => EXIT_PENDING,
    }
}

/// Prints a transaction as the API answered it; returns the exit code.
fn print_outcome(common: &Common, outcome: &TxAnswer) -> u8 {
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
        (Outcome::Pending, _) => println!(
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
) -> Result<u8, CliFailure> {
    let text = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| {
            CliFailure::new("invalid_input", format!("reading standard input: {e}"))
        })?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| {
            CliFailure::new("invalid_input", format!("reading {}: {e}", file.display()))
        })?
    };
    let body: Value = serde_json::from_str(&text).map_err(|e| {
        let from = if file.as_os_str() == "-" {
            "standard input".to_owned()
        } else {
            file.display().to_string()
        };
        CliFailure::new(
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
fn transfer_tx(a: &TransferArgs) -> Result<Transaction, CliFailure> {
    let amount = Decimal::parse(&a.amount)
        .map_err(|e| CliFailure::new("invalid_number", format!("--amount: {e}")))?;
    if amount.is_negative() {
        return Err(CliFailure::new(
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
    if a.wait.wait == WaitFor::Applied {
        tx = tx.wait_applied();
    }
    Ok(tx)
}

/// `twopc transfer`.
pub async fn transfer(common: &Common, a: &TransferArgs) -> Result<u8, CliFailure> {
    let tx = transfer_tx(a)?;
    let client = common.client()?;
    let outcome = client
        .submit(&tx, a.idempotency_key.as_deref())
        .await
        .map_err(|e| common.failed(e))?;
    Ok(print_outcome(common, &outcome))
}

/// `twopc status`.
pub async fn status(common: &Common, tx: &str) -> Result<u8, CliFailure> {
    let tx =
        TxId::parse(tx).map_err(|e| CliFailure::new("invalid_tx_id", format!("{tx:?}: {e}")))?;
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
pub async fn seed(common: &Common) -> Result<u8, CliFailure> {
    let mut tx = Transaction::new();
    for (participant, id, owner, balance) in SEED {
        let balance = Decimal::parse(balance)
            .map_err(|e| CliFailure::new("invalid_number", format!("{balance:?}: {e}")))?;
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
    if outcome.outcome == Outcome::Committed && !common.json {
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
pub async fn pending(common: &Common, args: &PendingArgs) -> Result<u8, CliFailure> {
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
