//! Who may connect to the local stack's WebSocket and what they see, through the real gateway:
//! every refusal of `$connect` with its code, subscriptions outside a token's claims refused,
//! two subscribers each seeing exactly their own changes, and a connection whose token expired
//! receiving nothing more.

mod common;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{
    call, interrupt, next_json, open_with, refused, send, start_on_shared, token, transfer, until,
};
use serde_json::{Value, json};
use twopc_authorizer::local::{self, LocalIssuer};
use twopc_core::ports::{Clock, SystemClock};

fn now() -> u64 {
    SystemClock.now_secs()
}

fn claims() -> Value {
    json!({"iss": local::ISSUER, "aud": local::AUDIENCE, "sub": "mallory", "exp": now() + 600,
           "twopc": {"admin": true}})
}

/// Commits a transfer; its transaction id.
async fn commit(serve: &common::Serve, from: &str, to: &str) -> String {
    let (status, body) = call(
        &serve.url,
        "POST",
        "/transactions",
        None,
        Some(transfer(from, to, 1, 5_000)),
    )
    .await
    .expect("answer");
    assert_eq!(status, 200, "{body}");
    body["txId"].as_str().expect("txId").to_owned()
}

/// The next frame is an `entity.committed` of `id`'s account.
async fn next_change_of(ws: &mut common::Ws, id: &str) {
    let v = next_json(ws).await;
    assert_eq!(
        (v["type"].as_str(), &v["key"]),
        (Some("entity.committed"), &json!({"id": id})),
        "expected {id}'s change next, got {v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_refused_with_a_code_for_each_bad_token() {
    let (serve, data) = start_on_shared("wsrefuse", &[]).await;
    let issuer = LocalIssuer::load_or_create(&data).expect("the stack's key");
    let stranger = LocalIssuer::ephemeral().expect("key");
    let with = |field: &str, v: Value| {
        let mut c = claims();
        c[field] = v;
        c
    };
    let forged = {
        let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        h.kid = Some(issuer.kid().to_owned());
        jsonwebtoken::encode(&h, &claims(), &stranger.encoding_key()).expect("sign")
    };
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "kid": issuer.kid()}).to_string()),
        URL_SAFE_NO_PAD.encode(claims().to_string())
    );
    for (query, code) in [
        (String::new(), "token_missing"),
        ("?token=not-a-jwt".into(), "token_malformed"),
        (format!("?token={forged}"), "token_signature"),
        (
            format!(
                "?token={}",
                issuer
                    .sign(&with("exp", json!(now() - 3_600)))
                    .expect("sign")
            ),
            "token_expired",
        ),
        (
            format!(
                "?token={}",
                issuer
                    .sign(&with("nbf", json!(now() + 3_600)))
                    .expect("sign")
            ),
            "token_not_yet_valid",
        ),
        (
            format!(
                "?token={}",
                issuer
                    .sign(&with("aud", json!("another-api")))
                    .expect("sign")
            ),
            "token_audience",
        ),
        (
            format!(
                "?token={}",
                issuer
                    .sign(&with("iss", json!("https://evil.example")))
                    .expect("sign")
            ),
            "token_issuer",
        ),
        (format!("?token={none}"), "token_algorithm"),
        (
            format!("?token={}", stranger.sign(&claims()).expect("sign")),
            "token_unknown_key",
        ),
    ] {
        let (status, body) = refused(&serve, &query).await;
        assert_eq!((status, body["code"].as_str()), (401, Some(code)), "{body}");
        assert!(
            !body["message"].as_str().unwrap_or_default().contains("eyJ"),
            "no token echoed: {body}"
        );
    }
    // The stack's own token is admitted (the refusals above were not for want of a stack).
    let mut ws = open_with(&serve, &token(&data, &["--sub", "ops", "--admin"])).await;
    send(&mut ws, json!({"action": "subscribe", "all": true})).await;
    assert_eq!(next_json(&mut ws).await["type"], "subscribed");
    assert!(interrupt(serve).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_see_exactly_what_their_tokens_grant() {
    let (serve, data) = start_on_shared("wsgrants", &[]).await;
    let mut alice = open_with(
        &serve,
        &token(&data, &["--sub", "alice", "--topic", "accounts/alice"]),
    )
    .await;
    let mut bob = open_with(
        &serve,
        &token(&data, &["--sub", "bob", "--topic", "accounts/bob"]),
    )
    .await;

    // Topics outside the claims are refused, the whole message, with a stable code.
    for asked in [
        json!({"action": "subscribe", "all": true}),
        json!({"action": "subscribe", "entities": [{"participant": "accounts", "key": {"id": "bob"}}]}),
        json!({"action": "subscribe", "entities": [
            {"participant": "accounts", "key": {"id": "alice"}},
            {"participant": "accounts", "key": {"id": "carol"}}]}),
        json!({"action": "subscribe", "transactions": ["0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69"]}),
    ] {
        send(&mut alice, asked.clone()).await;
        let e = next_json(&mut alice).await;
        assert_eq!(
            (e["type"].as_str(), e["code"].as_str()),
            (Some("error"), Some("topic_forbidden")),
            "{asked}: {e}"
        );
    }
    for (ws, id) in [(&mut alice, "alice"), (&mut bob, "bob")] {
        send(ws, json!({"action": "subscribe", "entities": [{"participant": "accounts", "key": {"id": id}}]})).await;
        assert_eq!(next_json(ws).await["type"], "subscribed");
    }

    // GIVEN a change of bob's, then one of alice's, then bob's again (carol is the other side),
    // each made once the previous one was received: pushes of one stream go batch after batch
    // (DynamoDB Local: one shard per table), so a frame pushed in error would arrive first.
    commit(&serve, "bob", "carol").await;
    next_change_of(&mut bob, "bob").await;
    commit(&serve, "alice", "carol").await;
    // THEN alice's first frame is her own change (bob's, or the refused all/carol, came first
    // in the stream and would have come first), and bob's next is his own again, not alice's.
    next_change_of(&mut alice, "alice").await;
    commit(&serve, "carol", "bob").await;
    next_change_of(&mut bob, "bob").await;
    assert!(interrupt(serve).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_receives_nothing_once_its_token_has_expired() {
    let (serve, data) = start_on_shared("wsexpiry", &[]).await;
    let mut watcher = open_with(&serve, &token(&data, &["--sub", "ops", "--admin"])).await;
    send(&mut watcher, json!({"action": "subscribe", "all": true})).await;
    assert_eq!(next_json(&mut watcher).await["type"], "subscribed");
    let mut brief = open_with(
        &serve,
        &token(
            &data,
            &["--sub", "alice", "--topic", "accounts/*", "--ttl", "3s"],
        ),
    )
    .await;
    send(&mut brief, json!({"action": "subscribe", "entities": [{"participant": "accounts", "key": {"id": "alice"}}]})).await;
    assert_eq!(next_json(&mut brief).await["type"], "subscribed");
    commit(&serve, "alice", "bob").await;
    next_change_of(&mut brief, "alice").await;

    // WHEN the token expires (the connection says so when asked)
    let asked = json!({"action": "subscribe", "entities": [{"participant": "accounts", "key": {"id": "bob"}}]});
    loop {
        send(&mut brief, asked.clone()).await;
        let v = next_json(&mut brief).await;
        if v["code"] == "connection_expired" {
            break;
        }
        assert_eq!(v["type"], "subscribed", "{v}");
        tokio::time::sleep(Duration::from_millis(250)).await; // polling a clock, not a sync
    }
    // THEN a change of alice's reaches the watcher but not the expired connection. Pushes of
    // one stream are handled batch after batch (DynamoDB Local: one shard per table), so once
    // the watcher has a change committed after it saw alice's, alice's batch is done, its
    // pushes included: had one gone to the expired connection, it would precede the answer to
    // what that connection asks next.
    let tx = commit(&serve, "alice", "bob").await;
    until(&mut watcher, |v| {
        v["txId"] == json!(tx) && v["key"]["id"] == "alice"
    })
    .await;
    let later = commit(&serve, "bob", "carol").await;
    until(&mut watcher, |v| {
        v["txId"] == json!(later) && v["type"] == "entity.committed"
    })
    .await;
    send(&mut brief, asked).await;
    assert_eq!(next_json(&mut brief).await["code"], "connection_expired");
    assert!(interrupt(serve).await.success());
}
