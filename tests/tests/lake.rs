//! The local Parquet data lake fed from DynamoDB Local's real streams: a writer stopped dead in
//! the middle of a roll (before a file's rename, or after it and before the stream positions are
//! saved) loses no committed change when it restarts from its checkpoint; what it delivers twice
//! has the same `eventId`, and the lake holds exactly the changes of the transactions table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use twopc_core::service::KeySchema;
use twopc_core::status::TxStatus;
use twopc_fanout::detect::{TableRole, Tables};
use twopc_fanout::lake::field;
use twopc_fanout::parquet_lake::{
    LakeError, ParquetLake, RollFaults, RollPoint, read_rows, roll_and_checkpoint,
};
use twopc_fanout::poll::{Poller, local_client, stream_arn};
use twopc_fanout::ports::{Push, PushError, SinkError, Subscriptions};
use twopc_fanout::processor::Processor;
use twopc_tests::{World, endpoint};

struct NoSubscribers;

impl Subscriptions for NoSubscribers {
    async fn subscribers(&self, _: &[String], _: u64) -> Result<Vec<String>, SinkError> {
        Ok(vec![])
    }
    async fn forget(&self, _: &str) -> Result<(), SinkError> {
        Ok(())
    }
}

struct NoPush;

impl Push for NoPush {
    async fn post(&self, _: &str, _: &str) -> Result<(), PushError> {
        Ok(())
    }
}

/// Stops every roll at one point.
struct StopAt(RollPoint);

impl RollFaults for StopAt {
    fn fire(&self, point: RollPoint) -> bool {
        point == self.0
    }
}

fn tables(w: &World) -> Tables {
    let participant = |name: &str| TableRole::Participant {
        participant: name.into(),
        key: KeySchema::string_hash("id"),
    };
    [
        (w.tx_table.clone(), TableRole::Transactions),
        (w.accounts.clone(), participant("accounts")),
        (w.wallets.clone(), participant("wallets")),
    ]
    .into()
}

/// A writer as `twopc serve` runs one: poller with deferred checkpoints, processor, lake.
async fn writer(w: &World, checkpoints: &Path, lake: ParquetLake) {
    writer_with(w, checkpoints, lake, None).await;
}

async fn writer_with(w: &World, checkpoints: &Path, lake: ParquetLake, stop: Option<RollPoint>) {
    let mut arns = vec![];
    for t in [&w.tx_table, &w.accounts, &w.wallets] {
        arns.push(stream_arn(&w.client, t).await.expect("stream"));
    }
    let mut poller = Poller::new(
        local_client(&endpoint()).await,
        arns,
        Some(checkpoints.to_owned()),
    );
    let saver = poller.defer_checkpoints().expect("a checkpoint file");
    let lake = Arc::new(lake);
    let processor = &Processor::new(tables(w), lake.clone(), NoSubscribers, NoPush);
    poller
        .poll_once(&|e| async move { processor.handle(&e).await })
        .await
        .expect("poll");
    let rolled = roll_and_checkpoint(&lake, &saver);
    match stop {
        // The writer dies here: its buffer, poller and positions in memory go with it.
        Some(point) => assert!(
            matches!(rolled, Err(LakeError::Stopped(p)) if p == point),
            "{rolled:?}"
        ),
        None => assert!(rolled.is_ok(), "{rolled:?}"),
    }
}

/// The eventIds the transactions table says the lake must hold: every outcome, and every
/// committed transaction's item changes.
async fn committed_history(w: &World) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for r in w.records().await {
        let status = match r.status {
            TxStatus::Committed => "COMMITTED",
            TxStatus::Aborted => "ABORTED",
            other => panic!("transaction {} is still {other:?}", r.tx_id),
        };
        ids.insert(format!("{}/{status}", r.tx_id));
        if r.status == TxStatus::Committed {
            for p in &r.participants {
                let key = Value::Object(p.key.clone().into_iter().collect());
                ids.insert(format!("{}/{}/{key}", r.tx_id, p.participant));
            }
        }
    }
    ids
}

fn event_ids(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            field(r, "eventid")
                .and_then(Value::as_str)
                .expect("every row has an eventid")
                .to_owned()
        })
        .collect()
}

async fn crash_then_restart(point: RollPoint) -> (Vec<Value>, BTreeSet<String>, usize) {
    let w = World::new().await;
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    let dir = std::env::temp_dir().join(format!("twopc-lake-{}", uuid::Uuid::new_v4()));
    let (root, checkpoints) = (dir.join("lake"), dir.join("streams.json"));

    // GIVEN a writer that rolled and saved its positions once
    for amount in [10, 20] {
        w.transfer("alice", "bob", amount).await;
    }
    writer(&w, &checkpoints, ParquetLake::new(&root, "first")).await;
    // AND more committed and aborted transfers, and a writer that dies in its roll
    for amount in [1_000, 30] {
        w.transfer("alice", "bob", amount).await;
    }
    let dying = ParquetLake::new(&root, "second").with_faults(Arc::new(StopAt(point)));
    writer_with(&w, &checkpoints, dying, Some(point)).await;

    // WHEN more transfers commit and a new writer starts from the saved positions
    for amount in [5, 2_000] {
        w.transfer("alice", "bob", amount).await;
    }
    let third = ParquetLake::new(&root, "third");
    let cleaned = third.clean();
    writer(&w, &checkpoints, third).await;

    let rows = read_rows(&root).expect("read the lake");
    std::fs::remove_dir_all(&dir).ok();
    (rows, committed_history(&w).await, cleaned)
}

#[tokio::test]
async fn a_writer_killed_before_renaming_its_file_loses_nothing_and_leaves_no_partial_file() {
    let (rows, history, cleaned) = crash_then_restart(RollPoint::BeforeRename).await;
    // THEN the temporary file was never read and is gone, and the lake is the history.
    assert!(cleaned >= 1, "the dead writer's temporary file was removed");
    let ids = event_ids(&rows);
    let distinct: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        distinct, history,
        "the lake holds exactly the committed history"
    );
    assert_eq!(ids.len(), distinct.len(), "nothing was in a file twice");
}

#[tokio::test]
async fn a_writer_killed_after_renaming_before_checkpointing_duplicates_only_by_event_id() {
    let (rows, history, cleaned) = crash_then_restart(RollPoint::BeforeCheckpoint).await;
    assert_eq!(cleaned, 0, "its files were whole and in place");
    let ids = event_ids(&rows);
    let distinct: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        distinct, history,
        "the lake holds exactly the committed history"
    );
    // THEN the rows of the first file came again, each with its eventId and the same content.
    assert!(
        ids.len() > distinct.len(),
        "the redelivery wrote rows again"
    );
    let mut by_id: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for (id, row) in ids.iter().zip(&rows) {
        by_id.entry(id.clone()).or_default().push(row);
    }
    for (id, copies) in by_id {
        assert!(
            copies.windows(2).all(|w| w[0] == w[1]),
            "{id}: copies differ: {copies:#?}"
        );
    }
}
