//! One contract for the stores, run against both implementations: the in-memory ones
//! (`twopc_core::memory`, what fast tests of the protocol logic run on) and the DynamoDB
//! adapters on a real engine (`make test` runs them on DynamoDB Local, then on the embedded
//! engine). Each case states what a port promises; `memory::*` and `dynamodb::*` run the same
//! case, so the fake cannot drift from the real things.

use serde_json::{Value, json};
use twopc_core::ids::TxId;
use twopc_core::item::{FenceEntry, FenceOutcome, ItemState, Key, Lock};
use twopc_core::layout;
use twopc_core::memory::{MemoryItems, MemoryNative, MemoryTxLog};
use twopc_core::message::Prune;
use twopc_core::op::Operation;
use twopc_core::participant::{Refusal, classify_native_refusal, classify_refusal};
use twopc_core::ports::{
    CompleteWrite, Completion, Created, NativeItem, NativeOutcome, NativeStore, NativeWrite,
    ParticipantStore, PortError, PrepareWrite, Swapped, TxLog,
};
use twopc_core::record::{TxRecord, VoteReason};
use twopc_core::rules::{self, NativeStep, Seen};
use twopc_core::service::KeySchema;
use twopc_core::status::TxStatus;
use twopc_dynamo::{DynamoItems, DynamoNative, DynamoTxLog};
use twopc_tests::{World, key};

/// A pair of stores and a participant table in them.
struct Stores<I, L> {
    items: I,
    log: L,
    /// The all-or-nothing write over both.
    native: Box<dyn NativeStore>,
    table: String,
    seeder: Seeder,
}

/// Writes plain items outside the protocol, as each implementation allows.
enum Seeder {
    Memory(MemoryItems),
    Dynamo(Box<World>),
}

impl<I: ParticipantStore, L: TxLog> Stores<I, L> {
    fn items(&self) -> &I {
        &self.items
    }
    fn log(&self) -> &L {
        &self.log
    }
    fn table(&self) -> &str {
        &self.table
    }
    /// Writes a plain item `{id, ...attrs}`.
    async fn seed(&self, id: &str, attrs: Value) {
        match &self.seeder {
            Seeder::Memory(items) => {
                let attrs = attrs.as_object().cloned().unwrap_or_default();
                items.put(&self.table, &key(id), attrs.into_iter().collect());
            }
            Seeder::Dynamo(world) => world.seed("accounts", id, attrs).await,
        }
    }

    /// The service sets one attribute of its item itself, outside any transaction.
    async fn set_outside(&self, id: &str, name: &str, value: Value) {
        match &self.seeder {
            Seeder::Memory(items) => items.set_attribute(&self.table, &key(id), name, value),
            Seeder::Dynamo(world) => {
                let mut e = twopc_dynamo::expr::Expr::new();
                let update = format!(
                    "SET {} = {}",
                    e.name(name),
                    e.value(twopc_dynamo::codec::to_attr(&value))
                );
                world
                    .client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(twopc_dynamo::codec::to_item(&key(id))))
                    .update_expression(update)
                    .set_expression_attribute_names(e.names())
                    .set_expression_attribute_values(e.values())
                    .send()
                    .await
                    .expect("set outside the protocol");
            }
        }
    }
}

async fn memory() -> Stores<MemoryItems, MemoryTxLog> {
    let items = MemoryItems::default();
    let log = MemoryTxLog::default();
    Stores {
        native: Box::new(MemoryNative::new(log.clone(), items.clone())),
        items: items.clone(),
        log,
        table: "accounts".into(),
        seeder: Seeder::Memory(items),
    }
}

async fn dynamodb() -> Stores<DynamoItems, DynamoTxLog> {
    let world = World::new().await;
    Stores {
        items: DynamoItems::new(world.client.clone()),
        native: Box::new(DynamoNative::new(world.client.clone(), world.log.clone())),
        log: world.log.clone(),
        table: world.accounts.clone(),
        seeder: Seeder::Dynamo(Box::new(world)),
    }
}

/// Each case, once per implementation.
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::memory().await).await;
            })*
        }
        mod dynamodb {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::dynamodb().await).await;
            })*
        }
    };
}

contract!(
    prepare_locks_a_free_item_and_reports_the_fence_it_found,
    prepare_is_refused_by_another_lock_the_fence_and_the_horizon,
    prepare_evaluates_requires_as_dynamodb_does,
    a_put_locks_a_placeholder_and_other_operations_need_an_item,
    commit_applies_the_operation_exactly_and_releases_the_lock,
    commit_is_refused_without_the_lock_and_a_prune_that_would_lower_the_horizon,
    a_committed_delete_leaves_a_tombstone_with_its_fence,
    a_committed_delete_prunes_the_fence_as_planned,
    a_prepare_meeting_its_own_hold_with_another_operation_is_refused_and_changes_nothing,
    abort_releases_and_an_aborted_placeholder_becomes_a_tombstone,
    fence_aborted_adds_an_entry_or_raises_the_horizon_when_full,
    drop_lock_removes_only_its_own_lock_unapplied,
    expired_locks_lists_the_locks_past_their_expiry,
    the_log_creates_once_and_swaps_status_by_compare_and_swap,
    the_log_lists_overdue_records_and_backs_off_failed_ones,
    reservations_stand_side_by_side_and_each_bound_is_checked_against_the_extreme,
    releasing_reservations_applies_or_gives_back_their_escrow_and_the_last_leaves_it_idle,
    a_stale_idle_escrow_refuses_reservations_until_it_is_reset,
    strict_bounds_are_broken_by_reaching_their_value,
    an_upper_bound_is_checked_against_the_highest_value,
    reservations_on_one_attribute_must_agree_on_their_bound,
    a_retried_reservation_is_reserved_once,
    a_lock_and_reservations_exclude_each_other,
    a_pause_refuses_new_reservations_until_it_ends,
    a_reservation_obeys_the_fence_and_the_horizon,
    expired_reservations_are_listed_and_fence_aborted_skips_its_own,
    an_item_takes_at_most_the_most_reservations,
    bury_aborted_prevents_a_transaction_on_an_absent_key_only,
    an_inquiry_reads_held_or_prevents_and_a_prevented_prepare_never_lands,
    an_inquiry_about_another_operation_than_its_hold_is_prevented_and_writes_nothing,
    a_native_transaction_writes_every_item_and_the_record_at_once,
    a_native_transaction_writes_nothing_when_one_item_refuses,
    a_native_transaction_gives_way_where_the_protocol_holds_an_item,
    a_native_transaction_is_refused_by_a_record_already_there,
    a_native_put_takes_a_tombstone_and_keeps_its_fence,
    a_native_write_removes_the_idle_escrow_of_what_it_adds_to,
    a_former_transactions_entry_under_the_id_is_retired_before_the_new_ones_release,
    holds_are_their_transactions_by_id_and_began,
    a_former_transactions_reservation_under_the_id_refuses_a_reservation_until_dropped,
    a_never_begun_record_is_created_at_its_holds_began,
    an_abort_gives_a_reservation_back_by_its_holds_operation_not_the_messages,
    a_heat_mark_rides_on_a_hold_and_turns_native_writes_away_while_live,
);

const NOW: u64 = 1_800_000_000_000;
/// Most reservations an item takes in these cases, but where a case says otherwise.
const MOST: usize = 32;

fn op(v: Value) -> Operation {
    Operation::from_json("op", &v).expect("operation")
}

fn lock(tx: &TxId, began: u64, v: Value) -> Lock {
    Lock {
        tx_id: tx.clone(),
        expires_at: began + 5_000,
        began,
        op: op(v),
        coordinator: "contract".into(),
    }
}

fn entry(outcome: FenceOutcome, began: u64) -> FenceEntry {
    FenceEntry { outcome, began }
}

fn number(v: Option<&Value>) -> String {
    // Compared as exact decimals: DynamoDB may keep or drop trailing zeros.
    let text = v.expect("a number").to_string();
    let t = text.trim_start_matches('-');
    let t = if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.')
    } else {
        t
    };
    format!("{}{t}", if text.starts_with('-') { "-" } else { "" })
}

async fn read<I: ParticipantStore, L: TxLog>(s: &Stores<I, L>, id: &str) -> Option<ItemState> {
    s.items().read(s.table(), &key(id)).await.expect("read")
}

async fn prepare<I: ParticipantStore, L: TxLog>(
    s: &Stores<I, L>,
    id: &str,
    l: &Lock,
) -> PrepareWrite {
    s.items()
        .prepare(s.table(), &key(id), l, None)
        .await
        .expect("prepare")
}

fn refused_item(w: PrepareWrite) -> Option<Box<ItemState>> {
    match w {
        PrepareWrite::Refused(item) => item,
        PrepareWrite::Locked { .. } => panic!("expected a refusal"),
    }
}

fn locked(w: &PrepareWrite) -> bool {
    matches!(w, PrepareWrite::Locked { .. })
}

async fn commit<I: ParticipantStore, L: TxLog>(
    s: &Stores<I, L>,
    id: &str,
    l: &Lock,
    prune: Option<&Prune>,
) -> Result<CompleteWrite, PortError> {
    let c = completion(l, FenceOutcome::Committed, prune);
    s.items().commit(s.table(), &key(id), &c).await
}

/// What a commit or abort of `l` writes.
fn completion<'a>(l: &'a Lock, outcome: FenceOutcome, prune: Option<&'a Prune>) -> Completion<'a> {
    Completion {
        tx: &l.tx_id,
        op: &l.op,
        entry: entry(outcome, l.began),
        prune,
    }
}

