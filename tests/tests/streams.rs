//! The stream processor fed with records read from DynamoDB Local's real streams after real
//! transactions: commits become data-lake rows and messages, aborts do not; a failed delivery
//! is redelivered, nothing is skipped; a gone WebSocket connection is forgotten.

use std::sync::Mutex;

use serde_json::{Value, json};
use twopc_core::ports::{Clock, SystemClock};
use twopc_core::service::KeySchema;
use twopc_core::status::TxStatus;
use twopc_dynamo::connections::DynamoConnections;
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};
use twopc_fanout::detect::{TableRole, Tables};
use twopc_fanout::poll::{Poller, local_client, stream_arn};
use twopc_fanout::ports::{Lake, Push, PushError, SinkError, Subscriptions};
use twopc_fanout::processor::Processor;
use twopc_tests::{World, endpoint};

#[derive(Default)]
struct MemoryLake {
    rows: Mutex<Vec<Value>>,
    fail_next: Mutex<bool>,
}

impl Lake for &MemoryLake {
    async fn put(&self, rows: &[Value]) -> Result<Vec<usize>, SinkError> {
        let mut fail = self.fail_next.lock().expect("lock");
        if *fail {
            *fail = false;
            return Err(SinkError {
                message: "injected lake failure".into(),
                retryable: true,
            });
        }
        self.rows.lock().expect("lock").extend(rows.iter().cloned());
        Ok(vec![])
    }
}

struct NoSubscribers;

impl Subscriptions for NoSubscribers {
    async fn subscribers(&self, _: &[String], _: u64) -> Result<Vec<String>, SinkError> {
        Ok(vec![])
    }
    async fn forget(&self, _: &str) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Every connection is gone.
struct AllGone(Mutex<Vec<String>>);

impl Push for &AllGone {
    async fn post(&self, connection_id: &str, _: &str) -> Result<(), PushError> {
        self.0.lock().expect("lock").push(connection_id.to_owned());
        Err(PushError::Gone)
    }
}

fn tables(w: &World) -> Tables {
    [
        (w.tx_table.clone(), TableRole::Transactions),
        (
            w.accounts.clone(),
            TableRole::Participant {
                participant: "accounts".into(),
                key: KeySchema::string_hash("id"),
            },
        ),
        (
            w.wallets.clone(),
            TableRole::Participant {
                participant: "wallets".into(),
                key: KeySchema::string_hash("id"),
            },
        ),
    ]
    .into()
}

async fn poller(w: &World) -> Poller {
    let mut arns = vec![];
    for t in [&w.tx_table, &w.accounts, &w.wallets] {
        arns.push(stream_arn(&w.client, t).await.expect("stream"));
    }
    Poller::new(local_client(&endpoint()).await, arns, None)
}

async fn bank(w: &World) {
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
}

fn rows_of<'a>(rows: &'a [Value], kind: &str) -> Vec<&'a Value> {
    rows.iter().filter(|r| r["type"] == kind).collect()
}

#[tokio::test]
async fn commits_from_the_real_stream_become_rows_and_aborts_do_not() {
    let w = World::new().await;
    bank(&w).await;
    let committed = w.transfer("alice", "bob", 10).await;
    let aborted = w.transfer("alice", "bob", 1_000).await;
    assert_eq!(
        (committed.status, aborted.status),
        (TxStatus::Committed, TxStatus::Aborted)
    );

    let lake = MemoryLake::default();
    let gone = AllGone(Mutex::default());
    let processor = &Processor::new(tables(&w), &lake, NoSubscribers, &gone);
    let mut poller = poller(&w).await;
    let delivered = poller
        .poll_once(&|e| async move { processor.handle(&e).await })
        .await
        .expect("poll");
    assert!(
        delivered >= 8,
        "seed, prepares, commits, aborts and record writes: got {delivered}"
    );

    let rows = lake.rows.lock().expect("lock").clone();
    let items = rows_of(&rows, "item");
    assert_eq!(
        items.len(),
        2,
        "one row per committed item change: {items:#?}"
    );
    for row in &items {
        assert_eq!(row["txId"], json!(committed.tx_id.as_str()));
        assert_eq!(row["version"], json!(1));
        assert_eq!(
            row["eventId"],
            json!(format!(
                "{}/{}/{}",
                committed.tx_id,
                row["participant"].as_str().unwrap_or(""),
                row["key"]
            ))
        );
    }
    let alice = items
        .iter()
        .find(|r| r["participant"] == "accounts")
        .expect("alice row");
    // Numbers are exact decimals in `numbers`; the other attributes text in `item`.
    assert_eq!(alice["item"], json!({"id": "alice"}));
    assert_eq!(alice["numbers"], json!({"balance": 90}));
    assert_eq!(alice["key"], json!({"id": "alice"}));
    let outcomes: Vec<(Value, Value)> = rows_of(&rows, "transaction")
        .iter()
        .map(|r| (r["txId"].clone(), r["status"].clone()))
        .collect();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert!(outcomes.contains(&(json!(committed.tx_id.as_str()), json!("COMMITTED"))));
    assert!(outcomes.contains(&(json!(aborted.tx_id.as_str()), json!("ABORTED"))));
    assert!(
        items
            .iter()
            .all(|r| r["txId"] != json!(aborted.tx_id.as_str())),
        "an abort is never a committed change"
    );

    // Nothing new: a second pass delivers nothing.
    assert_eq!(
        poller
            .poll_once(&|e| async move { processor.handle(&e).await })
            .await
            .expect("poll"),
        0
    );
}

