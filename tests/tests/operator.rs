//! The operator's port ([`OperatorLog`]) as a contract, run against both stores: the in-memory
//! log and the DynamoDB adapter on DynamoDB Local (its `pending-by-deadline` and `ended-by-time`
//! indexes). Listing by status and time, counting, noting an action; and the decision's time
//! every status swap to a decision records.

use serde_json::json;
use twopc_core::ids::TxId;
use twopc_core::operator::{ActionNote, DONE, ListQuery, OperatorAction};
use twopc_core::ports::{OperatorLog, Swapped, TxLog};
use twopc_core::record::TxRecord;
use twopc_core::status::TxStatus;

/// Each case, once per implementation (the DynamoDB one keeps its world, and so its tables).
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test]
            async fn $case() {
                super::$case(&twopc_core::memory::MemoryTxLog::default()).await;
            })*
        }
        mod dynamodb {
            $(#[tokio::test]
            async fn $case() {
                let world = twopc_tests::World::new().await;
                super::$case(&world.log).await;
            })*
        }
    };
}

contract!(
    unfinished_transactions_are_listed_by_deadline_and_filtered,
    ended_transactions_are_listed_newest_first_within_a_window_page_by_page,
    counts_say_how_many_are_pending_overdue_and_ended_since,
    an_action_note_is_appended_and_moves_nothing_else,
    a_decision_records_when_it_was_made,
);

const NOW: u64 = 1_800_000_000_000;

/// A record of `status` (created so), with a participant of `service` on item `id`.
fn record(status: TxStatus, deadline: u64, service: &str, id: &str) -> TxRecord {
    let mut r = TxRecord::never_began(&TxId::random(), deadline - 5_000);
    r.status = status;
    r.deadline = deadline;
    r.begun_by = "operator-contract".into();
    r.participants = vec![
        serde_json::from_value(json!({
            "participant": service, "target": {"transport": "direct", "table": "t"},
            "key": {"id": id}, "op": {"add": {"balance": 1}}
        }))
        .expect("an entry"),
    ];
    r
}

/// A record created `PREPARING`, then decided and ended `to` at `at`.
async fn ended<L: TxLog>(log: &L, to: TxStatus, at: u64, id: &str) -> TxRecord {
    let r = record(TxStatus::Preparing, at - 1_000, "accounts", id);
    log.create(&r).await.expect("create");
    let deciding = TxStatus::deciding(to.decision().expect("a decided status"));
    let decided = swap(log, &r, deciding, at - 1).await;
    swap(log, &decided, to, at).await
}

async fn swap<L: TxLog>(log: &L, r: &TxRecord, to: TxStatus, at: u64) -> TxRecord {
    match log.transition(r, to, None, at).await.expect("swap") {
        Swapped::Done(d) => *d,
        other => panic!("{other:?}"),
    }
}

fn ids(records: &[TxRecord]) -> Vec<TxId> {
    records.iter().map(|r| r.tx_id.clone()).collect()
}

