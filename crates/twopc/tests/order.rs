//! An order across three services through `twopc serve`, as the README shows it: a wallet debit
//! (`accounts`), a stock decrement (`inventory`) and a card payment (`payments`, the custom
//! participant the stack serves over signed `http`). One order commits: the debit and the stock
//! change apply, the card is captured, and the data lake and the WebSocket report the
//! transaction with the payment's vote in it though the payment changes no item. One is declined
//! by the card gateway: nothing is debited, no stock moves, no authorisation is held.

mod common;

use common::{
    call, call_raw, interrupt, lake_rows, next_json, open_with, send, start_on_shared, token, until,
};
use serde_json::{Value, json};
use twopc_core::ids::TxId;

/// An order, answered once applied (the test reads the items and the ledger right after).
fn order(card: &str) -> Value {
    let amount: Value = serde_json::from_str("9.99").expect("an exact number");
    json!({"wait": "applied", "participants": [
        {"participant": "accounts", "key": {"id": "bob"}, "op": {"add": {"balance": -10}, "require": {"balance": {"gte": 10}}}},
        {"participant": "inventory", "key": {"sku": "gadget"}, "op": {"add": {"stock": -1}, "require": {"stock": {"gte": 1}}}},
        {"participant": "payments", "payload": {"card": card, "amount": amount}}]})
}

async fn item(url: &str, service: &str, id: &str) -> Value {
    let (status, body) = call(
        url,
        "GET",
        &format!("/local/items/{service}/{id}"),
        None,
        None,
    )
    .await
    .expect("item");
    assert_eq!(status, 200, "{body}");
    body["item"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_pays_by_card_atomically_and_a_declined_card_leaves_nothing() {
    let (serve, data) = start_on_shared("order", &[]).await;
    let lake = data.join("lake");
    let mut ws = open_with(&serve, &token(&data, &["--sub", "ops", "--admin"])).await;
    send(&mut ws, json!({"action": "subscribe", "all": true})).await;
    assert_eq!(next_json(&mut ws).await["type"], "subscribed");

    // The order that commits: every participant votes yes, the payment without a mode.
    let (status, paid) = call(
        &serve.url,
        "POST",
        "/transactions",
        None,
        Some(order("4242")),
    )
    .await
    .expect("order");
    assert_eq!(status, 200, "{paid}");
    assert_eq!(paid["status"], "COMMITTED");
    assert_eq!(
        paid["participants"][2],
        json!({"participant": "payments", "vote": "yes"})
    );
    let paid_tx = paid["txId"].as_str().expect("txId").to_owned();

    // The declined one: the payment votes no, the transaction aborts, and the API says why.
    let (status, declined) = call(
        &serve.url,
        "POST",
        "/transactions",
        None,
        Some(order("0002")),
    )
    .await
    .expect("order");
    assert_eq!(status, 409, "{declined}");
    assert_eq!(
        (declined["status"].as_str(), declined["code"].as_str()),
        (Some("ABORTED"), Some("condition"))
    );
    assert_eq!(
        (
            declined["participants"][2]["vote"].as_str(),
            declined["participants"][2]["reason"].as_str()
        ),
        (Some("no"), Some("condition")),
        "{declined}"
    );
    let declined_tx = declined["txId"].as_str().expect("txId").to_owned();

    // What each service holds: the committed order applied once, the declined one nothing.
    let bob = item(&serve.url, "accounts", "bob").await;
    assert_eq!(
        (bob["balance"].clone(), bob["lastTx"].as_str()),
        (json!(40), Some(paid_tx.as_str()))
    );
    let gadget = item(&serve.url, "inventory", "gadget").await;
    assert_eq!(
        (gadget["stock"].clone(), gadget["lastTx"].as_str()),
        (json!(2), Some(paid_tx.as_str()))
    );
    let (status, ledger) = call(
        &serve.url,
        "GET",
        "/services/payments/authorisations",
        None,
        None,
    )
    .await
    .expect("ledger");
    assert_eq!(status, 200);
    assert_eq!(
        ledger,
        json!([{"txId": paid_tx, "card": "4242", "amount": serde_json::from_str::<Value>("9.99").expect("n"), "status": "captured"}]),
        "one capture, and no hold for the declined card"
    );
    assert_eq!(ledger[0]["amount"].to_string(), "9.99", "the exact amount");

    // The WebSocket reports both outcomes and the committed order's two item changes.
    let mut outcomes = vec![];
    let mut changed = vec![];
    while outcomes.len() < 2 || changed.len() < 2 {
        let m = until(&mut ws, |_| true).await;
        match m["type"].as_str() {
            Some("transaction.completed") if m["txId"] == paid_tx.as_str() => {
                assert_eq!(
                    m["participants"][2],
                    json!({"participant": "payments", "vote": "yes"}),
                    "the payment's vote is pushed with the outcome: {m}"
                );
                outcomes.push((m["txId"].as_str().map(str::to_owned), m["status"].clone()))
            }
            Some("transaction.completed") => {
                outcomes.push((m["txId"].as_str().map(str::to_owned), m["status"].clone()))
            }
            Some("entity.committed") => {
                assert_eq!(
                    m["txId"].as_str(),
                    Some(paid_tx.as_str()),
                    "only the paid order commits changes: {m}"
                );
                changed.push(m["participant"].as_str().map(str::to_owned));
            }
            _ => panic!("unexpected {m}"),
        }
    }
    outcomes.sort_by_key(|(tx, _)| tx.as_deref() != Some(paid_tx.as_str()));
    assert_eq!(
        outcomes,
        [
            (Some(paid_tx.clone()), json!("COMMITTED")),
            (Some(declined_tx.clone()), json!("ABORTED"))
        ]
    );
    changed.sort();
    assert_eq!(
        changed,
        [Some("accounts".to_owned()), Some("inventory".to_owned())]
    );

    // The lake: the committed order's transaction row lists the payment's vote, its two item
    // rows are there; the declined order has its transaction row and no item row.
    let rows = lake_rows(&lake, |rows| {
        rows.iter().filter(|r| r["type"] == "transaction").count() >= 2
            && rows.iter().filter(|r| r["type"] == "item").count() >= 2
    })
    .await;
    let transaction = |tx: &str| {
        rows.iter()
            .find(|r| r["type"] == "transaction" && r["txid"] == tx)
            .cloned()
            .unwrap_or_else(|| panic!("no transaction row for {tx} in {rows:?}"))
    };
    let committed = transaction(&paid_tx);
    assert_eq!(committed["status"], "COMMITTED");
    assert_eq!(
        committed["participants"][2],
        json!({"participant": "payments", "vote": "yes"}),
        "{committed}"
    );
    let aborted = transaction(&declined_tx);
    assert_eq!(aborted["status"], "ABORTED");
    assert_eq!(
        aborted["participants"][2]["reason"], "condition",
        "{aborted}"
    );
    let items_of = |tx: &str| {
        rows.iter()
            .filter(|r| r["type"] == "item" && r["txid"] == tx)
            .count()
    };
    assert_eq!((items_of(&paid_tx), items_of(&declined_tx)), (2, 0));

    // The stack's payments takes requests from its coordinator only: unsigned ones are refused.
    let (status, refused, _) = call_raw(
        &serve.url,
        "POST",
        "/services/payments/prepare",
        &[],
        json!({"txId": TxId::random()}).to_string().into_bytes(),
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (401, Some("unsigned")),
        "{refused}"
    );
    assert!(interrupt(serve).await.success());
}
