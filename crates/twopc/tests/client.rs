//! The client library (`twopc-client`) against `twopc serve`: a transfer commits and reads back,
//! an overdraft aborts with its typed reason, refusals are typed by their stable codes, a
//! repeated idempotency key finds the same transaction, a custom participant takes its payload;
//! and the crate's `examples/transfer.rs` runs against the stack.

mod common;

#[allow(dead_code)] // its `main` is the example's own
#[path = "../../client/examples/transfer.rs"]
mod example;

use std::time::Duration;

use common::{call, start_on_shared};
use serde_json::{Value, json};
use twopc_client::{
    AbortCode, Client, Config, Decimal, Error, ErrorCode, Mode, Op, Transaction, TxStatus, Vote,
    key,
};

fn d(text: &str) -> Decimal {
    Decimal::parse(text).expect("a decimal")
}

fn client(url: &str) -> Client {
    Client::new(Config::new(url).timeout(Duration::from_secs(30))).expect("a client")
}

/// A transfer answered once applied (read-your-writes: the tests read balances right after).
fn transfer(from: &str, to: &str, amount: &str) -> Transaction {
    Transaction::new()
        .timeout_ms(5000)
        .wait_applied()
        .table(
            "accounts",
            key("id", from),
            Op::debit("balance", &d(amount)),
        )
        .table("accounts", key("id", to), Op::credit("balance", &d(amount)))
}