/// Locks `id` for a transaction that began at `began` and commits it there.
async fn committed<I: ParticipantStore, L: TxLog>(
    s: &Stores<I, L>,
    id: &str,
    began: u64,
    v: Value,
) -> TxId {
    let tx = TxId::random();
    let l = lock(&tx, began, v);
    assert!(locked(&prepare(s, id, &l).await));
    assert!(matches!(
        commit(s, id, &l, None).await.expect("commit"),
        CompleteWrite::Done
    ));
    tx
}

async fn prepare_locks_a_free_item_and_reports_the_fence_it_found<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    let earlier = committed(&s, "alice", NOW, json!({"add": {"balance": 1}})).await;
    let tx = TxId::random();
    let l = lock(&tx, NOW + 10, json!({"add": {"balance": -1}}));
    match prepare(&s, "alice", &l).await {
        PrepareWrite::Locked { fence, horizon, .. } => {
            assert_eq!(fence.keys().collect::<Vec<_>>(), [&earlier]);
            assert_eq!(horizon, 0);
        }
        other => panic!("{other:?}"),
    }
    // A retry finds its own lock: locked again, nothing else changes.
    assert!(locked(&prepare(&s, "alice", &l).await));
    let item = read(&s, "alice").await.expect("alice");
    assert_eq!(item.lock.as_ref().map(|l| &l.tx_id), Some(&tx));
    assert_eq!(number(item.attributes.get("balance")), "101");
}

async fn prepare_is_refused_by_another_lock_the_fence_and_the_horizon<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    let holder = lock(&TxId::random(), NOW, json!({"add": {"balance": 1}}));
    assert!(locked(&prepare(&s, "alice", &holder).await));
    let other = lock(&TxId::random(), NOW + 1, json!({"add": {"balance": 1}}));
    let found = refused_item(prepare(&s, "alice", &other).await).expect("the item");
    assert_eq!(
        found.lock.as_ref().map(|l| &l.tx_id),
        Some(&holder.tx_id),
        "the refusal returns the item as it was"
    );
    // After the holder committed, its own late prepare meets its fence entry.
    commit(&s, "alice", &holder, None).await.expect("commit");
    let late = refused_item(prepare(&s, "alice", &holder).await).expect("the item");
    assert_eq!(
        late.fence.get(&holder.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Committed)
    );
    // A pruning release raises the horizon; a transaction that began at or before it is refused.
    let pruner = lock(&TxId::random(), NOW + 20, json!({"add": {"balance": 1}}));
    assert!(locked(&prepare(&s, "alice", &pruner).await));
    let prune = Prune {
        ids: vec![holder.tx_id.clone()],
        horizon: NOW + 5,
    };
    commit(&s, "alice", &pruner, Some(&prune))
        .await
        .expect("commit");
    let below = lock(&TxId::random(), NOW + 5, json!({"add": {"balance": 1}}));
    let found = refused_item(prepare(&s, "alice", &below).await).expect("the item");
    assert_eq!(found.horizon, NOW + 5);
    assert!(!found.fence.contains_key(&holder.tx_id), "pruned");
    let above = lock(&TxId::random(), NOW + 6, json!({"add": {"balance": 1}}));
    assert!(locked(&prepare(&s, "alice", &above).await));
}

