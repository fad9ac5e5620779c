//! Native transactions on DynamoDB Local (`CommitMode::Auto`): a transaction of plain tables is
//! one `TransactWriteItems`; one the store cannot commit alone, or whose item the protocol holds,
//! takes the staged path; a refused one is recorded aborted with the votes a prepare would have
//! had; a keyed one replays its answer; the stream sees each committed item change once.

use serde_json::{Value, json};
use twopc_core::api::{self, codes};
use twopc_core::coordinator::{Answered, CommitMode, CoordinatorConfig, Outcome, SubmitError};
use twopc_core::decimal::Decimal;
use twopc_core::ids::TxId;
use twopc_core::op::Mode;
use twopc_core::ports::{Clock, TxLog};
use twopc_core::record::{Target, Vote, VoteReason};
use twopc_core::service::{KeyAttribute, KeySchema, KeyType, ServiceConfig};
use twopc_core::status::TxStatus;
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};
use twopc_fanout::detect::{Detected, TableRole, Tables, change_of, detect};
use twopc_fanout::poll::{Poller, local_client, stream_arn};
use twopc_tests::{World, endpoint, prepare_req, transfer};

async fn bank(w: &World) {
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
}

async fn balances(w: &World) -> (String, String) {
    (
        w.attr("accounts", "alice", "balance").await.expect("alice"),
        w.attr("wallets", "bob", "balance").await.expect("bob"),
    )
}

async fn stage(w: &World, body: &Value, key: Option<&str>) -> Answered {
    w.coordinator_in(CommitMode::Auto)
        .submit(body, key)
        .await
        .expect("stage")
}

/// Whether the transaction went native: answered terminal with nothing left to do, and no
/// item carries a fence entry of it (the protocol's commit writes one).
async fn went_native(w: &World, staged: &Answered) -> bool {
    let tx = &staged.answer.record.tx_id;
    let mut fenced = false;
    for (service, id) in [("accounts", "alice"), ("wallets", "bob")] {
        if let Some(item) = w.item(service, id).await {
            fenced |= item.fence.contains_key(tx);
        }
    }
    staged.finish.is_none() && staged.answer.applied() && !fenced
}

#[tokio::test]
async fn a_transfer_between_plain_tables_is_one_native_write() {
    let w = World::new().await;
    bank(&w).await;
    let staged = stage(&w, &transfer("alice", "bob", 10), None).await;
    assert_eq!(staged.answer.outcome, Outcome::Committed);
    assert!(went_native(&w, &staged).await);
    assert_eq!(balances(&w).await, ("90".into(), "10".into()));
    let record = w
        .log
        .get(&staged.answer.record.tx_id)
        .await
        .expect("get")
        .expect("the record");
    assert_eq!(record.status, TxStatus::Committed);
    assert_eq!(record.votes, vec![Vote::yes(Mode::Exclusive); 2]);
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert!(alice.lock.is_none() && alice.reservations.is_empty());
    assert_eq!(
        w.attr("accounts", "alice", "lastTx").await,
        Some(record.tx_id.to_string())
    );
}

#[tokio::test]
async fn a_refused_native_transaction_is_recorded_aborted_with_the_votes() {
    let w = World::new().await;
    bank(&w).await;
    let staged = stage(&w, &transfer("alice", "bob", 1_000), None).await;
    assert_eq!(staged.answer.outcome, Outcome::Aborted);
    let record = w
        .log
        .get(&staged.answer.record.tx_id)
        .await
        .expect("get")
        .expect("an aborted record, for status reads and replays");
    assert_eq!(record.status, TxStatus::Aborted);
    match &record.votes[0] {
        Vote::No { reason, message } => {
            assert_eq!(*reason, VoteReason::Condition);
            assert!(message.contains("balance"), "{message}");
        }
        other => panic!("alice's vote: {other:?}"),
    }
    assert!(record.votes[1].is_yes());
    assert_eq!(
        balances(&w).await,
        ("100".into(), "0".into()),
        "nothing written"
    );
    // No item: the vote a prepare gets.
    let missing = stage(&w, &transfer("nobody", "bob", 1), None).await;
    assert_eq!(missing.answer.outcome, Outcome::Aborted);
    assert!(matches!(
        &missing.answer.record.votes[0],
        Vote::No {
            reason: VoteReason::NotFound,
            ..
        }
    ));
}

