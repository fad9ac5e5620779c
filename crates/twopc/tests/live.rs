//! The live side of the local stack, end to end: WebSocket subscribers receive committed
//! changes and outcomes pushed by the stream processor through the gateway's management API;
//! rows reach the data lake files; malformed subscriptions get an error frame; a gone connection
//! is answered 410; the opt-in shared token admits connections beside the stack's own tokens; a
//! subscription's answer says from when every change is pushed, and that holds.

mod common;

use common::{
    call, interrupt, lake_rows, next_json, open, open_with, refused, send, start_on_shared, token,
    transfer, until,
};
use serde_json::json;
use twopc_core::ports::{Clock, SystemClock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_receive_commits_and_outcomes_and_rows_reach_the_lake() {
    let (serve, data) = start_on_shared("live", &[]).await;
    let lake = data.join("lake");

    let mut alice = open_with(
        &serve,
        &token(&data, &["--sub", "alice", "--topic", "accounts/alice"]),
    )
    .await;
    send(&mut alice, json!({"action": "subscribe", "entities": [{"participant": "accounts", "key": {"id": "alice"}}]})).await;
    assert_eq!(next_json(&mut alice).await["type"], "subscribed");
    let mut everything = open_with(&serve, &token(&data, &["--sub", "ops", "--admin"])).await;
    send(&mut everything, json!({"action": "subscribe", "all": true})).await;
    assert_eq!(next_json(&mut everything).await["type"], "subscribed");

    // A malformed message is answered, and the connection stays usable.
    send(
        &mut everything,
        json!({"action": "subscribe", "transactions": ["not-an-id"]}),
    )
    .await;
    let err = next_json(&mut everything).await;
    assert_eq!(
        (err["type"].as_str(), err["code"].as_str()),
        (Some("error"), Some("invalid_subscription")),
        "{err}"
    );

    let (status, body) = call(
        &serve.url,
        "POST",
        "/transactions",
        None,
        Some(transfer("alice", "bob", 10, 5_000)),
    )
    .await
    .expect("commit");
    assert_eq!(status, 200, "{body}");
    let tx = body["txId"].as_str().expect("txId").to_owned();

    let pushed = until(&mut alice, |v| v["type"] == "entity.committed").await;
    assert_eq!(
        (
            pushed["participant"].as_str(),
            &pushed["key"],
            pushed["txId"].as_str()
        ),
        (Some("accounts"), &json!({"id": "alice"}), Some(tx.as_str()))
    );
    assert_eq!(pushed["item"]["balance"], json!(90));
    let outcome = until(&mut everything, |v| v["type"] == "transaction.completed").await;
    assert_eq!(
        (outcome["txId"].as_str(), outcome["status"].as_str()),
        (Some(tx.as_str()), Some("COMMITTED"))
    );

    // The rows land in the lake, partitioned by day.
    let rows = lake_rows(&lake, |rows| {
        let of_tx = rows.iter().filter(|r| r["txid"] == json!(tx));
        of_tx.clone().filter(|r| r["type"] == "item").count() == 2
            && of_tx.clone().any(|r| r["type"] == "transaction")
    })
    .await;
    assert!(!rows.is_empty());

    // The management API answers 410 for a connection that does not exist.
    let (status, _) = call(
        &serve.url,
        "POST",
        "/@connections/nobody",
        None,
        Some(json!({"x": 1})),
    )
    .await
    .expect("post");
    assert_eq!(status, 410);

    // The live page is served.
    let (status, _) = call(&serve.url, "GET", "/", None, None)
        .await
        .expect("page");
    assert_eq!(status, 200);
    assert!(interrupt(serve).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_token_is_an_opt_in_beside_the_stacks_own_tokens() {
    let (serve, data) = start_on_shared("token", &["--ws-token", "s3cret-demo"]).await;
    let (status, body) = refused(&serve, "").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("token_missing")),
        "{body}"
    );
    let (status, _) = refused(&serve, "?token=wrong").await;
    assert_eq!(status, 401, "wrong token: refused");
    let mut ws = open(&serve, "?token=s3cret-demo")
        .await
        .expect("the shared token");
    send(&mut ws, json!({"action": "subscribe", "all": true})).await;
    assert_eq!(next_json(&mut ws).await["type"], "subscribed");
    let mut alice = open_with(
        &serve,
        &token(&data, &["--sub", "alice", "--topic", "accounts/alice"]),
    )
    .await;
    send(&mut alice, json!({"action": "subscribe", "all": true})).await;
    assert_eq!(next_json(&mut alice).await["code"], "topic_forbidden");
    assert!(interrupt(serve).await.success());
}

/// A subscription takes effect when it is answered: its answer says so (`from`, the time it
/// took effect), and every change committed after it is pushed. As a new user does it, many
/// times over: subscribe, wait for the answer, transfer at once, and the push comes, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_committed_after_the_subscription_is_answered_is_pushed() {
    const ROUNDS: usize = 40;
    let (serve, data) = start_on_shared("acked", &[]).await;
    let alice_token = token(&data, &["--sub", "alice", "--topic", "accounts/alice"]);
    for round in 0..ROUNDS {
        let mut alice = open_with(&serve, &alice_token).await;
        let asked_at = SystemClock.now_ms();
        send(&mut alice, json!({"action": "subscribe", "entities": [{"participant": "accounts", "key": {"id": "alice"}}]})).await;
        let ack = next_json(&mut alice).await;
        assert_eq!(
            (ack["type"].as_str(), ack["topics"].as_u64()),
            (Some("subscribed"), Some(1)),
            "{ack}"
        );
        let from = ack["from"]
            .as_u64()
            .unwrap_or_else(|| panic!("the answer says from when: {ack}"));
        let answered_at = SystemClock.now_ms();
        assert!((asked_at..=answered_at).contains(&from), "{ack}");

        let (status, body) = call(
            &serve.url,
            "POST",
            "/transactions",
            None,
            Some(transfer("alice", "bob", 1, 5_000)),
        )
        .await
        .expect("commit");
        assert_eq!(status, 200, "round {round}: {body}");
        let tx = body["txId"].as_str().expect("txId").to_owned();
        let pushed = until(&mut alice, |v| v["type"] == "entity.committed").await;
        assert_eq!(
            (pushed["txId"].as_str(), &pushed["key"]),
            (Some(tx.as_str()), &json!({"id": "alice"})),
            "round {round}: the first change pushed is the transfer made after the answer"
        );
    }
    assert!(interrupt(serve).await.success());
}