async fn prepare_evaluates_requires_as_dynamodb_does<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed(
        "alice",
        serde_json::from_str(r#"{"balance": 1.50, "name": "b", "flag": true}"#).expect("json"),
    )
    .await;
    let cases = [
        (r#"{"balance": {"gte": 1.5}}"#, true),
        (r#"{"balance": {"eq": 1.5}}"#, true),
        (r#"{"balance": {"gt": 1.5}}"#, false),
        (r#"{"balance": {"lt": 10}}"#, true),
        (r#"{"name": {"gt": "a"}}"#, true),
        (r#"{"name": {"lt": "a"}}"#, false),
        (r#"{"name": {"eq": 1}}"#, false),
        (r#"{"name": {"ne": 1}}"#, true),
        (r#"{"flag": {"eq": true}}"#, true),
        (r#"{"missing": {"ne": 1}}"#, true),
        (r#"{"missing": {"lt": 1}}"#, false),
        (r#"{"missing": {"eq": 1}}"#, false),
        (r#"{"missing": "notExists"}"#, true),
        (r#"{"name": "exists"}"#, true),
        (r#"{"name": "notExists"}"#, false),
    ];
    for (require, holds) in cases {
        let require: Value = serde_json::from_str(require).expect("require");
        let l = lock(
            &TxId::random(),
            NOW,
            json!({"set": {"x": 1}, "require": require}),
        );
        let w = prepare(&s, "alice", &l).await;
        assert_eq!(locked(&w), holds, "require {require}");
        if holds {
            s.items()
                .abort(
                    s.table(),
                    &key("alice"),
                    &completion(&l, FenceOutcome::Aborted, None),
                )
                .await
                .expect("abort");
        }
    }
    // An add to an attribute that is not a number is refused at prepare, not at commit.
    let l = lock(&TxId::random(), NOW, json!({"add": {"name": 1}}));
    assert!(!locked(&prepare(&s, "alice", &l).await));
}

async fn a_put_locks_a_placeholder_and_other_operations_need_an_item<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    let update = lock(&TxId::random(), NOW, json!({"add": {"balance": 1}}));
    assert!(refused_item(prepare(&s, "carol", &update).await).is_none());
    let put = lock(
        &TxId::random(),
        NOW,
        json!({"put": {"balance": 5}, "require": {"id": "notExists"}}),
    );
    assert!(locked(&prepare(&s, "carol", &put).await));
    let placeholder = read(&s, "carol").await.expect("a placeholder");
    assert!(placeholder.placeholder && placeholder.lock.is_some());
    assert!(
        !placeholder.attributes.contains_key("balance"),
        "only the key until commit"
    );
    commit(&s, "carol", &put, None).await.expect("commit");
    let carol = read(&s, "carol").await.expect("carol");
    assert!(!carol.placeholder && carol.lock.is_none());
    assert_eq!(number(carol.attributes.get("balance")), "5");
    // A second put on the real item is refused.
    let again = lock(&TxId::random(), NOW + 1, json!({"put": {"balance": 1}}));
    assert!(!locked(&prepare(&s, "carol", &again).await));
}

async fn commit_applies_the_operation_exactly_and_releases_the_lock<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed(
        "alice",
        serde_json::from_str(r#"{"balance": 0.1, "note": "x", "gone": 1}"#).expect("json"),
    )
    .await;
    let big = "12345678901234567890123456789012345678";
    let v: Value = serde_json::from_str(&format!(
        r#"{{"add": {{"balance": 0.2, "big": {big}}}, "set": {{"note": "y"}}, "remove": ["gone"]}}"#
    ))
    .expect("op");
    let tx = committed(&s, "alice", NOW, v).await;
    let alice = read(&s, "alice").await.expect("alice");
    assert_eq!(number(alice.attributes.get("balance")), "0.3");
    assert_eq!(number(alice.attributes.get("big")), big);
    assert_eq!(alice.attributes.get("note"), Some(&json!("y")));
    assert!(!alice.attributes.contains_key("gone"));
    assert_eq!(number(alice.attributes.get(layout::VERSION)), "1");
    assert_eq!(
        alice.attributes.get(layout::LAST_TX),
        Some(&json!(tx.as_str()))
    );
    assert!(alice.lock.is_none());
    assert_eq!(
        alice.fence.get(&tx).map(|e| e.outcome),
        Some(FenceOutcome::Committed)
    );
}

async fn commit_is_refused_without_the_lock_and_a_prune_that_would_lower_the_horizon<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 1})).await;
    let stranger = lock(&TxId::random(), NOW, json!({"add": {"balance": 1}}));
    match commit(&s, "alice", &stranger, None).await.expect("commit") {
        CompleteWrite::Refused(Some(item)) => assert!(item.lock.is_none()),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        commit(&s, "nobody", &stranger, None).await.expect("commit"),
        CompleteWrite::Refused(None)
    ));
    // The holder planned a prune to horizon NOW + 1; a lock-free abort raised it to NOW + 7
    // meanwhile (a full fence): the pruning commit is refused, the plain one goes through.
    let holder = lock(&TxId::random(), NOW + 20, json!({"add": {"balance": 1}}));
    assert!(locked(&prepare(&s, "alice", &holder).await));
    let raiser = TxId::random();
    s.items()
        .fence_aborted(
            s.table(),
            &key("alice"),
            &raiser,
            entry(FenceOutcome::Aborted, NOW + 7),
            0,
        )
        .await
        .expect("raise");
    let prune = Prune {
        ids: vec![],
        horizon: NOW + 1,
    };
    match commit(&s, "alice", &holder, Some(&prune))
        .await
        .expect("commit")
    {
        CompleteWrite::Refused(Some(item)) => {
            assert_eq!(item.lock.map(|l| l.tx_id), Some(holder.tx_id.clone()));
            assert_eq!(item.horizon, NOW + 7);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        commit(&s, "alice", &holder, None).await.expect("commit"),
        CompleteWrite::Done
    ));
    assert_eq!(read(&s, "alice").await.expect("alice").horizon, NOW + 7);
}

async fn a_committed_delete_leaves_a_tombstone_with_its_fence<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 1, "note": "x"})).await;
    let first = committed(&s, "alice", NOW, json!({"add": {"balance": 1}})).await;
    let tx = committed(&s, "alice", NOW + 1, json!({"delete": true})).await;
    let tomb = read(&s, "alice").await.expect("a tombstone");
    assert!(tomb.tombstone && !tomb.placeholder && tomb.lock.is_none());
    assert!(!tomb.attributes.contains_key("balance") && !tomb.attributes.contains_key("note"));
    assert_eq!(number(tomb.attributes.get(layout::VERSION)), "2");
    assert_eq!(
        tomb.attributes.get(layout::LAST_TX),
        Some(&json!(tx.as_str()))
    );
    assert!(tomb.fence.contains_key(&first) && tomb.fence.contains_key(&tx));
    // An update finds nothing; a put may take the tombstone.
    let update = lock(&TxId::random(), NOW + 2, json!({"add": {"balance": 1}}));
    assert!(!locked(&prepare(&s, "alice", &update).await));
    let put = lock(&TxId::random(), NOW + 3, json!({"put": {"balance": 9}}));
    assert!(locked(&prepare(&s, "alice", &put).await));
}

async fn a_committed_delete_prunes_the_fence_as_planned<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    // GIVEN two committed transactions in the fence, and a delete whose prepare planned to
    // prune the older one.
    s.seed("alice", json!({"balance": 1})).await;
    let old = committed(&s, "alice", NOW, json!({"add": {"balance": 1}})).await;
    let kept = committed(&s, "alice", NOW + 1, json!({"add": {"balance": 1}})).await;
    let delete = lock(&TxId::random(), NOW + 2, json!({"delete": true}));
    assert!(locked(&prepare(&s, "alice", &delete).await));
    let prune = Prune {
        ids: vec![old.clone()],
        horizon: NOW,
    };
    // WHEN it commits
    assert!(matches!(
        commit(&s, "alice", &delete, Some(&prune))
            .await
            .expect("commit"),
        CompleteWrite::Done
    ));
    // THEN the tombstone's fence lost the pruned entry, kept the other and gained the
    // delete's, and the horizon covers the pruned one.
    let tomb = read(&s, "alice").await.expect("a tombstone");
    assert!(tomb.tombstone);
    assert_eq!(
        tomb.fence.keys().collect::<std::collections::BTreeSet<_>>(),
        [&kept, &delete.tx_id].into()
    );
    assert_eq!(tomb.horizon, NOW);
    // A late prepare of the pruned transaction is refused by the horizon.
    let late = lock(&old, NOW, json!({"put": {"balance": 5}}));
    assert!(!locked(&prepare(&s, "alice", &late).await));
}

async fn a_prepare_meeting_its_own_hold_with_another_operation_is_refused_and_changes_nothing<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    // One item named twice (two spellings of one key) reaches the item as two prepares of one
    // transaction with different operations: the second is not a retry.
    s.seed("alice", json!({"balance": 100})).await;
    let tx = TxId::random();
    let taken = lock(
        &tx,
        NOW,
        json!({"add": {"balance": -10}, "set": {"memo": "debit"}}),
    );
    assert!(locked(&prepare(&s, "alice", &taken).await));
    let credit = lock(
        &tx,
        NOW,
        json!({"add": {"balance": 10}, "set": {"memo": "credit"}}),
    );
    let item = refused_item(prepare(&s, "alice", &credit).await).expect("the item");
    assert_eq!(
        item.lock.as_ref().map(|l| &l.op),
        Some(&taken.op),
        "the hold keeps its operation"
    );
    assert!(matches!(
        classify_refusal(Some(&item), &credit, NOW, |_| false),
        Refusal::Vote(VoteReason::Invalid, _)
    ));
    // A retry with the same operation, its numbers spelled otherwise, is still a retry.
    let retry = lock(
        &tx,
        NOW,
        serde_json::from_str(r#"{"add": {"balance": -10.0}, "set": {"memo": "debit"}}"#)
            .expect("json"),
    );
    assert!(locked(&prepare(&s, "alice", &retry).await));
    let held = read(&s, "alice")
        .await
        .and_then(|i| i.lock)
        .expect("locked");
    assert!(held.op.same_as(&taken.op), "{:?}", held.op);

    // The same with reservations: a second reservation of the transaction with another change
    // is refused, never reserved twice or over the first.
    s.seed("bob", json!({"balance": 100})).await;
    let tx = TxId::random();
    let first = debit(&tx, NOW, 10);
    assert!(locked(&reserve(&s, "bob", &first).await));
    let other = debit(&tx, NOW, 30);
    let item = refused_item(reserve(&s, "bob", &other).await).expect("the item");
    assert_eq!(item.reservations.len(), 1);
    assert_eq!(item.reservations.get(&tx).map(|r| &r.op), Some(&first.op));
    assert!(matches!(
        classify_refusal(Some(&item), &other, NOW, |_| false),
        Refusal::Vote(VoteReason::Invalid, _)
    ));
    assert_eq!(
        escrow_of(&s, "bob", "balance").await,
        Some((1, "90".into(), "100".into())),
        "one reservation escrowed, the first"
    );
    // An exclusive prepare of the transaction beside its own reservation is refused too.
    let exclusive = lock(&tx, NOW, json!({"set": {"memo": "x"}}));
    let item = refused_item(prepare(&s, "bob", &exclusive).await).expect("the item");
    assert!(item.lock.is_none());
    assert!(matches!(
        classify_refusal(Some(&item), &exclusive, NOW, |_| false),
        Refusal::Vote(VoteReason::Invalid, _)
    ));
}

async fn abort_releases_and_an_aborted_placeholder_becomes_a_tombstone<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 1})).await;
    let l = lock(&TxId::random(), NOW, json!({"add": {"balance": 1}}));
    assert!(locked(&prepare(&s, "alice", &l).await));
    let abort = |l: Lock, id: &'static str| {
        let s = &s;
        async move {
            s.items()
                .abort(
                    s.table(),
                    &key(id),
                    &completion(&l, FenceOutcome::Aborted, None),
                )
                .await
                .expect("abort")
        }
    };
    assert!(matches!(
        abort(l.clone(), "alice").await,
        CompleteWrite::Done
    ));
    let alice = read(&s, "alice").await.expect("alice");
    assert!(alice.lock.is_none());
    assert_eq!(
        number(alice.attributes.get("balance")),
        "1",
        "nothing applied"
    );
    assert_eq!(
        alice.fence.get(&l.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
    assert!(matches!(
        abort(l, "alice").await,
        CompleteWrite::Refused(Some(_))
    ));
    let put = lock(&TxId::random(), NOW, json!({"put": {"balance": 1}}));
    assert!(locked(&prepare(&s, "dave", &put).await));
    assert!(matches!(abort(put, "dave").await, CompleteWrite::Done));
    let dave = read(&s, "dave").await.expect("a tombstone");
    assert!(dave.tombstone && !dave.placeholder && dave.lock.is_none());
}

async fn fence_aborted_adds_an_entry_or_raises_the_horizon_when_full<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 1})).await;
    let fence = |tx: TxId, began: u64, capacity: usize| {
        let s = &s;
        async move {
            s.items()
                .fence_aborted(
                    s.table(),
                    &key("alice"),
                    &tx,
                    entry(FenceOutcome::Aborted, began),
                    capacity,
                )
                .await
                .expect("fence")
        }
    };
    // No fence yet: it is created with the entry.
    let first = TxId::random();
    assert!(matches!(
        fence(first.clone(), NOW, 2).await,
        CompleteWrite::Done
    ));
    let second = TxId::random();
    assert!(matches!(
        fence(second.clone(), NOW + 1, 2).await,
        CompleteWrite::Done
    ));
    // Full at capacity 2: the horizon rises to the transaction's begin instead.
    let third = TxId::random();
    assert!(matches!(
        fence(third.clone(), NOW + 2, 2).await,
        CompleteWrite::Done
    ));
    let alice = read(&s, "alice").await.expect("alice");
    assert_eq!(
        alice
            .fence
            .keys()
            .collect::<std::collections::BTreeSet<_>>(),
        [&first, &second].into()
    );
    assert_eq!(alice.horizon, NOW + 2);
    // Already fenced (entry, or under the horizon): refused, nothing written.
    assert!(matches!(
        fence(first, NOW, 9).await,
        CompleteWrite::Refused(Some(_))
    ));
    assert!(matches!(
        fence(TxId::random(), NOW + 2, 9).await,
        CompleteWrite::Refused(Some(_))
    ));
    // Its own lock is not fenced out; a missing item is not created.
    let holder = lock(&TxId::random(), NOW + 3, json!({"add": {"balance": 1}}));
    assert!(locked(&prepare(&s, "alice", &holder).await));
    assert!(matches!(
        fence(holder.tx_id.clone(), NOW + 3, 9).await,
        CompleteWrite::Refused(Some(_))
    ));
    let absent = s
        .items()
        .fence_aborted(
            s.table(),
            &key("nobody"),
            &TxId::random(),
            entry(FenceOutcome::Aborted, NOW),
            9,
        )
        .await
        .expect("fence");
    assert!(matches!(absent, CompleteWrite::Refused(None)));
    assert!(read(&s, "nobody").await.is_none());
}