#[tokio::test]
async fn a_keyed_native_transaction_replays_its_answer_and_applies_once() {
    let w = World::new().await;
    bank(&w).await;
    let body = transfer("alice", "bob", 10);
    let first = stage(&w, &body, Some("native-key-1")).await;
    let again = stage(&w, &body, Some("native-key-1")).await;
    assert_eq!(first.answer.record.tx_id, again.answer.record.tx_id);
    assert_eq!(again.answer.outcome, Outcome::Committed);
    assert_eq!(again.answer.record.status, TxStatus::Committed);
    assert_eq!(
        balances(&w).await,
        ("90".into(), "10".into()),
        "applied once"
    );
    // The key with another body is refused; nothing is written.
    let other = w
        .coordinator_in(CommitMode::Auto)
        .submit(&transfer("alice", "bob", 20), Some("native-key-1"))
        .await;
    assert!(other.is_err(), "a reused key with another body is refused");
    assert_eq!(balances(&w).await, ("90".into(), "10".into()));
}

#[tokio::test]
async fn what_the_store_cannot_commit_alone_is_staged() {
    let w = World::new().await;
    bank(&w).await;
    // A hot service.
    let mut config = w.coordinator.config().clone();
    config.mode = CommitMode::Auto;
    config.services.get_mut("wallets").expect("wallets").hot = true;
    let c = w.coordinator_with(config);
    let hot = c
        .submit(&transfer("alice", "bob", 10), None)
        .await
        .expect("stage");
    assert_eq!(hot.answer.outcome, Outcome::Committed);
    assert_eq!(
        hot.answer.record.status,
        TxStatus::Staging,
        "staged, not native"
    );
    c.finish(hot.finish.expect("work after the answer"))
        .await
        .expect("finish");
    // A delete.
    w.seed("wallets", "carol", json!({"balance": 0})).await;
    let delete = json!({"participants": [
        {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": -1}}},
        {"participant": "wallets", "key": {"id": "carol"}, "op": {"delete": true}}
    ]});
    let c = w.coordinator_in(CommitMode::Auto);
    let staged = c.submit(&delete, None).await.expect("stage");
    assert_eq!(staged.answer.outcome, Outcome::Committed);
    assert_eq!(staged.answer.record.status, TxStatus::Staging);
    c.finish(staged.finish.expect("work after the answer"))
        .await
        .expect("finish");
    // Staged and classic modes never go native.
    for mode in [CommitMode::Staged, CommitMode::Classic] {
        let c = w.coordinator_in(mode);
        let staged = c
            .submit(&transfer("alice", "bob", 1), None)
            .await
            .expect("stage");
        let went = went_native(&w, &staged).await;
        if let Some(finish) = staged.finish {
            c.finish(finish).await.expect("finish");
        }
        assert!(!went, "{mode:?} went native");
    }
}

#[tokio::test]
async fn an_item_the_protocol_holds_sends_the_transaction_down_the_staged_path() {
    let w = World::new().await;
    bank(&w).await;
    // A live reservation on alice (a debit of 10 that keeps the balance at or above 0).
    let other = TxId::random();
    let deadline = w.clock.now_ms() + 60_000;
    let reply = w
        .participant
        .prepare(
            &w.accounts,
            &twopc_core::message::PrepareRequest {
                part: None,
                // Begun now (within the participant's clock margin), live for a minute.
                began: w.clock.now_ms(),
                ..prepare_req(
                    &other,
                    deadline,
                    "alice",
                    json!({"add": {"balance": -10}, "require": {"balance": {"gte": 10}}}),
                )
            },
        )
        .await
        .expect("reserve");
    assert!(reply.vote.is_yes());
    // The native write gives way; the staged path reserves beside the standing reservation.
    let staged = stage(&w, &transfer("alice", "bob", 10), None).await;
    assert_eq!(staged.answer.outcome, Outcome::Committed);
    assert_eq!(staged.answer.record.status, TxStatus::Staging);
    assert_eq!(
        staged.answer.record.votes,
        vec![Vote::yes(Mode::Reserved), Vote::yes(Mode::Reserved)]
    );
}

/// A `ledger` service over a table of this world keyed by a number, `id`: the coordinator's
/// configuration with it, and the table's name.
async fn with_ledger(w: &World) -> (CoordinatorConfig, String) {
    let table = format!("{}-ledger", w.prefix);
    let schema = KeySchema {
        hash: KeyAttribute {
            name: "id".into(),
            kind: KeyType::N,
        },
        range: None,
    };
    let spec = TableSpec {
        name: table.clone(),
        kind: TableKind::Participant(schema.clone()),
    };
    ensure_table(&w.client, &spec).await.expect("create table");
    let mut config = w.coordinator.config().clone();
    config.services.insert(
        "ledger".into(),
        ServiceConfig::table(
            Target::Direct {
                table: table.clone(),
            },
            schema,
        ),
    );
    (config, table)
}

/// The ledger's item 1, raw (numbers as DynamoDB keeps them).
async fn ledger_one(w: &World, table: &str) -> Option<Value> {
    let item = w
        .client
        .get_item()
        .table_name(table)
        .set_key(Some(twopc_dynamo::codec::to_item(
            &serde_json::from_str::<serde_json::Map<String, Value>>(r#"{"id": 1}"#).expect("key"),
        )))
        .consistent_read(true)
        .send()
        .await
        .expect("get")
        .item?;
    Some(Value::Object(
        twopc_dynamo::codec::from_item(&item).expect("an item"),
    ))
}

#[tokio::test]
async fn one_number_keyed_item_under_two_spellings_is_refused_duplicate_item_on_every_path() {
    // GIVEN ledger item 1 with 100, and a transfer from {"id": 1} to {"id": 1.0}: one item.
    let w = World::new().await;
    let (config, table) = with_ledger(&w).await;
    let seed: serde_json::Map<String, Value> =
        serde_json::from_str(r#"{"id": 1, "balance": 100}"#).expect("item");
    w.client
        .put_item()
        .table_name(&table)
        .set_item(Some(twopc_dynamo::codec::to_item(&seed)))
        .send()
        .await
        .expect("seed");
    let before = ledger_one(&w, &table).await;
    for (a, b) in [("1", "1.0"), ("1", "10e-1"), ("1.00", "1")] {
        let body: Value = serde_json::from_str(&format!(
            r#"{{"participants": [
                {{"participant": "ledger", "key": {{"id": {a}}}, "op": {{"add": {{"balance": -10}}, "require": {{"balance": {{"gte": 10}}}}}}}},
                {{"participant": "ledger", "key": {{"id": {b}}}, "op": {{"add": {{"balance": 10}}}}}}]}}"#
        ))
        .expect("json");
        // WHEN it is submitted natively (auto), staged and in five rounds (classic)
        for mode in CommitMode::ALL {
            let c = w.coordinator_with(CoordinatorConfig {
                mode,
                ..config.clone()
            });
            // THEN it is refused duplicate_item, with or without an idempotency key,
            for key in [None, Some("two-spellings")] {
                match c.submit(&body, key).await {
                    Err(SubmitError::Request(e)) => {
                        assert_eq!(e.code, codes::DUPLICATE_ITEM, "{mode:?} {a}/{b}: {e}")
                    }
                    other => panic!("{mode:?} {a}/{b}: {other:?}"),
                }
            }
        }
    }
    // AND nothing was written: no record, the item as it was.
    assert_eq!(w.tx_count().await, 0);
    assert_eq!(ledger_one(&w, &table).await, before);
}

