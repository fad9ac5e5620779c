//! The retry rule against a scripted endpoint: what is repeated (503, a dropped connection, a
//! timeout) carries the first attempt's Idempotency-Key; what is an answer or a refusal is not
//! repeated; retries spent without an answer are `Undetermined`, naming the key's transaction;
//! a `202` is waited for.

mod common;

use std::time::Duration;

use common::{Reply, Seen, TX, answer, serve};
use twopc_client::{
    AbortCode, Client, Config, Decimal, Error, ErrorCode, Op, Transaction, TxId, TxStatus, key,
};

fn client(url: &str) -> Client {
    let config = Config::new(url)
        .timeout(Duration::from_millis(500))
        .retries(3, Duration::from_millis(1));
    Client::new(config).expect("a client")
}

fn transfer() -> Transaction {
    let amount = Decimal::parse("10.00").expect("amount");
    Transaction::new()
        .table(
            "accounts",
            key("id", "alice"),
            Op::debit("balance", &amount),
        )
        .table("accounts", key("id", "bob"), Op::credit("balance", &amount))
}

fn keys(log: &common::Log) -> Vec<String> {
    let log = log.lock().expect("log");
    log.iter()
        .map(|s: &Seen| s.header("idempotency-key").expect("a key").to_owned())
        .collect()
}

#[tokio::test]
async fn a_503_is_retried_with_the_same_generated_idempotency_key() {
    let (url, log) = serve(|n, _| match n {
        0 => Reply::Answer(503, r#"{"code":"unavailable","message":"retry"}"#.into()),
        _ => Reply::Answer(200, answer("COMMITTED")),
    })
    .await;
    let outcome = client(&url)
        .submit(&transfer(), None)
        .await
        .expect("committed");
    assert_eq!(outcome.status, TxStatus::Committed);
    assert_eq!(outcome.tx_id.as_str(), TX);
    let keys = keys(&log);
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1], "the retry reuses the key");
    let seen = log.lock().expect("log")[0].clone();
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/transactions")
    );
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert!(
        String::from_utf8_lossy(&seen.body).contains(r#""add":{"balance":-10.00}"#),
        "exact decimals on the wire"
    );
}

#[tokio::test]
async fn a_dropped_connection_is_retried_with_the_same_key() {
    let (url, log) = serve(|n, _| match n {
        0 => Reply::Drop,
        _ => Reply::Answer(200, answer("COMMITTED")),
    })
    .await;
    let outcome = client(&url)
        .submit(&transfer(), Some("order-42"))
        .await
        .expect("committed");
    assert_eq!(outcome.status, TxStatus::Committed);
    assert_eq!(keys(&log), ["order-42", "order-42"]);
}

#[tokio::test]
async fn a_timeout_is_retried_with_the_same_key() {
    let (url, log) = serve(|n, _| match n {
        0 => Reply::Stall(Duration::from_secs(2)),
        _ => Reply::Answer(200, answer("COMMITTED")),
    })
    .await;
    let outcome = client(&url)
        .submit(&transfer(), Some("order-43"))
        .await
        .expect("committed");
    assert_eq!(outcome.status, TxStatus::Committed);
    assert_eq!(keys(&log), ["order-43", "order-43"]);
}

#[tokio::test]
async fn a_refusal_is_typed_and_not_retried() {
    let (url, log) = serve(|_, _| {
        Reply::Answer(
            400,
            r#"{"code":"unknown_participant","message":"participants[0].participant: no service named \"nope\""}"#.into(),
        )
    })
    .await;
    let e = client(&url).submit(&transfer(), None).await.unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Api {
                status: 400,
                code: ErrorCode::UnknownParticipant,
                ..
            }
        ),
        "{e}"
    );
    assert!(!e.is_retryable());
    assert_eq!(log.lock().expect("log").len(), 1);
}