async fn drop_lock_removes_only_its_own_lock_unapplied<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 1})).await;
    let l = lock(&TxId::random(), NOW, json!({"add": {"balance": 1}}));
    assert!(locked(&prepare(&s, "alice", &l).await));
    let drop = |tx: TxId| {
        let (s, holder) = (
            &s,
            Lock {
                tx_id: tx,
                ..l.clone()
            },
        );
        async move {
            s.items()
                .drop_lock(s.table(), &key("alice"), &holder)
                .await
                .expect("drop")
        }
    };
    assert!(matches!(
        drop(TxId::random()).await,
        CompleteWrite::Refused(Some(_))
    ));
    assert!(matches!(drop(l.tx_id.clone()).await, CompleteWrite::Done));
    let alice = read(&s, "alice").await.expect("alice");
    assert!(alice.lock.is_none() && !alice.fence.contains_key(&l.tx_id));
    assert_eq!(number(alice.attributes.get("balance")), "1");
}

async fn expired_locks_lists_the_locks_past_their_expiry<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    for id in ["a", "b", "c"] {
        s.seed(id, json!({"balance": 1})).await;
    }
    let early = lock(&TxId::random(), NOW, json!({"add": {"balance": 1}}));
    let late = lock(
        &TxId::random(),
        NOW + 60_000,
        json!({"add": {"balance": 1}}),
    );
    assert!(locked(&prepare(&s, "a", &early).await));
    assert!(locked(&prepare(&s, "b", &late).await));
    let found = s
        .items()
        .expired_locks(s.table(), &KeySchema::string_hash("id"), NOW + 10_000, 10)
        .await
        .expect("expired");
    let found: Vec<(Key, TxId)> = found.into_iter().map(|(k, l)| (k, l.tx_id)).collect();
    assert_eq!(found, [(key("a"), early.tx_id)]);
}

fn record(deadline: u64) -> TxRecord {
    let mut r = TxRecord::never_began(&TxId::random(), deadline - 5_000);
    r.status = TxStatus::Preparing;
    r.deadline = deadline;
    r.begun_by = "contract".into();
    r
}

async fn the_log_creates_once_and_swaps_status_by_compare_and_swap<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    let log = s.log();
    let r = record(NOW);
    assert!(matches!(
        log.create(&r).await.expect("create"),
        Created::New
    ));
    match log.create(&record(NOW)).await.expect("create") {
        Created::New => {}
        other => panic!("another id is new: {other:?}"),
    }
    match log.create(&r).await.expect("create") {
        Created::Exists(existing) => assert_eq!(*existing, r),
        other => panic!("{other:?}"),
    }
    let decided = match log
        .transition(&r, TxStatus::Committing, Some(&[]), NOW + 1)
        .await
        .expect("swap")
    {
        Swapped::Done(d) => *d,
        other => panic!("{other:?}"),
    };
    assert_eq!(log.get(&r.tx_id).await.expect("get"), Some(decided.clone()));
    // The stale holder of the PREPARING record loses, and sees the record as it is.
    match log
        .transition(&r, TxStatus::Aborting, None, NOW + 2)
        .await
        .expect("swap")
    {
        Swapped::Lost(Some(found)) => assert_eq!(found.status, TxStatus::Committing),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        log.transition(&record(NOW), TxStatus::Aborting, None, NOW)
            .await
            .expect("swap"),
        Swapped::Lost(None)
    ));
    assert!(matches!(
        log.transition(&decided, TxStatus::Aborted, None, NOW).await,
        Err(PortError::Invalid { .. })
    ));
    let never = TxId::random();
    assert!(matches!(
        log.create_aborted(&never, NOW, NOW).await.expect("aborted"),
        Created::New
    ));
    assert_eq!(
        log.get(&never).await.expect("get").map(|r| r.status),
        Some(TxStatus::Aborted)
    );
}

async fn the_log_lists_overdue_records_and_backs_off_failed_ones<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    let log = s.log();
    assert_eq!(log.oldest_pending_deadline().await.expect("oldest"), None);
    let (old, older, live) = (record(NOW - 100), record(NOW - 200), record(NOW + 100));
    let done = record(NOW - 300);
    for r in [&old, &older, &live, &done] {
        log.create(r).await.expect("create");
    }
    let committing = match log
        .transition(&done, TxStatus::Committing, Some(&[]), NOW)
        .await
        .expect("swap")
    {
        Swapped::Done(r) => *r,
        other => panic!("{other:?}"),
    };
    log.transition(&committing, TxStatus::Committed, None, NOW)
        .await
        .expect("finalize");
    let ids = |rs: Vec<TxRecord>| {
        rs.into_iter()
            .map(|r| r.tx_id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(log.overdue(NOW, 10).await.expect("overdue")),
        [older.tx_id.to_string(), old.tx_id.to_string()],
        "oldest deadline first; neither the live nor the terminal one"
    );
    assert_eq!(
        ids(log.overdue(NOW, 1).await.expect("overdue")),
        [older.tx_id.to_string()]
    );
    log.note_failed_attempt(&older.tx_id, NOW + 50, NOW)
        .await
        .expect("back off");
    assert_eq!(
        ids(log.overdue(NOW, 10).await.expect("overdue")),
        [old.tx_id.to_string()]
    );
    assert_eq!(
        ids(log.overdue(NOW + 51, 10).await.expect("overdue")),
        [older.tx_id.to_string(), old.tx_id.to_string()]
    );
    let backed = log.get(&older.tx_id).await.expect("get").expect("record");
    assert_eq!((backed.attempts, backed.retry_after), (1, Some(NOW + 50)));
    assert_eq!(
        log.oldest_pending_deadline().await.expect("oldest"),
        Some(NOW - 200),
        "the oldest non-terminal record, backing off or not; never the finished one"
    );
    // A finished record is not counted.
    log.note_failed_attempt(&done.tx_id, NOW + 50, NOW)
        .await
        .expect("no-op");
    let finished = log.get(&done.tx_id).await.expect("get").expect("record");
    assert_eq!((finished.attempts, finished.retry_after), (0, None));
}

// ---------------------------------------------------------------- reservations

async fn reserve<I: ParticipantStore, L: TxLog>(
    s: &Stores<I, L>,
    id: &str,
    l: &Lock,
) -> PrepareWrite {
    s.items()
        .reserve(s.table(), &key(id), l, None, NOW, MOST)
        .await
        .expect("reserve")
}

/// A debit of `amount` that keeps the balance at or above zero.
fn debit(tx: &TxId, began: u64, amount: i64) -> Lock {
    lock(
        tx,
        began,
        json!({"add": {"balance": -amount}, "require": {"balance": {"gte": amount}}}),
    )
}

async fn escrow_of<I: ParticipantStore, L: TxLog>(
    s: &Stores<I, L>,
    id: &str,
    attr: &str,
) -> Option<(u64, String, String)> {
    let item = read(s, id).await.expect("item");
    item.escrow.get(attr).map(|e| {
        (
            e.count,
            e.low.canonical().to_string(),
            e.high.canonical().to_string(),
        )
    })
}

async fn release<I: ParticipantStore, L: TxLog>(
    s: &Stores<I, L>,
    id: &str,
    l: &Lock,
    commit: bool,
) -> CompleteWrite {
    let outcome = if commit {
        FenceOutcome::Committed
    } else {
        FenceOutcome::Aborted
    };
    let c = completion(l, outcome, None);
    let w = if commit {
        s.items().commit(s.table(), &key(id), &c).await
    } else {
        s.items().abort(s.table(), &key(id), &c).await
    };
    w.expect("release")
}

async fn reservations_stand_side_by_side_and_each_bound_is_checked_against_the_extreme<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    let debits: Vec<Lock> = (0..3)
        .map(|i| debit(&TxId::random(), NOW + i, 10))
        .collect();
    for d in &debits {
        assert!(
            locked(&reserve(&s, "alice", d).await),
            "three debits of 10 fit in 30"
        );
    }
    // The lowest the balance could reach is 0: a fourth debit could break the floor.
    let fourth = debit(&TxId::random(), NOW + 9, 10);
    let refused = refused_item(reserve(&s, "alice", &fourth).await).expect("the item");
    assert_eq!(refused.reservations.len(), 3);
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((3, "0".to_owned(), "30".to_owned()))
    );
    let alice = read(&s, "alice").await.expect("alice");
    assert!(alice.lock.is_none());
    assert_eq!(
        number(alice.attributes.get("balance")),
        "30",
        "readers see the committed value"
    );
    assert_eq!(
        alice.escrow["balance"]
            .floor
            .as_ref()
            .map(|f| f.stored(true)),
        Some(">=0".into())
    );
}

async fn strict_bounds_are_broken_by_reaching_their_value<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 10})).await;
    // `gt 5` with a debit of 5: the balance must stay above 0, never reach it.
    let above = |began| {
        lock(
            &TxId::random(),
            began,
            json!({"add": {"balance": -5}, "require": {"balance": {"gt": 5}}}),
        )
    };
    assert!(locked(&reserve(&s, "alice", &above(NOW)).await));
    assert!(
        !locked(&reserve(&s, "alice", &above(NOW + 1)).await),
        "10 - 5 = 5 is not above 5"
    );
    // A `gte` floor at the same number is another bound: it waits for the strict one.
    assert!(!locked(
        &reserve(&s, "alice", &debit(&TxId::random(), NOW + 2, 1)).await
    ));
    assert_eq!(
        read(&s, "alice").await.expect("alice").escrow["balance"]
            .standing_floor()
            .map(|f| f.stored(true)),
        Some(">0".into())
    );
    // `lt 20` with a credit of 5: each credit needs the counter below 20 before it.
    s.seed("q", json!({"used": 10})).await;
    let under = |began| {
        lock(
            &TxId::random(),
            began,
            json!({"add": {"used": 5}, "require": {"used": {"lt": 20}}}),
        )
    };
    assert!(locked(&reserve(&s, "q", &under(NOW)).await));
    assert!(locked(&reserve(&s, "q", &under(NOW + 1)).await), "15 < 20");
    assert!(
        !locked(&reserve(&s, "q", &under(NOW + 2)).await),
        "with both committed the counter is at 20, which is not below 20"
    );
}

