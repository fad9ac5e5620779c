//! Items written by an earlier version, on DynamoDB Local: an item in the earlier fence format
//! (long ids, entries as maps) is refused by every protocol write before anything is written to
//! it, so no lock is stranded on an item no step can read; an item of this format written
//! before the format marker existed is marked and taken as usual.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::json;
use twopc_core::ids::TxId;
use twopc_core::layout::{FENCE, FORMAT, FORMAT_VERSION, HORIZON, LOCK};
use twopc_core::message::InquireRequest;
use twopc_core::ports::{Clock, PortError};
use twopc_tests::{World, complete_req, key, prepare_req};

type Item = HashMap<String, AttributeValue>;

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// Writes `id` exactly as given (the earlier version's attributes), balance 100.
async fn put_raw(w: &World, id: &str, extra: Item) -> Item {
    let mut item: Item = [
        ("id".to_owned(), AttributeValue::S(id.to_owned())),
        ("balance".to_owned(), n(100)),
    ]
    .into();
    item.extend(extra);
    w.client
        .put_item()
        .table_name(&w.accounts)
        .set_item(Some(item.clone()))
        .send()
        .await
        .expect("put");
    item
}

async fn get_raw(w: &World, id: &str) -> Item {
    w.client
        .get_item()
        .table_name(&w.accounts)
        .set_key(Some(twopc_dynamo::codec::to_item(&key(id))))
        .consistent_read(true)
        .send()
        .await
        .expect("get")
        .item
        .expect("the item")
}

/// A fence of the earlier format: one entry of `tx` under its long id, `{o, b, x}`.
fn earlier_fence(tx: &TxId) -> Item {
    let entry = AttributeValue::M(
        [
            ("o".to_owned(), AttributeValue::S("committed".into())),
            ("b".to_owned(), n(1_000)),
            ("x".to_owned(), n(2_000)),
        ]
        .into(),
    );
    [
        (
            FENCE.to_owned(),
            AttributeValue::M([(tx.as_str().to_owned(), entry)].into()),
        ),
        (HORIZON.to_owned(), n(0)),
    ]
    .into()
}

fn says_earlier_format<T: std::fmt::Debug>(r: Result<T, PortError>) {
    match r {
        Err(e @ PortError::Fatal { .. }) => {
            let chain = format!("{e:#} {:?}", e);
            assert!(chain.contains("earlier version"), "{chain}");
        }
        other => panic!("expected the earlier format refused, got {other:?}"),
    }
}

#[tokio::test]
async fn an_item_in_the_earlier_fence_format_is_refused_before_anything_is_written() {
    // GIVEN alice as an earlier version left her: a fence entry of a transaction from before
    // the upgrade, under its long id.
    let w = World::new().await;
    let before = TxId::random();
    let stored = put_raw(&w, "alice", earlier_fence(&before)).await;
    let deadline = w.clock.now_ms() + 5_000;
    let p = &w.participant;

    // WHEN a new transaction prepares, reserves, a lock-free abort fences it out, a recovery
    // prevents it, and the pre-upgrade transaction's late duplicate prepare lands
    let tx = TxId::random();
    says_earlier_format(
        p.prepare(
            &w.accounts,
            &prepare_req(&tx, deadline, "alice", json!({"set": {"memo": "x"}})),
        )
        .await,
    );
    says_earlier_format(
        p.prepare(
            &w.accounts,
            &prepare_req(
                &tx,
                deadline,
                "alice",
                json!({"add": {"balance": -1}, "require": {"balance": {"gte": 1}}}),
            ),
        )
        .await,
    );
    let mut abort = complete_req(&tx, deadline, "alice", json!({"set": {"memo": "x"}}));
    abort.refused = true;
    says_earlier_format(p.abort(&w.accounts, &abort).await);
    let inquiry = InquireRequest {
        tx_id: tx.clone(),
        deadline,
        began: deadline - 5_000,
        key: key("alice"),
        op: None,
        payload: None,
        prevent: true,
    };
    says_earlier_format(p.inquire(&w.accounts, &inquiry).await);
    says_earlier_format(
        p.prepare(
            &w.accounts,
            &prepare_req(&before, deadline, "alice", json!({"set": {"memo": "late"}})),
        )
        .await,
    );

    // THEN each was refused saying why, and the item is exactly as the earlier version left it:
    // no lock, no entry, no marker.
    let now = get_raw(&w, "alice").await;
    assert_eq!(now, stored);
    assert!(!now.contains_key(LOCK) && !now.contains_key(FORMAT));
}