#[tokio::test]
async fn a_failed_lake_delivery_is_redelivered_not_skipped() {
    let w = World::new().await;
    bank(&w).await;
    let committed = w.transfer("alice", "bob", 10).await;
    let lake = MemoryLake {
        fail_next: Mutex::new(true),
        ..Default::default()
    };
    let gone = AllGone(Mutex::default());
    let processor = &Processor::new(tables(&w), &lake, NoSubscribers, &gone);
    let mut poller = poller(&w).await;
    poller
        .poll_once(&|e| async move { processor.handle(&e).await })
        .await
        .expect("first pass");
    poller
        .poll_once(&|e| async move { processor.handle(&e).await })
        .await
        .expect("second pass");
    poller
        .poll_once(&|e| async move { processor.handle(&e).await })
        .await
        .expect("third pass");
    let rows = lake.rows.lock().expect("lock").clone();
    let items: Vec<_> = rows_of(&rows, "item")
        .into_iter()
        .filter(|r| r["txId"] == json!(committed.tx_id.as_str()))
        .collect();
    assert_eq!(
        items.len(),
        2,
        "both committed changes arrive after the failure: {rows:#?}"
    );
}

#[tokio::test]
async fn a_gone_connection_is_forgotten() {
    let w = World::new().await;
    bank(&w).await;
    let table = format!("{}-connections", w.tx_table);
    ensure_table(
        &w.client,
        &TableSpec {
            name: table.clone(),
            kind: TableKind::Connections,
        },
    )
    .await
    .expect("table");
    let connections = DynamoConnections::new(w.client.clone(), &table, 7_200);
    connections
        .subscribe("ghost", &["all".to_owned()], now_secs() + 600)
        .await
        .expect("subscribe");
    assert_eq!(
        connections
            .subscribers(&["all".to_owned()], now_secs())
            .await
            .expect("subs"),
        vec!["ghost".to_owned()]
    );

    w.transfer("alice", "bob", 10).await;
    let lake = MemoryLake::default();
    let gone = AllGone(Mutex::default());
    let processor = &Processor::new(tables(&w), &lake, connections.clone(), &gone);
    let mut poller = poller(&w).await;
    poller
        .poll_once(&|e| async move { processor.handle(&e).await })
        .await
        .expect("poll");
    assert!(
        gone.0.lock().expect("lock").contains(&"ghost".to_owned()),
        "the push was tried"
    );
    assert!(
        connections
            .subscribers(&["all".to_owned()], 0)
            .await
            .expect("subs")
            .is_empty(),
        "a gone connection is deleted"
    );
}

fn now_secs() -> u64 {
    SystemClock.now_secs()
}