async fn releasing_reservations_applies_or_gives_back_their_escrow_and_the_last_leaves_it_idle<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    let (a, b, c) = (
        debit(&TxId::random(), NOW, 10),
        debit(&TxId::random(), NOW + 1, 10),
        lock(&TxId::random(), NOW + 2, json!({"add": {"balance": 5}})),
    );
    for l in [&a, &b, &c] {
        assert!(locked(&reserve(&s, "alice", l).await));
    }
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((3, "10".to_owned(), "35".to_owned()))
    );
    assert!(matches!(
        release(&s, "alice", &a, true).await,
        CompleteWrite::Done
    ));
    let alice = read(&s, "alice").await.expect("alice");
    assert_eq!(number(alice.attributes.get("balance")), "20");
    assert_eq!(
        alice.fence.get(&a.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Committed)
    );
    assert_eq!(number(alice.attributes.get(layout::VERSION)), "1");
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((2, "10".to_owned(), "25".to_owned()))
    );
    assert!(matches!(
        release(&s, "alice", &b, false).await,
        CompleteWrite::Done
    ));
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((1, "20".to_owned(), "25".to_owned()))
    );
    // A release of a reservation that is not there is refused.
    assert!(matches!(
        release(&s, "alice", &b, false).await,
        CompleteWrite::Refused(Some(_))
    ));
    assert!(matches!(
        release(&s, "alice", &c, true).await,
        CompleteWrite::Done
    ));
    let alice = read(&s, "alice").await.expect("alice");
    assert_eq!(number(alice.attributes.get("balance")), "25");
    assert!(alice.reservations.is_empty(), "{alice:?}");
    // The last release leaves the escrow idle, at the value, its floor kept by nobody.
    let idle = &alice.escrow["balance"];
    assert_eq!(
        (idle.count, idle.floors, idle.standing_floor()),
        (0, 0, None)
    );
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((0, "25".to_owned(), "25".to_owned()))
    );
    // A new reservation starts from the value.
    let d = debit(&TxId::random(), NOW + 3, 25);
    assert!(locked(&reserve(&s, "alice", &d).await));
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((1, "0".to_owned(), "25".to_owned()))
    );
}

async fn a_stale_idle_escrow_refuses_reservations_until_it_is_reset<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    let a = debit(&TxId::random(), NOW, 10);
    assert!(locked(&reserve(&s, "alice", &a).await));
    assert!(matches!(
        release(&s, "alice", &a, true).await,
        CompleteWrite::Done
    ));
    // The service writes its own balance outside any transaction: the idle escrow (20) is
    // out of step with the value (5), and a reservation checked against it could overdraw.
    s.set_outside("alice", "balance", json!(5)).await;
    let b = debit(&TxId::random(), NOW + 1, 10);
    assert!(!locked(&reserve(&s, "alice", &b).await), "stale: refused");
    // A reset only removes an escrow nobody stands on; then the value decides.
    s.items()
        .reset_escrow(s.table(), &key("alice"), &["balance"])
        .await
        .expect("reset");
    assert_eq!(escrow_of(&s, "alice", "balance").await, None);
    let refused = refused_item(reserve(&s, "alice", &b).await).expect("the item");
    assert_eq!(number(refused.attributes.get("balance")), "5", "10 > 5");
    let c = debit(&TxId::random(), NOW + 2, 5);
    assert!(locked(&reserve(&s, "alice", &c).await));
    s.items()
        .reset_escrow(s.table(), &key("alice"), &["balance"])
        .await
        .expect("reset");
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((1, "0".to_owned(), "5".to_owned())),
        "a standing reservation's escrow is never reset"
    );
}

async fn an_upper_bound_is_checked_against_the_highest_value<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    // A quota of 10: each use of 4 requires `used <= 6` before it.
    s.seed("q", json!({"used": 0})).await;
    let usage = |began| {
        lock(
            &TxId::random(),
            began,
            json!({"add": {"used": 4}, "require": {"used": {"lte": 6}}}),
        )
    };
    assert!(locked(&reserve(&s, "q", &usage(NOW)).await));
    assert!(locked(&reserve(&s, "q", &usage(NOW + 1)).await));
    assert!(
        !locked(&reserve(&s, "q", &usage(NOW + 2)).await),
        "8 + 4 would pass 10"
    );
    assert_eq!(
        escrow_of(&s, "q", "used").await,
        Some((2, "0".to_owned(), "8".to_owned()))
    );
}

async fn an_item_takes_at_most_the_most_reservations<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    let debits: Vec<Lock> = (0..3)
        .map(|n| debit(&TxId::random(), NOW + n, 10))
        .collect();
    for d in &debits[..2] {
        let w = s
            .items()
            .reserve(s.table(), &key("alice"), d, None, NOW, 2)
            .await
            .expect("reserve");
        assert!(locked(&w));
    }
    let refused = s
        .items()
        .reserve(s.table(), &key("alice"), &debits[2], None, NOW, 2)
        .await
        .expect("reserve");
    let item = refused_item(refused).expect("the item");
    assert_eq!(
        item.reservations.len(),
        2,
        "two stand: the third is refused"
    );
    // A retry of a standing one is still reserved, full or not.
    let again = s
        .items()
        .reserve(s.table(), &key("alice"), &debits[0], None, NOW, 2)
        .await
        .expect("reserve");
    assert!(locked(&again));
    // Once one is released, there is room again.
    let c = Completion {
        ..completion(&debits[0], FenceOutcome::Committed, None)
    };
    assert!(matches!(
        s.items()
            .commit(s.table(), &key("alice"), &c)
            .await
            .expect("commit"),
        CompleteWrite::Done
    ));
    let w = s
        .items()
        .reserve(s.table(), &key("alice"), &debits[2], None, NOW, 2)
        .await
        .expect("reserve");
    assert!(locked(&w));
}

async fn reservations_on_one_attribute_must_agree_on_their_bound<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    assert!(locked(
        &reserve(&s, "alice", &debit(&TxId::random(), NOW, 10)).await
    ));
    // Keep 20 in the account: another floor than the standing one.
    let keep_twenty = lock(
        &TxId::random(),
        NOW + 1,
        json!({"add": {"balance": -10}, "require": {"balance": {"gte": 30}}}),
    );
    assert!(!locked(&reserve(&s, "alice", &keep_twenty).await));
    // A debit with no floor of its own could take the balance below the standing floor.
    let unbounded = lock(&TxId::random(), NOW + 2, json!({"add": {"balance": -1}}));
    assert!(!locked(&reserve(&s, "alice", &unbounded).await));
    // A credit moves away from the floor: it joins.
    let credit = lock(&TxId::random(), NOW + 3, json!({"add": {"balance": 5}}));
    assert!(locked(&reserve(&s, "alice", &credit).await));
    // Another attribute's escrow is its own.
    let points = lock(&TxId::random(), NOW + 4, json!({"add": {"points": -1}}));
    assert!(
        locked(&reserve(&s, "alice", &points).await),
        "an absent attribute counts as 0"
    );
    assert_eq!(
        escrow_of(&s, "alice", "points").await,
        Some((1, "-1".to_owned(), "0".to_owned()))
    );
}

async fn a_retried_reservation_is_reserved_once<I: ParticipantStore, L: TxLog>(s: Stores<I, L>) {
    s.seed("alice", json!({"balance": 30})).await;
    let d = debit(&TxId::random(), NOW, 10);
    assert!(locked(&reserve(&s, "alice", &d).await));
    assert!(
        locked(&reserve(&s, "alice", &d).await),
        "a retry answers yes again"
    );
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((1, "20".to_owned(), "30".to_owned()))
    );
}

async fn a_lock_and_reservations_exclude_each_other<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    let d = debit(&TxId::random(), NOW, 10);
    assert!(locked(&reserve(&s, "alice", &d).await));
    let exclusive = lock(&TxId::random(), NOW + 1, json!({"set": {"note": "x"}}));
    let found = refused_item(prepare(&s, "alice", &exclusive).await).expect("the item");
    assert_eq!(found.reservations.len(), 1);
    release(&s, "alice", &d, true).await;
    assert!(
        locked(&prepare(&s, "alice", &exclusive).await),
        "no reservation stands any more"
    );
    let after = debit(&TxId::random(), NOW + 2, 10);
    let found = refused_item(reserve(&s, "alice", &after).await).expect("the item");
    assert_eq!(found.lock.map(|l| l.tx_id), Some(exclusive.tx_id));
}

async fn a_pause_refuses_new_reservations_until_it_ends<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    s.items()
        .pause_reservations(s.table(), &key("alice"), NOW + 100)
        .await
        .expect("pause");
    let d = debit(&TxId::random(), NOW, 10);
    assert!(!locked(&reserve(&s, "alice", &d).await), "paused at NOW");
    let later = s
        .items()
        .reserve(s.table(), &key("alice"), &d, None, NOW + 100, MOST)
        .await
        .expect("reserve");
    assert!(locked(&later), "the pause has ended");
    // Pausing a missing item creates nothing.
    s.items()
        .pause_reservations(s.table(), &key("nobody"), NOW + 100)
        .await
        .expect("pause");
    assert!(read(&s, "nobody").await.is_none());
}