async fn unfinished_transactions_are_listed_by_deadline_and_filtered<L: TxLog + OperatorLog>(
    log: &L,
) {
    let late = record(TxStatus::Preparing, NOW - 1_000, "accounts", "alice");
    let staging = record(TxStatus::Staging, NOW + 1_000, "inventory", "widget");
    let later = record(TxStatus::Preparing, NOW + 2_000, "accounts", "bob");
    for r in [&later, &late, &staging] {
        log.create(r).await.expect("create");
    }
    ended(log, TxStatus::Committed, NOW, "carol").await;
    let list = |q: ListQuery| async move { log.list(&q).await.expect("list") };
    let all = ListQuery {
        limit: 10,
        ..ListQuery::default()
    };

    let page = list(all.clone()).await;
    assert_eq!(
        ids(&page.records),
        ids(&[late.clone(), staging.clone(), later.clone()]),
        "every unfinished one, oldest deadline first, none ended"
    );
    assert_eq!(page.next, None);

    let overdue = list(ListQuery {
        overdue_at: Some(NOW),
        ..all.clone()
    })
    .await;
    assert_eq!(ids(&overdue.records), ids(std::slice::from_ref(&late)));

    let one_status = list(ListQuery {
        status: Some(TxStatus::Staging),
        ..all.clone()
    })
    .await;
    assert_eq!(
        ids(&one_status.records),
        ids(std::slice::from_ref(&staging))
    );

    let on_accounts = list(ListQuery {
        participant: Some("accounts".into()),
        ..all.clone()
    })
    .await;
    assert_eq!(
        ids(&on_accounts.records),
        ids(&[late.clone(), later.clone()])
    );
    let on_bob = list(ListQuery {
        participant: Some("accounts".into()),
        key: Some([("id".to_owned(), json!("bob"))].into()),
        ..all.clone()
    })
    .await;
    assert_eq!(ids(&on_bob.records), ids(std::slice::from_ref(&later)));

    // Two a page, then the rest from the cursor.
    let first = list(ListQuery {
        limit: 2,
        ..all.clone()
    })
    .await;
    assert_eq!(ids(&first.records), ids(&[late, staging]));
    let next = first.next.expect("a next page");
    let second = list(ListQuery {
        limit: 2,
        after: Some(next),
        ..all
    })
    .await;
    assert_eq!(ids(&second.records), ids(&[later]));
    assert_eq!(second.next, None);
}

async fn ended_transactions_are_listed_newest_first_within_a_window_page_by_page<
    L: TxLog + OperatorLog,