#[tokio::test]
async fn an_earlier_reservation_is_refused_before_anything_is_written() {
    // An earlier version's reservation: `txRes:<long id>` with a lock's fields.
    let w = World::new().await;
    let before = TxId::random();
    let mut extra: Item = [
        (FENCE.to_owned(), AttributeValue::M(Default::default())),
        (
            format!("txRes:{}", before.as_str()),
            AttributeValue::M(
                [
                    ("txId".to_owned(), AttributeValue::S(before.to_string())),
                    ("expiresAt".to_owned(), n(2_000)),
                    ("began".to_owned(), n(1_000)),
                ]
                .into(),
            ),
        ),
    ]
    .into();
    extra.insert("txResN".into(), n(1));
    let stored = put_raw(&w, "bob", extra).await;
    let deadline = w.clock.now_ms() + 5_000;
    says_earlier_format(
        w.participant
            .prepare(
                &w.accounts,
                &prepare_req(
                    &TxId::random(),
                    deadline,
                    "bob",
                    json!({"add": {"balance": 1}}),
                ),
            )
            .await,
    );
    assert_eq!(get_raw(&w, "bob").await, stored);
}

#[tokio::test]
async fn an_item_of_this_format_written_before_the_marker_is_marked_and_taken() {
    // GIVEN carol as this version wrote her before the marker: a compact fence, no marker.
    let w = World::new().await;
    let ended = TxId::random();
    let fence: Item = [
        (
            FENCE.to_owned(),
            AttributeValue::M([(ended.short(), n(1_000))].into()),
        ),
        (HORIZON.to_owned(), n(0)),
    ]
    .into();
    put_raw(&w, "carol", fence).await;
    // WHEN a transaction prepares there
    let tx = TxId::random();
    let deadline = w.clock.now_ms() + 5_000;
    let reply = w
        .prepare(
            "accounts",
            &prepare_req(&tx, deadline, "carol", json!({"add": {"balance": -1}})),
        )
        .await;
    // THEN it holds her, the marker is written and her entry kept (a late prepare of the
    // ended transaction is still refused).
    assert!(reply.vote.is_yes(), "{reply:?}");
    let raw = get_raw(&w, "carol").await;
    assert_eq!(raw.get(FORMAT), Some(&n(FORMAT_VERSION)));
    let carol = w.item("accounts", "carol").await.expect("carol");
    assert!(carol.fence.contains_key(&ended));
    let late = w
        .prepare(
            "accounts",
            &prepare_req(&ended, deadline, "carol", json!({"set": {"memo": "late"}})),
        )
        .await;
    assert!(!late.vote.is_yes(), "{late:?}");
    // And a plain item, never touched by the protocol, gets the marker with its first fence.
    w.seed("accounts", "dave", json!({"balance": 1})).await;
    assert!(!get_raw(&w, "dave").await.contains_key(FORMAT));
    let reply = w
        .prepare(
            "accounts",
            &prepare_req(&TxId::random(), deadline, "dave", json!({"set": {"m": 1}})),
        )
        .await;
    assert!(reply.vote.is_yes());
    let dave = get_raw(&w, "dave").await;
    assert!(dave.contains_key(FENCE) && dave.get(FORMAT) == Some(&n(FORMAT_VERSION)));
}