async fn a_reservation_obeys_the_fence_and_the_horizon<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    let d = debit(&TxId::random(), NOW, 10);
    assert!(locked(&reserve(&s, "alice", &d).await));
    release(&s, "alice", &d, true).await;
    let late = refused_item(reserve(&s, "alice", &d).await).expect("the item");
    assert_eq!(
        late.fence.get(&d.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Committed),
        "a late reservation of an ended transaction is refused"
    );
    s.items()
        .fence_aborted(
            s.table(),
            &key("alice"),
            &TxId::random(),
            entry(FenceOutcome::Aborted, NOW + 50),
            0,
        )
        .await
        .expect("raise the horizon");
    let below = debit(&TxId::random(), NOW + 50, 1);
    assert!(
        !locked(&reserve(&s, "alice", &below).await),
        "at the horizon"
    );
    let above = debit(&TxId::random(), NOW + 51, 1);
    assert!(locked(&reserve(&s, "alice", &above).await));
}

async fn expired_reservations_are_listed_and_fence_aborted_skips_its_own<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    let early = debit(&TxId::random(), NOW, 10);
    let late = debit(&TxId::random(), NOW + 60_000, 10);
    assert!(locked(&reserve(&s, "alice", &early).await));
    assert!(locked(&reserve(&s, "alice", &late).await));
    let found = s
        .items()
        .expired_locks(s.table(), &KeySchema::string_hash("id"), NOW + 10_000, 10)
        .await
        .expect("expired");
    let found: Vec<(Key, TxId)> = found.into_iter().map(|(k, l)| (k, l.tx_id)).collect();
    assert_eq!(found, [(key("alice"), early.tx_id.clone())]);
    let own = s
        .items()
        .fence_aborted(
            s.table(),
            &key("alice"),
            &early.tx_id,
            entry(FenceOutcome::Aborted, early.began),
            9,
        )
        .await
        .expect("fence");
    assert!(
        matches!(own, CompleteWrite::Refused(Some(_))),
        "a reservation of its own is released, not fenced over"
    );
    // A stale duplicate dropped gives its escrow back and writes no entry.
    let dropped = s
        .items()
        .drop_lock(s.table(), &key("alice"), &late)
        .await
        .expect("drop");
    assert!(matches!(dropped, CompleteWrite::Done));
    let alice = read(&s, "alice").await.expect("alice");
    assert!(
        !alice.reservations.contains_key(&late.tx_id) && !alice.fence.contains_key(&late.tx_id)
    );
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((1, "20".to_owned(), "30".to_owned()))
    );
}

async fn bury_aborted_prevents_a_transaction_on_an_absent_key_only<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    let tx = TxId::random();
    let buried = s
        .items()
        .bury_aborted(
            s.table(),
            &key("zed"),
            &tx,
            entry(FenceOutcome::Aborted, NOW),
        )
        .await
        .expect("bury");
    assert!(matches!(buried, CompleteWrite::Done), "{buried:?}");
    let tomb = read(&s, "zed").await.expect("a tombstone");
    assert!(tomb.tombstone && tomb.lock.is_none(), "{tomb:?}");
    assert_eq!(
        tomb.fence.get(&tx).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
    // The key exists now (a tombstone, or a real item): refused, with the item, nothing
    // written.
    s.seed("alice", json!({"balance": 1})).await;
    for id in ["zed", "alice"] {
        let other = TxId::random();
        match s
            .items()
            .bury_aborted(
                s.table(),
                &key(id),
                &other,
                entry(FenceOutcome::Aborted, NOW),
            )
            .await
            .expect("bury")
        {
            CompleteWrite::Refused(Some(item)) => assert!(!item.fence.contains_key(&other)),
            w => panic!("{id}: {w:?}"),
        }
    }
    // A put of the prevented transaction cannot take its own tombstone.
    let put = lock(&tx, NOW, json!({"put": {"name": "zed"}}));
    assert!(!locked(&prepare(&s, "zed", &put).await));
}

async fn an_inquiry_reads_held_or_prevents_and_a_prevented_prepare_never_lands<
    I: ParticipantStore + Clone,
    L: TxLog + Clone,
>(
    s: Stores<I, L>,
) {
    use twopc_core::message::InquireRequest;
    use twopc_core::participant::{Participant, ParticipantConfig};
    use twopc_core::ports::ManualClock;
    use twopc_core::rules::Inquiry;
    s.seed("alice", json!({"balance": 10})).await;
    s.seed("bob", json!({"balance": 10})).await;
    let p = Participant::new(
        s.items().clone(),
        s.log().clone(),
        ManualClock::new(NOW),
        ParticipantConfig::default(),
    );
    let (held, gone) = (TxId::random(), TxId::random());
    let held_lock = lock(&held, NOW, json!({"set": {"memo": "x"}}));
    assert!(locked(&prepare(&s, "alice", &held_lock).await));
    let ask = |tx: &TxId, id: &str, prevent: bool| InquireRequest {
        tx_id: tx.clone(),
        deadline: NOW + 5_000,
        began: NOW,
        key: key(id),
        op: None,
        payload: None,
        prevent,
    };
    let answer = |r: InquireRequest| {
        let (p, table) = (&p, s.table().to_owned());
        async move { p.inquire(&table, &r).await.expect("inquire").inquiry }
    };
    // Held, with or without prevent; nothing written.
    assert_eq!(answer(ask(&held, "alice", false)).await, Inquiry::Held);
    assert_eq!(answer(ask(&held, "alice", true)).await, Inquiry::Held);
    // Not held: open for a helper; a recoverer prevents it (an aborted entry), which is final.
    assert_eq!(answer(ask(&gone, "bob", false)).await, Inquiry::Open);
    assert_eq!(answer(ask(&gone, "bob", true)).await, Inquiry::Prevented);
    assert_eq!(answer(ask(&gone, "bob", false)).await, Inquiry::Prevented);
    let late = lock(&gone, NOW, json!({"set": {"memo": "late"}}));
    assert!(
        !locked(&prepare(&s, "bob", &late).await),
        "a prevented prepare never lands"
    );
    // Beside another's lock, too; and on an absent key (a tombstone).
    assert_eq!(answer(ask(&gone, "alice", true)).await, Inquiry::Prevented);
    assert_eq!(answer(ask(&gone, "carol", true)).await, Inquiry::Prevented);
    assert!(read(&s, "carol").await.is_some_and(|c| c.tombstone));
    let bob = read(&s, "bob").await.expect("bob");
    assert_eq!(number(bob.attributes.get("balance")), "10");
    assert_eq!(
        bob.fence.get(&gone).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
}

async fn an_inquiry_about_another_operation_than_its_hold_is_prevented_and_writes_nothing<
    I: ParticipantStore + Clone,
    L: TxLog + Clone,
>(
    s: Stores<I, L>,
) {
    use twopc_core::message::InquireRequest;
    use twopc_core::participant::{Participant, ParticipantConfig};
    use twopc_core::ports::ManualClock;
    use twopc_core::rules::Inquiry;
    // GIVEN alice locked by a transaction for one of its operations (the item named twice)
    s.seed("alice", json!({"balance": 10})).await;
    let p = Participant::new(
        s.items().clone(),
        s.log().clone(),
        ManualClock::new(NOW),
        ParticipantConfig::default(),
    );
    let tx = TxId::random();
    let first = json!({"set": {"memo": "first"}});
    assert!(locked(
        &prepare(&s, "alice", &lock(&tx, NOW, first.clone())).await
    ));
    let ask = |o: Option<Value>, prevent: bool| InquireRequest {
        tx_id: tx.clone(),
        deadline: NOW + 5_000,
        began: NOW,
        key: key("alice"),
        op: o.map(op),
        payload: None,
        prevent,
    };
    let answer = |r: InquireRequest| {
        let (p, table) = (&p, s.table().to_owned());
        async move { p.inquire(&table, &r).await.expect("inquire").inquiry }
    };
    // WHEN an inquiry asks about its other operation THEN it is prevented, with or without
    // prevent, and nothing is written: the hold keeps its operation, no entry fences it
    let second = json!({"set": {"memo": "second"}});
    for prevent in [false, true] {
        assert_eq!(
            answer(ask(Some(second.clone()), prevent)).await,
            Inquiry::Prevented
        );
    }
    let alice = read(&s, "alice").await.expect("alice");
    assert_eq!(alice.lock.map(|l| l.tx_id), Some(tx.clone()));
    assert!(alice.fence.is_empty());
    // The operation the hold carries, or none given, finds it held.
    assert_eq!(answer(ask(Some(first), true)).await, Inquiry::Held);
    assert_eq!(answer(ask(None, true)).await, Inquiry::Held);
}

/// A `COMMITTED` record for a native transaction.
fn native_record() -> TxRecord {
    let mut r = record(NOW + 5_000);
    r.status = TxStatus::Committed;
    r
}

/// One native write per `(id, op)`.
async fn native<I: ParticipantStore, L: TxLog>(
    s: &Stores<I, L>,
    r: &TxRecord,
    ops: &[(&str, Value)],
) -> NativeOutcome {
    let keys: Vec<Key> = ops.iter().map(|(id, _)| key(id)).collect();
    let ops: Vec<Operation> = ops.iter().map(|(_, v)| op(v.clone())).collect();
    let writes: Vec<NativeWrite<'_>> = keys
        .iter()
        .zip(&ops)
        .map(|(key, op)| NativeWrite {
            table: s.table(),
            key,
            op,
        })
        .collect();
    s.native.commit_at_once(r, &writes).await.expect("native")
}

fn cancelled_items(o: NativeOutcome) -> Vec<NativeItem> {
    match o {
        NativeOutcome::Cancelled {
            record: None,
            items,
        } => items,
        other => panic!("expected a cancellation by the items, got {other:?}"),
    }
}

async fn a_native_transaction_writes_every_item_and_the_record_at_once<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    s.seed("bob", json!({"balance": 5})).await;
    let r = native_record();
    let outcome = native(
        &s,
        &r,
        &[
            (
                "alice",
                json!({"add": {"balance": -30}, "require": {"balance": {"gte": 30}}}),
            ),
            (
                "bob",
                json!({"add": {"balance": "30.5"}, "set": {"note": "paid"}}),
            ),
            ("carol", json!({"put": {"balance": 0}})),
        ],
    )
    .await;
    assert_eq!(outcome, NativeOutcome::Committed);
    let alice = read(&s, "alice").await.expect("alice");
    assert_eq!(number(alice.attributes.get("balance")), "70");
    let bob = read(&s, "bob").await.expect("bob");
    assert_eq!(number(bob.attributes.get("balance")), "35.5");
    assert_eq!(bob.attributes.get("note"), Some(&json!("paid")));
    let carol = read(&s, "carol").await.expect("carol");
    assert!(!carol.placeholder && !carol.tombstone);
    for item in [&alice, &bob, &carol] {
        // The commit marks, as a protocol commit writes them; no lock, no fence entry.
        assert_eq!(number(item.attributes.get(layout::VERSION)), "1");
        assert_eq!(
            item.attributes.get(layout::LAST_TX),
            Some(&json!(r.tx_id.as_str()))
        );
        assert!(item.lock.is_none() && item.fence.is_empty());
    }
    let stored = s
        .log()
        .get(&r.tx_id)
        .await
        .expect("get")
        .expect("the record");
    assert_eq!(stored.status, TxStatus::Committed);
}

