//! `twopc conformance`: the participant SDK's conformance kit played over HTTP against a running
//! service, in any language. It plays every check of `conformance::CHECKS` that needs only
//! messages (`Needs::black_box`): the protocol's duplicates, reorderings and late prepares, and
//! the wire's refusals (unsigned, forged, stale, for another transaction, malformed). Each
//! check runs on its own transactions; whatever one leaves held is aborted after it.
//!
//! [`remote::Remote`] is the kit's view of the service. The checks that need the service's
//! clock, log or failures are left to in-process tests, and the report names them.

mod remote;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde_json::Value;
use twopc_core::message::CompleteRequest;
use twopc_participant_sdk::conformance::{self, CHECKS, Check, Kit};

use self::remote::{Https, Journal, Remote, Sent};
use crate::cli::CliFailure;

/// Exit code: a check failed.
pub const EXIT_FAILED: u8 = 1;

/// Options of `twopc conformance`.
#[derive(Clone, Debug, clap::Args)]
pub struct ConformanceArgs {
    /// The participant's base URL (`POST {url}/prepare|commit|abort`), as TWOPC_SERVICES names it.
    #[arg(long)]
    pub url: String,
    /// A file holding the secret shared with the coordinator (TWOPC_HTTP_SIGNING_SECRET); one
    /// trailing newline is ignored.
    #[arg(long)]
    pub secret_file: PathBuf,
    /// A payload the service holds (votes yes to), as JSON.
    #[arg(long)]
    pub payload: String,
    /// A payload the service refuses as invalid (votes no, reason invalid), as JSON.
    #[arg(long)]
    pub invalid_payload: String,
    /// Each check's time limit, in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    pub check_timeout_ms: u64,
}

/// One check's outcome.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckOutcome {
    /// The check.
    pub name: &'static str,
    /// What it guards against.
    pub guards: &'static str,
    /// Whether the participant passed it.
    pub passed: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The requests sent raw (the wire's checks), each with its answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sent: Vec<Sent>,
}

/// The run's report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConformanceReport {
    /// The participant.
    pub url: String,
    /// The checks played, in order.
    pub checks: Vec<CheckOutcome>,
    /// The checks not played over HTTP (they need the participant in process).
    pub not_played: Vec<&'static str>,
    /// How many passed.
    pub passed: usize,
    /// How many failed.
    pub failed: usize,
}

/// The message of the panic a failed check raised, with where.
static PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Plays every black-box check against the service.
pub async fn run(args: &ConformanceArgs) -> Result<ConformanceReport, CliFailure> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        CliFailure::new("invalid_input", format!("--{what}: {e}"))
    };
    let secret = std::fs::read(&args.secret_file).map_err(|e| {
        CliFailure::new(
            "invalid_input",
            format!("--secret-file {}: {e}", args.secret_file.display()),
        )
    })?;
    let secret = secret.strip_suffix(b"\n").unwrap_or(&secret).to_vec();
    if secret.is_empty() {
        return Err(CliFailure::new(
            "invalid_input",
            "--secret-file: the file is empty",
        ));
    }
    let valid: Value = serde_json::from_str(&args.payload).map_err(|e| bad("payload", &e))?;
    let invalid: Value =
        serde_json::from_str(&args.invalid_payload).map_err(|e| bad("invalid-payload", &e))?;
    if !args.url.starts_with("http://") && !args.url.starts_with("https://") {
        return Err(bad("url", &"expected http://host:port/path or https://..."));
    }
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(rustls::crypto::aws_lc_rs::default_provider())
        .map_err(|e| CliFailure::new("unreachable", format!("the root certificates: {e}")))?
        .https_or_http()
        .enable_http1()
        .build();
    let client: Https = HttpClient::builder(TokioExecutor::new()).build(https);

    // Unreachable is an error of the run, not a failed check: any HTTP answer will do.
    let payloads = [&valid, &invalid];
    let probe = Remote::new(&args.url, &secret, &client, payloads, Arc::default());
    probe
        .post("prepare", &[], vec![])
        .await
        .map_err(|e| CliFailure::new("unreachable", e))?;

    // A failed check panics with what it expected: keep the message for the report instead of
    // printing it as a crash.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut slot) = PANIC.lock() {
            *slot = Some(info.to_string());
        }
    }));
    let mut checks = vec![];
    for check in CHECKS.iter().filter(|c| c.needs.black_box()) {
        // The kit gets one view, the runner another over the same journal: what the check
        // left held is aborted after it, whether it passed, failed or ran out of time.
        let journal = Arc::new(Mutex::new(Journal::default()));
        let remote = Remote::new(&args.url, &secret, &client, payloads, journal.clone());
        let cleanup = Remote::new(&args.url, &secret, &client, payloads, journal);
        checks.push(play(check, remote, &cleanup, args.check_timeout_ms).await);
    }
    std::panic::set_hook(hook);
    let passed = checks.iter().filter(|c| c.passed).count();
    Ok(ConformanceReport {
        url: args.url.clone(),
        failed: checks.len() - passed,
        passed,
        checks,
        not_played: CHECKS
            .iter()
            .filter(|c| !c.needs.black_box())
            .map(|c| c.name)
            .collect(),
    })
}

async fn play(check: &Check, remote: Remote, cleanup: &Remote, timeout_ms: u64) -> CheckOutcome {
    let name = check.name;
    if let Ok(mut slot) = PANIC.lock() {
        *slot = None;
    }
    let task = tokio::spawn(async move { conformance::play(name, Kit::over(remote)).await });
    let failure = match tokio::time::timeout(Duration::from_millis(timeout_ms), task).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(
            PANIC
                .lock()
                .ok()
                .and_then(|mut p| p.take())
                .unwrap_or_else(|| e.to_string()),
        ),
        Err(_) => Some(format!("no result within {timeout_ms} ms")),
    };
    // Whatever the check left held (a prepare it did not end, or a check cut short) is aborted.
    let open: Vec<CompleteRequest> = cleanup
        .journal
        .lock()
        .map(|mut j| std::mem::take(&mut j.open).into_values().collect())
        .unwrap_or_default();
    for req in open {
        let _ = cleanup.complete("abort", &req).await;
    }
    let sent = cleanup
        .journal
        .lock()
        .map(|mut j| std::mem::take(&mut j.sent))
        .unwrap_or_default();
    CheckOutcome {
        name,
        guards: check.guards,
        passed: failure.is_none(),
        failure,
        sent,
    }
}

/// The report for people.
pub fn print(report: &ConformanceReport) {
    println!("twopc conformance: {}", report.url);
    for c in &report.checks {
        println!();
        println!("{}  {}", if c.passed { "PASS" } else { "FAIL" }, c.name);
        println!("      guards against: {}", c.guards);
        for s in &c.sent {
            let answer = match (&s.code, s.status) {
                (_, 0) => "no answer".to_owned(),
                (Some(code), status) => format!("{status} {code}"),
                (None, status) => format!("{status} without a code"),
            };
            println!("      sent {:<8} {:<58} -> {answer}", s.path, s.what);
        }
        if c.passed && !c.sent.is_empty() {
            println!("      each refused, and nothing held afterwards");
        }
        if let Some(why) = &c.failure {
            for line in why.lines() {
                println!("      {line}");
            }
        }
    }
    println!();
    println!(
        "Not played over HTTP (they need the participant in process: the Rust kit runs them): {}",
        report.not_played.join(", ")
    );
    println!(
        "{} passed, {} failed{}",
        report.passed,
        report.failed,
        if report.failed == 0 {
            ""
        } else {
            " (docs/participants.md says what each check expects)"
        }
    );
}