#[tokio::test]
async fn a_change_dynamodb_can_never_write_is_refused_invalid_for_store_not_retry() {
    // GIVEN alice at the largest magnitude DynamoDB keeps.
    let w = World::new().await;
    let huge: Value = serde_json::from_str("9E+125").expect("number");
    w.seed("accounts", "alice", json!({"balance": huge})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    let body: Value = serde_json::from_str(
        r#"{"participants": [
            {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": 9E+125}}},
            {"participant": "wallets", "key": {"id": "bob"}, "op": {"add": {"balance": 1}}}]}"#,
    )
    .expect("json");
    // WHEN a native transaction would take her past it
    let r = w.coordinator_in(CommitMode::Auto).submit(&body, None).await;
    // THEN DynamoDB's refusal is a 400 that says to change the request, never 503 "retry",
    match r {
        Err(SubmitError::Request(e)) => {
            assert_eq!(e.code, codes::INVALID_FOR_STORE, "{e}");
            assert_eq!(api::failed(&SubmitError::Request(e)).status, 400);
        }
        other => panic!("{other:?}"),
    }
    // AND nothing was written.
    assert_eq!(w.tx_count().await, 0);
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("0")
    );
    let alice = w.attr("accounts", "alice", "balance").await.expect("alice");
    let d = |t: &str| Decimal::parse(t).expect("a number");
    assert!(d(&alice).cmp_value(&d("9E+125")).is_eq(), "{alice}");
}