#[tokio::test]
async fn a_connection_keeps_its_principal_and_stops_being_a_subscriber_when_its_token_expires() {
    let w = World::new().await;
    let table = format!("{}-connections", w.tx_table);
    ensure_table(
        &w.client,
        &TableSpec {
            name: table.clone(),
            kind: TableKind::Connections,
        },
    )
    .await
    .expect("table");
    let connections = DynamoConnections::new(w.client.clone(), &table, 7_200);
    let now = now_secs();
    // GIVEN a connection whose token expires in 60 s, and one whose token outlives API
    // Gateway's two hours
    let short = connections
        .connect(
            "short",
            "alice",
            r#"{"topics":["accounts/alice"]}"#,
            now + 60,
            now,
        )
        .await
        .expect("connect");
    let long = connections
        .connect("long", "ops", r#"{"admin":true}"#, now + 86_400, now)
        .await
        .expect("connect");
    assert_eq!(
        (short, long),
        (now + 60, now + 7_200),
        "the earlier of the two"
    );
    let stored = connections
        .connection("short")
        .await
        .expect("read")
        .expect("known");
    assert_eq!(
        (
            stored.principal.as_str(),
            stored.grants.as_str(),
            stored.expire_at
        ),
        ("alice", r#"{"topics":["accounts/alice"]}"#, now + 60)
    );
    assert_eq!(connections.connection("nobody").await.expect("read"), None);
    let topic = vec!["entity:accounts:{\"id\":\"alice\"}".to_owned()];
    connections
        .subscribe("short", &topic, short)
        .await
        .expect("subscribe");
    connections
        .subscribe("long", &topic, long)
        .await
        .expect("subscribe");
    // THEN both listen until the short token expires, and only the long one after
    let at = |t| connections.subscribers(&topic, t);
    assert_eq!(
        at(now + 59).await.expect("subs"),
        vec!["long".to_owned(), "short".to_owned()]
    );
    assert_eq!(at(now + 60).await.expect("subs"), vec!["long".to_owned()]);
    assert!(at(now + 7_200).await.expect("subs").is_empty());
}

/// Everyone listens to everything through one connection; lookups are counted.
#[derive(Default)]
struct OneListener {
    lookups: Mutex<Vec<String>>,
}

impl Subscriptions for &OneListener {
    async fn subscribers(&self, topics: &[String], _: u64) -> Result<Vec<String>, SinkError> {
        self.lookups
            .lock()
            .expect("lock")
            .extend(topics.iter().cloned());
        Ok(vec!["c1".into()])
    }
    async fn forget(&self, _: &str) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Records what each connection received, in order.
#[derive(Default)]
struct Received(Mutex<Vec<(String, Value)>>);

impl Push for &Received {
    async fn post(&self, connection_id: &str, payload: &str) -> Result<(), PushError> {
        let v: Value = serde_json::from_str(payload).expect("json");
        self.0
            .lock()
            .expect("lock")
            .push((connection_id.to_owned(), v));
        Ok(())
    }
}

#[tokio::test]
async fn a_batch_looks_up_each_topic_once_and_pushes_in_stream_order() {
    let w = World::new().await;
    bank(&w).await;
    for _ in 0..5 {
        assert_eq!(
            w.transfer("alice", "bob", 10).await.status,
            TxStatus::Committed
        );
    }
    let (lake, listeners, received) = (
        MemoryLake::default(),
        OneListener::default(),
        Received::default(),
    );
    let processor = &Processor::new(tables(&w), &lake, &listeners, &received);
    let mut poller = poller(&w).await;
    poller
        .poll_once(&|e| async move { processor.handle(&e).await })
        .await
        .expect("poll");
    // Every topic at most once per batch: alice's and bob's entity topics, each transaction's,
    // and "all" once per batch (one batch per table here).
    let lookups = listeners.lookups.lock().expect("lock").clone();
    let mut distinct = lookups.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        lookups.iter().filter(|t| t.as_str() == "all").count(),
        3,
        "one lookup of `all` per table's batch: {lookups:?}"
    );
    assert_eq!(distinct.len(), 1 + 2 + 5, "{distinct:?}");
    // Each item's versions reach the connection in order, every one of them.
    let received = received.0.lock().expect("lock").clone();
    for id in ["alice", "bob"] {
        let versions: Vec<i64> = received
            .iter()
            .filter(|(c, m)| c == "c1" && m["type"] == "entity.committed" && m["key"]["id"] == id)
            .map(|(_, m)| m["version"].as_i64().expect("version"))
            .collect();
        assert_eq!(versions, [1, 2, 3, 4, 5], "{id}");
    }
    let completed = received
        .iter()
        .filter(|(_, m)| m["type"] == "transaction.completed")
        .count();
    assert_eq!(completed, 5);
}

/// A lake that holds its write until a push has gone out.
#[derive(Default)]
struct LakeAfterPush {
    pushed: tokio::sync::Notify,
    rows: Mutex<usize>,
}

impl Lake for &LakeAfterPush {
    async fn put(&self, rows: &[Value]) -> Result<Vec<usize>, SinkError> {
        self.pushed.notified().await;
        *self.rows.lock().expect("lock") += rows.len();
        Ok(vec![])
    }
}

impl Push for &LakeAfterPush {
    async fn post(&self, _: &str, _: &str) -> Result<(), PushError> {
        self.pushed.notify_one();
        Ok(())
    }
}

#[tokio::test]
async fn pushes_go_out_while_the_lake_is_written_and_the_batch_is_timed() {
    let w = World::new().await;
    bank(&w).await;
    let tx = w.transfer("alice", "bob", 10).await;
    assert_eq!(tx.status, TxStatus::Committed);
    let (both, listeners) = (LakeAfterPush::default(), OneListener::default());
    let processor = &Processor::new(tables(&w), &both, &listeners, &both);
    let batches = &Mutex::new(vec![]);
    let mut poller = poller(&w).await;
    // A processor that wrote the lake before pushing would wait for itself forever; the
    // timeout only turns that hang into a failure.
    let polled = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        poller.poll_once(&|e| async move {
            let changes: Vec<_> = e
                .records
                .iter()
                .filter_map(twopc_fanout::detect::change_of)
                .collect();
            let done = processor.process(&changes).await;
            assert!(done.failed.is_empty(), "{done:?}");
            batches.lock().expect("lock").push((changes, done));
            Default::default()
        }),
    )
    .await;
    assert!(polled.is_ok(), "the pushes waited for the lake");
    let batches = batches.lock().expect("lock");
    // Every committed change reached the lake (3 rows: two items, one transaction).
    assert!(*both.rows.lock().expect("lock") >= 3);
    // The transactions table's batch says how old its records were on arrival; other tables'
    // records carry no clock of their own.
    let tx_table = &w.tx_table;
    for (changes, done) in batches.iter() {
        let of_transactions = changes.iter().any(|c| &c.table == tx_table);
        assert_eq!(done.stages.age.is_some(), of_transactions, "{done:?}");
        if let Some(age) = done.stages.age {
            assert!(age < std::time::Duration::from_secs(600), "{age:?}");
        }
    }
    assert!(batches.iter().any(|(_, d)| d.stages.age.is_some()));
}