#[tokio::test]
async fn a_key_reused_for_another_body_is_a_refusal_not_an_abort() {
    let (url, _) = serve(|_, _| {
        Reply::Answer(
            409,
            r#"{"code":"idempotency_key_reused","message":"use a new key"}"#.into(),
        )
    })
    .await;
    let e = client(&url)
        .submit(&transfer(), Some("k"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::IdempotencyKeyReused), "{e}");
}

#[tokio::test]
async fn an_abort_is_an_outcome_with_its_typed_reason() {
    let body = format!(
        r#"{{"txId":"{TX}","status":"ABORTED","code":"condition","message":"balance gte 10 (is 0)","participants":[]}}"#
    );
    let (url, _) = serve(move |_, _| Reply::Answer(409, body.clone())).await;
    let outcome = client(&url)
        .submit(&transfer(), None)
        .await
        .expect("an outcome");
    assert_eq!(outcome.status, TxStatus::Aborted);
    let abort = outcome.abort.expect("why");
    assert_eq!(abort.code, AbortCode::Condition);
    assert_eq!(abort.message, "balance gte 10 (is 0)");
}

#[tokio::test]
async fn retries_spent_without_an_answer_are_undetermined_naming_the_keys_transaction() {
    let (url, log) = serve(|_, _| {
        Reply::Answer(
            503,
            r#"{"code":"unavailable","message":"retry with the same key"}"#.into(),
        )
    })
    .await;
    let e = client(&url)
        .submit(&transfer(), Some("order-44"))
        .await
        .unwrap_err();
    let Error::Undetermined {
        tx_id,
        idempotency_key,
        last,
    } = e
    else {
        panic!("expected Undetermined, got {e}");
    };
    assert_eq!(tx_id, TxId::for_idempotency_key("order-44"));
    assert_eq!(idempotency_key, "order-44");
    assert_eq!(last.code(), Some(&ErrorCode::Unavailable));
    assert_eq!(
        keys(&log),
        ["order-44"; 4],
        "the first attempt and 3 retries"
    );
}

#[tokio::test]
async fn a_connection_never_opened_is_a_transport_error_not_undetermined() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let e = client(&format!("http://127.0.0.1:{port}"))
        .submit(&transfer(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Transport {
                maybe_received: false,
                ..
            }
        ),
        "nothing was sent: {e}"
    );
}

#[tokio::test]
async fn a_202_is_waited_for_until_the_transaction_finishes() {
    let (url, log) = serve(|n, seen| match (n, seen.method.as_str()) {
        (0, "POST") => Reply::Answer(202, answer("COMMITTING")),
        (1, "GET") => Reply::Answer(200, answer("COMMITTING")),
        (_, "GET") => Reply::Answer(200, answer("COMMITTED")),
        _ => Reply::Answer(500, "{}".into()),
    })
    .await;
    let c = client(&url);
    let first = c.submit(&transfer(), None).await.expect("decided");
    assert!(first.is_committed() && !first.is_finished());
    let done = c
        .wait(&first.tx_id, Duration::from_secs(10))
        .await
        .expect("finished");
    assert_eq!(done.status, TxStatus::Committed);
    let log = log.lock().expect("log");
    assert_eq!(log.len(), 3);
    assert_eq!(log[2].path, format!("/transactions/{TX}"));
}

#[tokio::test]
async fn wait_gives_up_at_its_limit_naming_the_last_status() {
    let (url, _) = serve(|_, _| Reply::Answer(200, answer("COMMITTING"))).await;
    let tx = TxId::parse(TX).expect("id");
    let e = client(&url)
        .wait(&tx, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Unfinished {
                status: TxStatus::Committing,
                ..
            }
        ),
        "{e}"
    );
}

#[tokio::test]
async fn status_of_an_unknown_transaction_is_not_found() {
    let (url, _) = serve(|_, _| {
        Reply::Answer(
            404,
            r#"{"code":"not_found","message":"no transaction"}"#.into(),
        )
    })
    .await;
    let e = client(&url).status(&TxId::random()).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::NotFound));
}