#[tokio::test]
async fn the_stream_sees_each_natively_committed_item_change_once() {
    let w = World::new().await;
    bank(&w).await;
    let committed = stage(&w, &transfer("alice", "bob", 10), None).await;
    let aborted = stage(&w, &transfer("alice", "bob", 1_000), None).await;
    let tables: Tables = [
        (w.tx_table.clone(), TableRole::Transactions),
        (
            w.accounts.clone(),
            TableRole::Participant {
                participant: "accounts".into(),
                key: twopc_core::service::KeySchema::string_hash("id"),
            },
        ),
        (
            w.wallets.clone(),
            TableRole::Participant {
                participant: "wallets".into(),
                key: twopc_core::service::KeySchema::string_hash("id"),
            },
        ),
    ]
    .into();
    let mut arns = vec![];
    for t in [&w.tx_table, &w.accounts, &w.wallets] {
        arns.push(stream_arn(&w.client, t).await.expect("stream"));
    }
    let mut poller = Poller::new(local_client(&endpoint()).await, arns, None);
    let seen = std::sync::Mutex::new(vec![]);
    poller
        .poll_once(&|e: aws_lambda_events::dynamodb::Event| {
            let found = e
                .records
                .iter()
                .filter_map(change_of)
                .filter_map(|c| detect(&c, &tables));
            seen.lock().expect("lock").extend(found);
            async { aws_lambda_events::streams::DynamoDbEventResponse::default() }
        })
        .await
        .expect("poll");
    let seen = seen.into_inner().expect("lock");
    let tx = committed.answer.record.tx_id.to_string();
    let items: Vec<&Detected> = seen
        .iter()
        .filter(|d| matches!(d, Detected::ItemCommitted { .. }))
        .collect();
    assert_eq!(items.len(), 2, "alice and bob, once each: {items:#?}");
    assert!(
        items
            .iter()
            .all(|d| matches!(d, Detected::ItemCommitted { tx_id, .. } if *tx_id == tx))
    );
    let outcomes: Vec<(String, String)> = seen
        .iter()
        .filter_map(|d| match d {
            Detected::TransactionCompleted { tx_id, status, .. } => {
                Some((tx_id.clone(), status.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (tx, "COMMITTED".to_owned()),
            (
                aborted.answer.record.tx_id.to_string(),
                "ABORTED".to_owned()
            )
        ]
    );
}
