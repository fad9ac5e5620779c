//! Transfers through the HTTP API, closed loop at a fixed number in flight, among the run's
//! accounts: each one retried until it commits (a new transaction after an abort, the same
//! `Idempotency-Key` after an error or a 503), each committed one timed from request to answer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};

use super::http::{Api, wall_ms};

/// Attempts (aborts and errors together) before a transfer is given up.
const MAX_ATTEMPTS: u32 = 50;

/// A committed transfer.
#[derive(Clone, Debug)]
pub struct Transfer {
    /// Its transaction.
    pub tx: String,
    /// When its (last) request was sent.
    pub sent: Instant,
    /// When the answer was read whole.
    pub answered: Instant,
    /// The same, on the wall clock (ms since the epoch).
    pub answered_wall_ms: u64,
    /// Answered decided but not yet applied everywhere (`applied: false`).
    pub unfinished: bool,
}

impl Transfer {
    /// Request to answer.
    pub fn http(&self) -> Duration {
        self.answered - self.sent
    }
}

/// What a load did.
#[derive(Debug, Default)]
pub struct Load {
    /// The committed transfers, in answer order.
    pub done: Vec<Transfer>,
    /// Transfers given up (each with its last error).
    pub failed: Vec<String>,
    /// Attempts that aborted (retried as new transactions).
    pub aborted_attempts: usize,
    /// Attempts that failed without an answer, or answered 5xx (retried with the same key).
    pub error_attempts: usize,
    /// First request to last answer.
    pub span: Duration,
}

impl Load {
    /// The committed transactions' ids.
    pub fn txs(&self) -> Vec<String> {
        self.done.iter().map(|t| t.tx.clone()).collect()
    }

    /// Committed transfers per second over the load's span.
    pub fn rate(&self) -> f64 {
        per_second(self.done.len(), self.span)
    }
}

/// `n` per `d`, 0 for an empty span.
pub fn per_second(n: usize, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        n as f64 / d.as_secs_f64()
    }
}

/// A transfer of `amount` from one account to another, refused below zero.
pub fn transfer_body(from: &str, to: &str, amount: u64) -> Value {
    json!({"timeoutMs": 10_000, "participants": [
        {"participant": "accounts", "key": {"id": from},
         "op": {"add": {"balance": -i128::from(amount)}, "require": {"balance": {"gte": amount}}}},
        {"participant": "accounts", "key": {"id": to}, "op": {"add": {"balance": amount}}}]})
}

/// The creation of account `id` with `balance`.
pub fn account_body(id: &str, balance: u64) -> Value {
    json!({"participants": [
        {"participant": "accounts", "key": {"id": id}, "op": {"put": {"owner": "twopc-bench live", "balance": balance}}}]})
}

#[derive(Default)]
struct Counters {
    aborted: AtomicUsize,
    errors: AtomicUsize,
}

/// Commits one transaction (`body` makes a fresh body for each new transaction), retrying.
async fn commit(
    api: &Api,
    key: &str,
    body: &(dyn Fn() -> Value + Sync),
    counters: &Counters,
) -> Result<Transfer, String> {
    let mut aborts = 0u32;
    let mut request = body();
    let mut last = String::new();
    for attempt in 0..MAX_ATTEMPTS {
        let idempotency_key = format!("{key}-{aborts}");
        let sent = Instant::now();
        let answer = api
            .call(
                "POST",
                "/transactions",
                Some(&idempotency_key),
                Some(&request),
            )
            .await;
        let answered = Instant::now();
        let answered_wall_ms = wall_ms();
        match answer {
            // A 200 means decided (the staged commit answers before applying: `applied`).
            Ok((200, v)) if v["outcome"] == "committed" => {
                return Ok(Transfer {
                    tx: v["txId"].as_str().unwrap_or_default().to_owned(),
                    sent,
                    answered,
                    answered_wall_ms,
                    unfinished: v["applied"] != true,
                });
            }
            Ok((409, v)) if v["outcome"] == "aborted" => {
                counters.aborted.fetch_add(1, Ordering::Relaxed);
                aborts += 1;
                request = body();
                last = format!("aborted: {v}");
            }
            Ok((status, v)) if status >= 500 || status == 202 => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                last = format!("{status} {v}");
            }
            Ok((status, v)) => return Err(format!("{status} {v}")),
            Err(e) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                last = e;
            }
        }
        let backoff = Duration::from_millis(20 * u64::from(attempt.min(10) + 1));
        tokio::time::sleep(backoff).await; // a retry after an abort or an error
    }
    Err(format!("given up after {MAX_ATTEMPTS} attempts: {last}"))
}

/// Creates `accounts` with `balance` each (one transaction per account; an account that
/// already exists is left as it is).
pub async fn create_accounts(api: &Api, accounts: &[String], balance: u64) -> Load {
    let counters = Counters::default();
    let started = Instant::now();
    let mut load = Load::default();
    for id in accounts {
        let body = || account_body(id, balance);
        match commit(api, &format!("live-account-{id}"), &body, &counters).await {
            Ok(t) => load.done.push(t),
            Err(e) => load.failed.push(format!("creating {id}: {e}")),
        }
    }
    load.span = started.elapsed();
    load.aborted_attempts = counters.aborted.load(Ordering::Relaxed);
    load.error_attempts = counters.errors.load(Ordering::Relaxed);
    load
}

/// `n` committed transfers among `accounts` (random distinct pair, amount 1 to 9), `in_flight`
/// at a time; `tick` is called every `every` with the transfers committed so far.
pub async fn transfers(
    api: &Api,
    accounts: &[String],
    label: &str,
    n: usize,
    in_flight: usize,
    every: Duration,
    tick: &(dyn Fn(&[Transfer]) + Sync),
) -> Load {
    let counters = Counters::default();
    let next = AtomicUsize::new(0);
    let done: Arc<Mutex<Vec<Transfer>>> = Arc::default();
    let failed: Mutex<Vec<String>> = Mutex::default();
    let started = Instant::now();
    let body = || {
        let mut rng = rand::rng();
        let from = rng.random_range(0..accounts.len());
        let to = (from + rng.random_range(1..accounts.len())) % accounts.len();
        transfer_body(&accounts[from], &accounts[to], rng.random_range(1..=9))
    };
    let worker = || async {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            match commit(api, &format!("live-{label}-{i}"), &body, &counters).await {
                Ok(t) => {
                    if let Ok(mut d) = done.lock() {
                        d.push(t);
                    }
                }
                Err(e) => {
                    if let Ok(mut f) = failed.lock() {
                        f.push(e);
                    }
                }
            }
        }
    };
    let workers = futures::future::join_all((0..in_flight.max(1)).map(|_| worker()));
    let ticker = async {
        let mut interval = tokio::time::interval(every);
        interval.tick().await;
        loop {
            interval.tick().await;
            if let Ok(d) = done.lock() {
                tick(&d);
            }
        }
    };
    tokio::select! {
        _ = workers => {}
        () = ticker => {}
    }
    let span = started.elapsed();
    let done = std::mem::take(&mut *done.lock().unwrap_or_else(|p| p.into_inner()));
    Load {
        done,
        failed: failed.into_inner().unwrap_or_default(),
        aborted_attempts: counters.aborted.load(Ordering::Relaxed),
        error_attempts: counters.errors.load(Ordering::Relaxed),
        span,
    }
}
