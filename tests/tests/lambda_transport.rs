//! End to end through the real `lambda` transport: the coordinator (wired as the coordinator
//! function wires it) invokes the participant function's binary, served by `cargo lambda
//! watch`, over the Lambda Invoke API; DynamoDB Local behind both.
//!
//! `accounts` is reached through Lambda, `wallets` in-process (`direct`): one transaction
//! crosses both transports through the dispatcher.

use serde_json::{Value, json};
use twopc_core::record::{Vote, VoteReason};
use twopc_core::status::TxStatus;
use twopc_function::var;
use twopc_runtime::config::{CoordinatorSettings, Settings};
use twopc_runtime::{Clients, LiveCoordinator, coordinator};
use twopc_tests::lambda::{LocalFunction, participant_env};
use twopc_tests::{SubmitToEnd, World, first_no, transfer};

const BIG: &str = "12345678901234567890123456789012345678";

/// The coordinator as the coordinator function builds it, with `accounts` behind `function`.
async fn coordinator_via(w: &World, lambda: &LocalFunction, function: &str) -> LiveCoordinator {
    let services = json!({
        "accounts": {"target": {"transport": "lambda", "function": function},
                     "key": {"hash": {"name": "id", "type": "S"}}},
        "wallets": {"target": {"transport": "direct", "table": w.wallets},
                    "key": {"hash": {"name": "id", "type": "S"}}},
    });
    let env = [
        (var::TRANSACTIONS_TABLE, w.tx_table.clone()),
        (var::SERVICES, services.to_string()),
        (var::DYNAMODB_ENDPOINT, twopc_tests::endpoint()),
        (var::LAMBDA_ENDPOINT, lambda.url.clone()),
        (var::CALL_TIMEOUT_MS, "20000".to_owned()),
    ];
    let config = CoordinatorSettings::from_lookup(|name| {
        env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
    })
    .expect("config");
    coordinator(&config, &Clients::load(&config).await)
}

async fn assert_no_locks(w: &World) {
    for service in ["accounts", "wallets"] {
        for item in w.scan(service).await {
            assert_eq!(item.lock, None, "{service}: {item:?}");
        }
    }
}

#[tokio::test]
async fn a_transfer_through_the_participant_function_commits_and_an_overdraft_aborts() {
    // GIVEN alice in accounts (behind the participant function) and bob in wallets
    let w = World::new().await;
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    let lambda = LocalFunction::start("participant", &participant_env(&w, "accounts")).await;
    let c = coordinator_via(&w, &lambda, "participant").await;

    // WHEN alice sends 30 to bob THEN both sides apply it
    let rec = c
        .submit_to_end(&transfer("alice", "bob", 30), None)
        .await
        .expect("submit");
    assert_eq!(
        rec.status,
        TxStatus::Committed,
        "{rec:?}\n{}",
        lambda.log_text()
    );
    assert!(rec.votes.iter().all(Vote::is_yes), "{:?}", rec.votes);
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("70")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("30")
    );

    // WHEN she tries to send more than she has THEN the participant function votes no and
    // nothing moves
    let rec = c
        .submit_to_end(&transfer("alice", "bob", 1000), None)
        .await
        .expect("submit");
    assert_eq!(rec.status, TxStatus::Aborted, "{rec:?}");
    assert_eq!(
        first_no(&rec),
        Some(VoteReason::Condition),
        "{:?}",
        rec.votes
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("70")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("30")
    );
    assert_no_locks(&w).await;

    // AND every line the function logged while working on the committed transaction carries
    // its id
    let log = lambda.log_text();
    let lines: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|l: &Value| l["message"] == "answered")
        .collect();
    assert!(lines.len() >= 4, "prepare, commit, prepare, abort:\n{log}");
    for line in &lines {
        assert!(line["span"]["txId"].is_string(), "no txId on {line}");
    }
}

#[tokio::test]
async fn a_38_digit_amount_crosses_the_lambda_transport_exactly() {
    let w = World::new().await;
    w.seed("accounts", "alice", json!({"balance": 5})).await;
    w.seed("accounts", "carol", json!({"balance": 0})).await;
    let lambda = LocalFunction::start("participant", &participant_env(&w, "accounts")).await;
    let c = coordinator_via(&w, &lambda, "participant").await;

    // Both items behind the function: the numbers go through the Invoke payload, the Lambda
    // runtime's event parsing and back.
    let body: Value = serde_json::from_str(&format!(
        r#"{{"participants": [
            {{"participant": "accounts", "key": {{"id": "alice"}}, "op": {{"add": {{"balance": -0.1}}}}}},
            {{"participant": "accounts", "key": {{"id": "carol"}}, "op": {{"add": {{"balance": {BIG}}}}}}}]}}"#
    ))
    .expect("json");
    let rec = c.submit_to_end(&body, Some("big-1")).await.expect("submit");
    assert_eq!(
        rec.status,
        TxStatus::Committed,
        "{rec:?}\n{}",
        lambda.log_text()
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("4.9")
    );
    assert_eq!(
        w.attr("accounts", "carol", "balance").await.as_deref(),
        Some(BIG)
    );
}

#[tokio::test]
async fn an_unknown_function_is_an_unreachable_no_vote_and_nothing_stays_locked() {
    let w = World::new().await;
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    let lambda = LocalFunction::start("participant", &participant_env(&w, "accounts")).await;
    let c = coordinator_via(&w, &lambda, "no-such-function").await;

    let rec = c.submit_to_end(&transfer("alice", "bob", 30), None).await;
    // Abort reaches no participant behind the missing function either: the record may stay
    // ABORTING for the sweeper, but it never commits.
    let rec = rec.expect("submit");
    assert!(
        matches!(rec.status, TxStatus::Aborted | TxStatus::Aborting),
        "{rec:?}"
    );
    assert!(
        matches!(
            rec.votes[0],
            Vote::No {
                reason: VoteReason::Unreachable,
                ..
            }
        ),
        "{:?}",
        rec.votes
    );
    assert_eq!(
        w.attr("accounts", "alice", "balance").await.as_deref(),
        Some("100")
    );
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("0")
    );
    // bob's lock (taken in-process) is released by the abort.
    assert_eq!(w.item("wallets", "bob").await.expect("bob").lock, None);
}
