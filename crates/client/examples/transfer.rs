//! A transfer through the client: `make run` in one terminal, then
//!
//! ```sh
//! cargo run -p twopc-client --example transfer                  # alice -> bob, 10
//! cargo run -p twopc-client --example transfer -- carol bob 1000  # aborts: carol has too little
//! ```
//!
//! `TWOPC_URL` points at another stack (default `http://127.0.0.1:3000`). A deployed stack
//! behind IAM needs the `sigv4` feature and `Config::sigv4` (see the crate's documentation).

use std::process::ExitCode;
use std::time::Duration;

use twopc_client::{Client, Config, Decimal, Error, Op, Transaction, TxAnswer, key};

/// Debits `from` and credits `to` in the `accounts` service, all or nothing, and waits for a
/// decided transaction to finish.
pub async fn transfer(url: &str, from: &str, to: &str, amount: &str) -> Result<TxAnswer, Error> {
    let amount = Decimal::parse(amount).map_err(|e| Error::Invalid(e.to_string()))?;
    let client = Client::new(Config::new(url))?;
    let tx = Transaction::new()
        .table("accounts", key("id", from), Op::debit("balance", &amount))
        .table("accounts", key("id", to), Op::credit("balance", &amount));
    // No key given: the client makes one, and every retry of this submit reuses it.
    let outcome = client.submit(&tx, None).await?;
    if outcome.is_finished() {
        return Ok(outcome);
    }
    client.wait(&outcome.tx_id, Duration::from_secs(30)).await
}

#[tokio::main]
async fn main() -> ExitCode {
    let url = std::env::var("TWOPC_URL").unwrap_or_else(|_| "http://127.0.0.1:3000".into());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [from, to, amount] = match args.as_slice() {
        [] => ["alice", "bob", "10"],
        [f, t, a] => [f.as_str(), t.as_str(), a.as_str()],
        _ => {
            eprintln!("usage: transfer [FROM TO AMOUNT]");
            return ExitCode::from(2);
        }
    };
    match transfer(&url, from, to, amount).await {
        Ok(outcome) => {
            println!("{}  transaction {}", outcome.status, outcome.tx_id);
            if let Some(abort) = &outcome.abort {
                println!("  reason: {}: {}", abort.code, abort.message);
            }
            if outcome.is_committed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("transfer failed: {e}");
            ExitCode::from(2)
        }
    }
}