/// The account's balance, canonical (the store keeps the spelling of the sums: `74.50`).
async fn balance(url: &str, id: &str) -> Decimal {
    let (status, body) = call(
        url,
        "GET",
        &format!("/local/items/accounts/{id}"),
        None,
        None,
    )
    .await
    .expect("item");
    assert_eq!(status, 200, "{body}");
    d(&body["item"]["balance"].to_string()).canonical()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_commits_aborts_and_is_refused_with_typed_codes() {
    let (serve, _data) = start_on_shared("client", &[]).await;
    let c = client(&serve.url);

    // A transfer commits, with exact decimals, and reads back as committed.
    let done = c
        .submit(&transfer("alice", "carol", "25.50"), None)
        .await
        .expect("an answer");
    assert_eq!(done.status, TxStatus::Committed, "{}", done.body);
    assert_eq!(done.participants.len(), 2);
    // Two plain tables: one native write (the default mode, auto), which holds each item
    // exclusively for its one step.
    assert_eq!(done.participants[0].vote, Some(Vote::yes(Mode::Exclusive)));
    let read = c.status(&done.tx_id).await.expect("status");
    assert_eq!(
        (read.tx_id.clone(), read.status),
        (done.tx_id.clone(), TxStatus::Committed)
    );
    assert_eq!(balance(&serve.url, "alice").await, d("74.5"));
    assert_eq!(balance(&serve.url, "carol").await, d("25.5"));

    // An overdraft aborts: an outcome, with the typed reason of the participant that said no.
    let aborted = c
        .submit(&transfer("carol", "bob", "1000"), None)
        .await
        .expect("an answer");
    assert_eq!(aborted.status, TxStatus::Aborted);
    let abort = aborted.abort.as_ref().expect("why");
    assert_eq!(abort.code, AbortCode::Condition, "{}", abort.message);
    assert!(matches!(
        aborted.participants[0].vote,
        Some(Vote::No { .. })
    ));
    let read = c.status(&aborted.tx_id).await.expect("status");
    assert_eq!(read.abort.map(|a| a.code), Some(AbortCode::Condition));
    assert_eq!(
        balance(&serve.url, "carol").await,
        d("25.5"),
        "nothing moved"
    );

    // Refusals carry the API's stable codes; nothing is retried.
    let nowhere = Transaction::new().table("nope", key("id", "a"), Op::credit("n", &d("1")));
    let e = c.submit(&nowhere, None).await.unwrap_err();
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
    let bad_op = Transaction::new().table("accounts", key("id", "alice"), Op::new());
    let e = c.submit(&bad_op, None).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::InvalidOperation), "{e}");
    let custom_with_op =
        Transaction::new().table("payments", key("id", "x"), Op::credit("n", &d("1")));
    let e = c.submit(&custom_with_op, None).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::WrongParticipantKind), "{e}");
    let e = c.status(&twopc_client::TxId::random()).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::NotFound), "{e}");

    // A custom participant is given its payload (numbers exact); card 0002 is declined.
    let amount: Value = serde_json::from_str("9.99").expect("an exact number");
    let order = |card: &str| {
        Transaction::new()
            .wait_applied()
            .table("accounts", key("id", "bob"), Op::debit("balance", &d("10")))
            .custom("payments", json!({"card": card, "amount": amount}))
    };
    let paid = c.submit(&order("4242"), None).await.expect("an answer");
    assert_eq!(paid.status, TxStatus::Committed, "{}", paid.body);
    assert_eq!(paid.participants[1].key, None);
    let declined = c.submit(&order("0002"), None).await.expect("an answer");
    assert_eq!(declined.abort.map(|a| a.code), Some(AbortCode::Condition));

    // The crate's example, against the same stack.
    let outcome = example::transfer(&serve.url, "bob", "alice", "0.5")
        .await
        .expect("the example's transfer");
    assert_eq!(outcome.status, TxStatus::Committed);
    assert_eq!(balance(&serve.url, "alice").await, d("75"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_idempotency_key_finds_the_same_transaction() {
    let (serve, _data) = start_on_shared("client-key", &[]).await;
    let c = client(&serve.url);
    let tx = transfer("alice", "bob", "1.25");

    // GIVEN a transfer submitted with a key
    let first = c
        .submit(&tx, Some("client-order-1"))
        .await
        .expect("an answer");
    assert_eq!(first.status, TxStatus::Committed);
    // WHEN the same body is submitted again with the same key (a client's retry)
    let again = c
        .submit(&tx, Some("client-order-1"))
        .await
        .expect("an answer");
    // THEN it is the same transaction, applied once
    assert_eq!(again.tx_id, first.tx_id);
    assert_eq!(again.status, TxStatus::Committed);
    assert_eq!(
        first.tx_id,
        twopc_client::TxId::for_idempotency_key("client-order-1"),
        "the id the client names in Undetermined"
    );
    assert_eq!(balance(&serve.url, "alice").await, d("98.75"));

    // AND the key with another body is refused, typed.
    let other = transfer("alice", "bob", "2");
    let e = c.submit(&other, Some("client-order-1")).await.unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Api {
                status: 409,
                code: ErrorCode::IdempotencyKeyReused,
                ..
            }
        ),
        "{e}"
    );
    let e = c.submit(&other, Some("has space")).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::InvalidIdempotencyKey), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_stack_answers_committed_then_applies_and_waits_for_applied_on_request() {
    let (serve, _data) = start_on_shared("client-staged", &["--commit-mode", "staged"]).await;
    let c = client(&serve.url);
    // Answered once decided: committed; applied now or a moment later (after the answer).
    let done = c
        .submit(&transfer("alice", "carol", "1"), None)
        .await
        .expect("an answer");
    assert!(done.is_committed(), "{}", done.body);
    assert_eq!(done.body["outcome"], "committed");
    let applied = c
        .wait(&done.tx_id, Duration::from_secs(20))
        .await
        .expect("applied");
    assert_eq!(applied.status, TxStatus::Committed);
    // Asked to wait for the applies: the balances already show it when the answer comes.
    let waited = c
        .submit(&transfer("alice", "carol", "2").wait_applied(), None)
        .await
        .expect("an answer");
    assert!(waited.is_committed() && waited.applied, "{}", waited.body);
    assert_eq!(waited.status, TxStatus::Committed);
    assert_eq!(balance(&serve.url, "alice").await, d("97"));
    assert_eq!(balance(&serve.url, "carol").await, d("3"));
    // An overdraft is answered aborted, nothing applied.
    let aborted = c
        .submit(&transfer("carol", "bob", "1000").wait_applied(), None)
        .await
        .expect("an answer");
    assert!(!aborted.is_committed());
    assert_eq!(aborted.abort.map(|a| a.code), Some(AbortCode::Condition));
    assert_eq!(balance(&serve.url, "carol").await, d("3"));
}