async fn a_native_transaction_writes_nothing_when_one_item_refuses<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 10})).await;
    s.seed("bob", json!({"balance": 5, "name": "Bob"})).await;
    let r = native_record();
    let ops = [
        (
            "alice",
            json!({"add": {"balance": -30}, "require": {"balance": {"gte": 30}}}),
        ),
        ("bob", json!({"add": {"balance": 30}})),
    ];
    let items = cancelled_items(native(&s, &r, &ops).await);
    assert_eq!(items.len(), 2);
    assert_eq!(items[1], NativeItem::Held, "bob's condition held");
    let NativeItem::Refused(Some(found)) = &items[0] else {
        panic!("alice refused with the item, got {:?}", items[0]);
    };
    // Read into the vote a prepare refused for the same reason gets.
    let l = lock(&r.tx_id, r.created_at, ops[0].1.clone());
    match classify_native_refusal(Some(found), &l, NOW) {
        Refusal::Vote(reason, message) => {
            assert_eq!(reason, twopc_core::record::VoteReason::Condition);
            assert!(message.contains("balance"), "{message}");
        }
        other => panic!("expected a vote, got {other:?}"),
    }
    // Shape: an update of no item, a put of an existing one.
    let shapes = cancelled_items(
        native(
            &s,
            &native_record(),
            &[
                ("nobody", json!({"add": {"balance": 1}})),
                ("bob", json!({"put": {"balance": 1}})),
            ],
        )
        .await,
    );
    assert_eq!(shapes[0], NativeItem::Refused(None));
    assert!(matches!(&shapes[1], NativeItem::Refused(Some(_))));
    // Nothing written anywhere.
    assert_eq!(
        number(
            read(&s, "alice")
                .await
                .expect("alice")
                .attributes
                .get("balance")
        ),
        "10"
    );
    let bob = read(&s, "bob").await.expect("bob");
    assert_eq!(number(bob.attributes.get("balance")), "5");
    assert!(!bob.attributes.contains_key(layout::VERSION));
    assert!(read(&s, "nobody").await.is_none());
    assert!(s.log().get(&r.tx_id).await.expect("get").is_none());
}

async fn a_native_transaction_gives_way_where_the_protocol_holds_an_item<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    s.seed("bob", json!({"balance": 100})).await;
    // A lock on alice, a reservation on bob, a placeholder on carol.
    let locked_by = lock(&TxId::random(), NOW, json!({"set": {"x": 1}}));
    assert!(locked(&prepare(&s, "alice", &locked_by).await));
    assert!(locked(
        &reserve(&s, "bob", &debit(&TxId::random(), NOW, 10)).await
    ));
    let creating = lock(&TxId::random(), NOW, json!({"put": {"balance": 1}}));
    assert!(locked(&prepare(&s, "carol", &creating).await));
    let r = native_record();
    let ops = [
        ("alice", json!({"add": {"balance": 1}})),
        (
            "bob",
            json!({"add": {"balance": -1}, "require": {"balance": {"gte": 1}}}),
        ),
        ("carol", json!({"put": {"balance": 2}})),
    ];
    let items = cancelled_items(native(&s, &r, &ops).await);
    for ((id, v), found) in ops.iter().zip(&items) {
        let NativeItem::Refused(item) = found else {
            panic!("{id}: expected a refusal, got {found:?}");
        };
        let l = lock(&r.tx_id, r.created_at, v.clone());
        assert!(
            matches!(
                classify_native_refusal(item.as_deref(), &l, NOW),
                Refusal::Held { .. }
            ),
            "{id}: the protocol holds it, so the transaction takes the protocol path"
        );
    }
    assert!(read(&s, "alice").await.expect("alice").lock.is_some());
    assert!(s.log().get(&r.tx_id).await.expect("get").is_none());
}

async fn a_heat_mark_rides_on_a_hold_and_turns_native_writes_away_while_live<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    s.seed("bob", json!({"balance": 100})).await;
    // A lock and a reservation, each written with a mark; released, the marks stay.
    let l = lock(&TxId::random(), NOW, json!({"set": {"x": 1}}));
    let written = (s.items())
        .prepare(s.table(), &key("alice"), &l, Some(NOW + 100))
        .await;
    assert!(locked(&written.expect("prepare")));
    let d = debit(&TxId::random(), NOW, 10);
    let written = (s.items())
        .reserve(s.table(), &key("bob"), &d, Some(NOW + 200), NOW, MOST)
        .await;
    assert!(locked(&written.expect("reserve")));
    release(&s, "alice", &l, false).await;
    release(&s, "bob", &d, false).await;
    assert_eq!(read(&s, "alice").await.expect("alice").hot_until, NOW + 100);
    assert_eq!(read(&s, "bob").await.expect("bob").hot_until, NOW + 200);
    // A native write begun while a mark is live gives way there, the item returned with it.
    let ops = [
        ("alice", json!({"add": {"balance": -1}})),
        ("bob", json!({"add": {"balance": 1}})),
    ];
    let r = native_record(); // began at NOW
    let items = cancelled_items(native(&s, &r, &ops).await);
    for ((id, v), found) in ops.iter().zip(&items) {
        let NativeItem::Refused(Some(item)) = found else {
            panic!("{id}: expected a refusal with the item, got {found:?}");
        };
        let l = lock(&r.tx_id, r.created_at, v.clone());
        let seen = Seen::preparing(Some(item), &l, r.created_at);
        assert_eq!(rules::native_write(seen, false), NativeStep::Heated, "{id}");
    }
    // Begun once alice's mark ended and while bob's is live: bob alone turns it away.
    let mut r = native_record();
    r.created_at = NOW + 100;
    let items = cancelled_items(native(&s, &r, &ops).await);
    assert!(matches!(items[0], NativeItem::Held), "{:?}", items[0]);
    assert!(matches!(items[1], NativeItem::Refused(Some(_))));
    // Begun once both ended, it applies.
    r.created_at = NOW + 200;
    assert!(matches!(
        native(&s, &r, &ops).await,
        NativeOutcome::Committed
    ));
    assert_eq!(
        number(
            read(&s, "alice")
                .await
                .expect("alice")
                .attributes
                .get("balance")
        ),
        "99"
    );
}

async fn a_native_transaction_is_refused_by_a_record_already_there<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    let r = native_record();
    assert!(matches!(
        s.log().create(&r).await.expect("create"),
        Created::New
    ));
    match native(&s, &r, &[("alice", json!({"add": {"balance": -1}}))]).await {
        NativeOutcome::Cancelled {
            record: Some(existing),
            items,
        } => {
            assert_eq!(existing.tx_id, r.tx_id);
            assert_eq!(items, vec![NativeItem::Held]);
        }
        other => panic!("expected a cancellation by the record, got {other:?}"),
    }
    assert_eq!(
        number(
            read(&s, "alice")
                .await
                .expect("alice")
                .attributes
                .get("balance")
        ),
        "100",
        "a replay applies nothing"
    );
}

async fn a_native_write_removes_the_idle_escrow_of_what_it_adds_to<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    let d = debit(&TxId::random(), NOW, 10);
    assert!(locked(&reserve(&s, "alice", &d).await));
    release(&s, "alice", &d, true).await;
    assert!(
        read(&s, "alice")
            .await
            .expect("alice")
            .escrow
            .contains_key("balance"),
        "the last release leaves the escrow idle"
    );
    let outcome = native(
        &s,
        &native_record(),
        &[("alice", json!({"add": {"balance": -5}}))],
    )
    .await;
    assert_eq!(outcome, NativeOutcome::Committed);
    let alice = read(&s, "alice").await.expect("alice");
    assert_eq!(number(alice.attributes.get("balance")), "15");
    assert!(alice.escrow.is_empty(), "{:?}", alice.escrow);
    // The next reservation starts from the value.
    assert!(locked(
        &reserve(&s, "alice", &debit(&TxId::random(), NOW + 1, 15)).await
    ));
}