>(
    log: &L,
) {
    let first = ended(log, TxStatus::Committed, NOW + 10, "a").await;
    let aborted = ended(log, TxStatus::Aborted, NOW + 20, "b").await;
    let second = ended(log, TxStatus::Committed, NOW + 30, "c").await;
    let third = ended(log, TxStatus::Committed, NOW + 40, "d").await;
    log.create(&record(TxStatus::Preparing, NOW, "accounts", "e"))
        .await
        .expect("create");
    let committed = ListQuery {
        status: Some(TxStatus::Committed),
        limit: 10,
        ..ListQuery::default()
    };
    let list = |q: ListQuery| async move { log.list(&q).await.expect("list") };

    let page = list(committed.clone()).await;
    assert_eq!(
        ids(&page.records),
        ids(&[third.clone(), second.clone(), first.clone()])
    );
    assert!(page.records.iter().all(|r| r.status == TxStatus::Committed));
    let aborts = list(ListQuery {
        status: Some(TxStatus::Aborted),
        ..committed.clone()
    })
    .await;
    assert_eq!(ids(&aborts.records), ids(&[aborted]));

    let window = list(ListQuery {
        since: Some(NOW + 30),
        until: Some(NOW + 40),
        ..committed.clone()
    })
    .await;
    assert_eq!(
        ids(&window.records),
        ids(std::slice::from_ref(&second)),
        "since is inclusive, until exclusive"
    );

    let mut seen = vec![];
    let mut after = None;
    loop {
        let page = list(ListQuery {
            limit: 1,
            after: after.clone(),
            ..committed.clone()
        })
        .await;
        seen.extend(ids(&page.records));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(
        seen,
        ids(&[third, second, first]),
        "one a page, newest first"
    );
}

async fn counts_say_how_many_are_pending_overdue_and_ended_since<L: TxLog + OperatorLog>(log: &L) {
    for deadline in [NOW - 2, NOW - 1, NOW + 1] {
        log.create(&record(TxStatus::Preparing, deadline, "accounts", "x"))
            .await
            .expect("create");
    }
    ended(log, TxStatus::Committed, NOW - 100, "a").await;
    ended(log, TxStatus::Committed, NOW + 10, "b").await;
    ended(log, TxStatus::Aborted, NOW + 20, "c").await;
    let c = log.counts(NOW, NOW).await.expect("counts");
    assert_eq!(
        (c.pending, c.overdue, c.committed, c.aborted, c.since),
        (3, 2, 1, 1, NOW)
    );
}

async fn an_action_note_is_appended_and_moves_nothing_else<L: TxLog + OperatorLog>(log: &L) {
    let r = ended(log, TxStatus::Aborted, NOW, "a").await;
    let note = |at| ActionNote {
        action: OperatorAction::Abort,
        by: "arn:aws:iam::123456789012:user/ops".into(),
        at,
        result: DONE.into(),
        status: TxStatus::Aborted,
    };
    assert!(
        log.note_action(&r.tx_id, &note(NOW + 5))
            .await
            .expect("note")
    );
    assert!(
        log.note_action(&r.tx_id, &note(NOW + 6))
            .await
            .expect("note")
    );
    let stored = log.get(&r.tx_id).await.expect("get").expect("a record");
    assert_eq!(stored.operator_actions, vec![note(NOW + 5), note(NOW + 6)]);
    assert_eq!(
        (stored.status, stored.updated_at),
        (r.status, r.updated_at),
        "status and time stay"
    );
    let listed = log
        .list(&ListQuery {
            status: Some(TxStatus::Aborted),
            since: Some(NOW),
            until: Some(NOW + 1),
            limit: 5,
            ..ListQuery::default()
        })
        .await
        .expect("list");
    assert_eq!(
        ids(&listed.records),
        vec![r.tx_id.clone()],
        "listed where it was"
    );
    assert!(
        !log.note_action(&TxId::random(), &note(NOW))
            .await
            .expect("note"),
        "no record, no note"
    );
}

async fn a_decision_records_when_it_was_made<L: TxLog + OperatorLog>(log: &L) {
    let r = record(TxStatus::Staging, NOW, "accounts", "a");
    log.create(&r).await.expect("create");
    let decided = swap(log, &r, TxStatus::Committing, NOW + 7).await;
    assert_eq!(decided.decided_at, Some(NOW + 7));
    swap(log, &decided, TxStatus::Committed, NOW + 9).await;
    let stored = log.get(&r.tx_id).await.expect("get").expect("a record");
    assert_eq!(
        (stored.decided_at, stored.updated_at),
        (Some(NOW + 7), NOW + 9)
    );
}

// ---------------------------------------------------------------------------------------------
// The operator's actions (`Coordinator::act`) and what it is shown (`Coordinator::holds`), on
// both stores: a coordinator over the in-memory stores and one over DynamoDB Local, each with
// the `accounts` and `wallets` tables a transfer touches.

mod acting {
    use serde_json::{Value, json};
    use twopc_core::codes;
    use twopc_core::coordinator::{Acted, CommitMode, Coordinator, CoordinatorConfig};
    use twopc_core::direct::DirectTransport;
    use twopc_core::fault::FaultPoint;
    use twopc_core::ids::TxId;
    use twopc_core::memory::{MemoryItems, MemoryTxLog};
    use twopc_core::operator::{Hold, OperatorAction};
    use twopc_core::participant::Participant;
    use twopc_core::ports::{Clock, ManualClock, OperatorLog, ParticipantStore, TxLog};
    use twopc_core::record::Target;
    use twopc_core::request::Limits;
    use twopc_core::service::{KeySchema, ServiceConfig};
    use twopc_core::status::TxStatus;
    use twopc_tests::{CrashAt, SubmitToEnd, World, key, transfer};

    /// A coordinator, its stores and its clock.
    struct Rig<S, L> {
        coordinator: Coordinator<L, DirectTransport<S, L, ManualClock>, ManualClock>,
        participant: Participant<S, L, ManualClock>,
        items: S,
        log: L,
        clock: ManualClock,
        /// `accounts`' and `wallets`' tables.
        tables: [String; 2],
        /// Keeps DynamoDB's tables' world alive.
        _world: Option<Box<World>>,
    }

    async fn memory() -> Rig<MemoryItems, MemoryTxLog> {
        // The services a World configures, over in-memory tables.
        let tables = ["accounts".to_owned(), "wallets".to_owned()];
        let services = tables
            .iter()
            .map(|t| {
                let target = Target::Direct { table: t.clone() };
                (
                    t.clone(),
                    ServiceConfig::table(target, KeySchema::string_hash("id")),
                )
            })
            .collect();
        let config = CoordinatorConfig {
            id: "in-memory".into(),
            services,
            limits: Limits::default(),
            mode: CommitMode::Classic,
            heat_window_ms: CoordinatorConfig::DEFAULT_HEAT_WINDOW_MS,
        };
        let (items, log, clock) = (
            MemoryItems::default(),
            MemoryTxLog::default(),
            ManualClock::new(1_800_000_000_000),
        );
        items.put(
            &tables[0],
            &key("alice"),
            [("balance".into(), json!(100))].into(),
        );
        items.put(
            &tables[1],
            &key("bob"),
            [("balance".into(), json!(0))].into(),
        );
        let participant = Participant::new(
            items.clone(),
            log.clone(),
            clock.clone(),
            Default::default(),
        );
        let coordinator = Coordinator::new(
            log.clone(),
            DirectTransport::new(participant.clone()),
            clock.clone(),
            config,
        );
        Rig {
            coordinator,
            participant,
            items,
            log,
            clock,
            tables,
            _world: None,
        }
    }

    async fn dynamodb() -> Rig<twopc_dynamo::DynamoItems, twopc_dynamo::DynamoTxLog> {
        let w = World::new().await;
        w.seed("accounts", "alice", json!({"balance": 100})).await;
        w.seed("wallets", "bob", json!({"balance": 0})).await;
        Rig {
            coordinator: w.coordinator_via(w.direct()),
            participant: w.participant.clone(),
            items: twopc_dynamo::DynamoItems::new(w.client.clone()),
            log: w.log.clone(),
            clock: w.clock.clone(),
            tables: [w.accounts.clone(), w.wallets.clone()],
            _world: Some(Box::new(w)),
        }
    }

    macro_rules! both {
        ($($case:ident),* $(,)?) => {
            mod on_memory {
                $(#[tokio::test]
                async fn $case() {
                    super::$case(super::memory().await).await;
                })*
            }
            mod on_dynamodb {
                $(#[tokio::test]
                async fn $case() {
                    super::$case(super::dynamodb().await).await;
                })*
            }
        };
    }

    both!(
        an_abort_waits_for_the_deadline_then_releases_every_hold_and_is_noted,
        recover_now_finishes_a_decided_transaction_whatever_its_backoff,
    );

    impl<S: ParticipantStore + Clone, L: TxLog + OperatorLog + Clone> Rig<S, L> {
        /// A transfer alice → bob whose coordinator dies at `point`.
        async fn crashed(&self, point: FaultPoint) -> TxId {
            let k = format!("op-{}", TxId::random());
            let crash = std::sync::Arc::new(CrashAt::new(point));
            let c = Coordinator::new(
                self.log.clone(),
                DirectTransport::new(self.participant.clone()),
                self.clock.clone(),
                self.coordinator.config().clone(),
            )
            .with_faults(crash.clone());
            let stopped = crash
                .run(c.submit_to_end(&transfer("alice", "bob", 10), Some(&k)))
                .await
                .expect_err("must crash");
            assert_eq!(stopped, point);
            TxId::for_idempotency_key(&k)
        }

        async fn holds(&self, tx: &TxId) -> Vec<Hold> {
            let r = self.log.get(tx).await.expect("get").expect("a record");
            self.coordinator.holds(&r, &self.items).await
        }

        async fn balance(&self, table: usize, id: &str) -> Value {
            let s = self
                .items
                .read(&self.tables[table], &key(id))
                .await
                .expect("read");
            s.and_then(|s| s.attributes.get("balance").cloned())
                .unwrap_or(Value::Null)
        }

        async fn act(&self, tx: &TxId, action: OperatorAction) -> Acted {
            let (acted, _) = self.coordinator.act(tx, action, "ops").await.expect("act");
            acted
        }
    }

    fn refused(acted: &Acted) -> Option<&'static str> {
        match acted {
            Acted::Refused { code, .. } => Some(code.name),
            _ => None,
        }
    }

    async fn an_abort_waits_for_the_deadline_then_releases_every_hold_and_is_noted<
        S: ParticipantStore + Clone,
        L: TxLog + OperatorLog + Clone,
    >(
        rig: Rig<S, L>,
    ) {
        // GIVEN a transfer prepared everywhere whose coordinator died before deciding.
        let tx = rig.crashed(FaultPoint::BeforeDecide).await;
        let holds = rig.holds(&tx).await;
        assert!(
            holds
                .iter()
                .all(|h| matches!(h, Hold::Reservation { .. } | Hold::Lock { .. })),
            "both items held: {holds:?}"
        );

        // WHEN an operator aborts it before its deadline, THEN refused: its coordinator may
        // still decide.
        let early = rig.act(&tx, OperatorAction::Abort).await;
        assert_eq!(refused(&early), Some(codes::NOT_OVERDUE.name));
        let r = rig.log.get(&tx).await.expect("get").expect("record");
        assert_eq!(r.status, TxStatus::Preparing, "nothing moved");

        // WHEN past its deadline, THEN the abort runs the recovery: aborted, holds released,
        // balances as they were.
        rig.clock.advance(6_000);
        match rig.act(&tx, OperatorAction::Abort).await {
            Acted::Ran { before, record } => {
                assert_eq!(
                    (before, record.status),
                    (TxStatus::Preparing, TxStatus::Aborted)
                );
            }
            other => panic!("{other:?}"),
        }
        let after = rig.holds(&tx).await;
        assert!(
            after
                .iter()
                .all(|h| matches!(h, Hold::Ended { outcome: "aborted" } | Hold::Covered)),
            "released: {after:?}"
        );
        assert_eq!(rig.balance(0, "alice").await, json!(100));
        assert_eq!(rig.balance(1, "bob").await, json!(0));

        // WHEN asked again, THEN refused: decided, and ended.
        let again = rig.act(&tx, OperatorAction::Abort).await;
        assert_eq!(refused(&again), Some(codes::ALREADY_DECIDED.name));
        let recover = rig.act(&tx, OperatorAction::Recover).await;
        assert_eq!(refused(&recover), Some(codes::ALREADY_ENDED.name));

        // THEN every ask is on the record, with who asked and what came of it.
        let r = rig.log.get(&tx).await.expect("get").expect("record");
        let noted: Vec<(&str, &str, &str)> = r
            .operator_actions
            .iter()
            .map(|n| (n.action.as_str(), n.by.as_str(), n.result.as_str()))
            .collect();
        assert_eq!(
            noted,
            [
                ("abort", "ops", "not_overdue"),
                ("abort", "ops", "done"),
                ("abort", "ops", "already_decided"),
                ("recover", "ops", "already_ended"),
            ]
        );
        assert!(r.decided_at.is_some(), "the decision's time is kept");
    }

    async fn recover_now_finishes_a_decided_transaction_whatever_its_backoff<
        S: ParticipantStore + Clone,
        L: TxLog + OperatorLog + Clone,
    >(
        rig: Rig<S, L>,
    ) {
        // GIVEN a transfer decided to commit whose coordinator died before telling anyone,
        // and a sweeper backing off from it for an hour.
        let tx = rig.crashed(FaultPoint::AfterDecide).await;
        let now = rig.clock.now_ms();
        rig.log
            .note_failed_attempt(&tx, now + 3_600_000, now)
            .await
            .expect("back off");

        // WHEN an operator asks for its recovery now, THEN it is committed everywhere.
        match rig.act(&tx, OperatorAction::Recover).await {
            Acted::Ran { before, record } => {
                assert_eq!(
                    (before, record.status),
                    (TxStatus::Committing, TxStatus::Committed)
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(rig.balance(0, "alice").await, json!(90));
        assert_eq!(rig.balance(1, "bob").await, json!(10));
        // An abort of it is refused: its outcome stands.
        let abort = rig.act(&tx, OperatorAction::Abort).await;
        assert_eq!(refused(&abort), Some(codes::ALREADY_DECIDED.name));
    }
}