async fn a_native_put_takes_a_tombstone_and_keeps_its_fence<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 1})).await;
    let deleted = committed(&s, "alice", NOW, json!({"delete": true})).await;
    let r = native_record();
    let outcome = native(&s, &r, &[("alice", json!({"put": {"balance": 7}}))]).await;
    assert_eq!(outcome, NativeOutcome::Committed);
    let alice = read(&s, "alice").await.expect("alice");
    assert!(!alice.tombstone && !alice.placeholder);
    assert_eq!(number(alice.attributes.get("balance")), "7");
    assert_eq!(number(alice.attributes.get(layout::VERSION)), "2");
    assert!(
        alice.fence.contains_key(&deleted),
        "the delete's entry still refuses a late prepare of it"
    );
    let late = lock(&deleted, NOW, json!({"put": {"balance": 9}}));
    assert!(!locked(&prepare(&s, "alice", &late).await));
}

// ---------------------------------------------------------------- an idempotency key used again

/// A week after `NOW`: when a key's next transaction begins, its first one's record expired.
const WEEK_LATER: u64 = NOW + 7 * 24 * 3_600_000;

async fn abort<I: ParticipantStore, L: TxLog>(
    s: &Stores<I, L>,
    id: &str,
    l: &Lock,
) -> CompleteWrite {
    let c = completion(l, FenceOutcome::Aborted, None);
    s.items()
        .abort(s.table(), &key(id), &c)
        .await
        .expect("abort")
}

async fn retire<I: ParticipantStore, L: TxLog>(
    s: &Stores<I, L>,
    id: &str,
    tx: &TxId,
    former: FenceEntry,
    horizon: u64,
) -> CompleteWrite {
    s.items()
        .retire(s.table(), &key(id), tx, former, horizon)
        .await
        .expect("retire")
}

async fn a_former_transactions_entry_under_the_id_is_retired_before_the_new_ones_release<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    let id = TxId::for_idempotency_key("order-42");
    let first = lock(&id, NOW, json!({"add": {"balance": 1}}));
    assert!(locked(&prepare(&s, "alice", &first).await));
    assert!(matches!(
        commit(&s, "alice", &first, None).await.expect("commit"),
        CompleteWrite::Done
    ));
    // The same id a week later: another transaction, its prepare admitted beside the entry.
    let again = lock(&id, WEEK_LATER, json!({"add": {"balance": 2}}));
    assert!(locked(&prepare(&s, "alice", &again).await));
    assert!(
        !locked(&prepare(&s, "alice", &first).await),
        "its own entry"
    );
    // Its release may not write over the entry: refused, as is an abort, until it is retired.
    let former = entry(FenceOutcome::Committed, NOW);
    for refused in [
        commit(&s, "alice", &again, None).await.expect("commit"),
        abort(&s, "alice", &again).await,
    ] {
        let CompleteWrite::Refused(Some(item)) = refused else {
            panic!("{refused:?}")
        };
        assert_eq!(item.fence.get(&id), Some(&former));
        assert!(item.lock.as_ref().is_some_and(|l| l.is_of(&id, WEEK_LATER)));
    }
    // Retired only as found, never lowering the horizon.
    let wrong = entry(FenceOutcome::Aborted, NOW);
    assert!(matches!(
        retire(&s, "alice", &id, wrong, NOW).await,
        CompleteWrite::Refused(Some(_))
    ));
    assert!(matches!(
        retire(&s, "alice", &id, former, NOW).await,
        CompleteWrite::Done
    ));
    let alice = read(&s, "alice").await.expect("alice");
    assert!(!alice.fence.contains_key(&id));
    assert_eq!(alice.horizon, NOW);
    assert!(matches!(
        commit(&s, "alice", &again, None).await.expect("commit"),
        CompleteWrite::Done
    ));
    let alice = read(&s, "alice").await.expect("alice");
    assert_eq!(number(alice.attributes.get("balance")), "103");
    assert_eq!(
        alice.fence.get(&id),
        Some(&entry(FenceOutcome::Committed, WEEK_LATER))
    );
    // The first transaction's late prepare: below the horizon now.
    let late = refused_item(prepare(&s, "alice", &first).await).expect("the item");
    assert!(late.lock.is_none() && late.horizon >= first.began);
    assert!(matches!(
        retire(&s, "alice", &id, former, NOW).await,
        CompleteWrite::Refused(Some(_))
    ));
}

async fn holds_are_their_transactions_by_id_and_began<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 100})).await;
    let id = TxId::random();
    let first = lock(&id, NOW, json!({"add": {"balance": 1}}));
    assert!(locked(&prepare(&s, "alice", &first).await));
    // Another transaction under the id: not a retry of the lock, which is not its own.
    let again = lock(&id, WEEK_LATER, json!({"add": {"balance": 1}}));
    let found = refused_item(prepare(&s, "alice", &again).await).expect("the item");
    assert!(found.lock.as_ref().is_some_and(|l| l.is_of(&id, NOW)));
    assert!(matches!(
        commit(&s, "alice", &again, None).await.expect("commit"),
        CompleteWrite::Refused(Some(_))
    ));
    assert!(matches!(
        abort(&s, "alice", &again).await,
        CompleteWrite::Refused(Some(_))
    ));
    let drop = |holder: Lock| {
        let s = &s;
        async move {
            s.items()
                .drop_lock(s.table(), &key("alice"), &holder)
                .await
                .expect("drop")
        }
    };
    assert!(matches!(
        drop(again.clone()).await,
        CompleteWrite::Refused(Some(_))
    ));
    // It may fence itself out beside the other's lock (which is not its own).
    let fenced = s
        .items()
        .fence_aborted(
            s.table(),
            &key("alice"),
            &id,
            entry(FenceOutcome::Aborted, WEEK_LATER),
            9,
        )
        .await
        .expect("fence");
    assert!(matches!(fenced, CompleteWrite::Done));
    assert!(matches!(drop(first.clone()).await, CompleteWrite::Done));
    let alice = read(&s, "alice").await.expect("alice");
    assert!(alice.lock.is_none());
    assert_eq!(number(alice.attributes.get("balance")), "100");
}

async fn a_former_transactions_reservation_under_the_id_refuses_a_reservation_until_dropped<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    let id = TxId::random();
    let first = debit(&id, NOW, 10);
    assert!(locked(&reserve(&s, "alice", &first).await));
    let again = debit(&id, WEEK_LATER, 10);
    let found = refused_item(reserve(&s, "alice", &again).await).expect("the item");
    assert_eq!(found.reservations.get(&id).map(|r| r.began), Some(NOW));
    assert!(matches!(
        release(&s, "alice", &again, true).await,
        CompleteWrite::Refused(Some(_))
    ));
    let dropped = s
        .items()
        .drop_lock(s.table(), &key("alice"), &first)
        .await
        .expect("drop");
    assert!(matches!(dropped, CompleteWrite::Done));
    assert!(locked(&reserve(&s, "alice", &again).await));
    release(&s, "alice", &again, true).await;
    let alice = read(&s, "alice").await.expect("alice");
    assert_eq!(number(alice.attributes.get("balance")), "20");
}

async fn a_never_begun_record_is_created_at_its_holds_began<I: ParticipantStore, L: TxLog>(
    s: Stores<I, L>,
) {
    let tx = TxId::random();
    let log = s.log();
    assert!(matches!(
        log.create_aborted(&tx, NOW - 5_000, NOW)
            .await
            .expect("aborted"),
        Created::New
    ));
    let r = log.get(&tx).await.expect("get").expect("record");
    assert_eq!((r.status, r.created_at), (TxStatus::Aborted, NOW - 5_000));
}

/// One item named twice (issue 45, items 2 and 3): the abort sent for the other name carries
/// that name's operation. What the reservation gives back is its hold's, never the message's:
/// otherwise the escrow keeps a phantom that refuses later debits or lets one overdraw.
async fn an_abort_gives_a_reservation_back_by_its_holds_operation_not_the_messages<
    I: ParticipantStore,
    L: TxLog,
>(
    s: Stores<I, L>,
) {
    s.seed("alice", json!({"balance": 30})).await;
    let tx = TxId::random();
    let held = debit(&tx, NOW, 10);
    assert!(locked(&reserve(&s, "alice", &held).await));
    // The abort of the other name's operation (a smaller debit) lands.
    let message = debit(&tx, NOW, 3);
    assert!(matches!(
        release(&s, "alice", &message, false).await,
        CompleteWrite::Done
    ));
    let alice = read(&s, "alice").await.expect("alice");
    assert!(alice.reservations.is_empty());
    assert_eq!(number(alice.attributes.get("balance")), "30");
    assert_eq!(
        alice.fence.get(&tx).map(|e| e.outcome),
        Some(FenceOutcome::Aborted)
    );
    // Nothing left in escrow: the last reservation leaves it idle at the value.
    assert_eq!(
        escrow_of(&s, "alice", "balance").await,
        Some((0, "30".to_owned(), "30".to_owned()))
    );
    // So a debit of the whole balance is admitted, and a later one past it refused.
    assert!(locked(
        &reserve(&s, "alice", &debit(&TxId::random(), NOW + 1, 30)).await
    ));
    assert!(!locked(
        &reserve(&s, "alice", &debit(&TxId::random(), NOW + 2, 1)).await
    ));
}
