//! The protocol's drivers (coordinator, participant, sweeper) on the in-memory stores: the same
//! async logic the functions run, in milliseconds. The stores keep DynamoDB's conditional
//! semantics (`tests/tests/contract.rs` holds them to DynamoDB Local); the end-to-end suites in
//! `tests/` run the same flows on DynamoDB Local.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use twopc_core::coordinator::{CommitMode, Coordinator, CoordinatorConfig};
use twopc_core::decimal::Decimal;
use twopc_core::direct::DirectTransport;
use twopc_core::ids::TxId;
use twopc_core::item::{FenceOutcome, Key};
use twopc_core::memory::{MemoryItems, MemoryTxLog};
use twopc_core::message::PrepareRequest;
use twopc_core::op::Operation;
use twopc_core::participant::{Participant, ParticipantConfig};
use twopc_core::ports::{Clock, ManualClock, ParticipantStore, Swapped, Transport, TxLog};
use twopc_core::record::{Target, TxRecord, Vote, VoteReason};
use twopc_core::request::Limits;
use twopc_core::service::{KeySchema, ServiceConfig};
use twopc_core::status::TxStatus;
use twopc_core::sweeper::{LockTable, SweepConfig, Sweeper};

type Logic = Participant<MemoryItems, MemoryTxLog, ManualClock>;

struct Bank {
    items: MemoryItems,
    log: MemoryTxLog,
    clock: ManualClock,
    participant: Logic,
    coordinator: Coordinator<
        MemoryTxLog,
        DirectTransport<MemoryItems, MemoryTxLog, ManualClock>,
        ManualClock,
    >,
}

const TABLE: &str = "accounts";

/// `body` run to its end: the coordinator's one way in, then the work after the answer at once.
async fn to_end<L: TxLog, T: Transport, C: Clock>(
    c: &Coordinator<L, T, C>,
    body: &Value,
) -> TxRecord {
    let answered = c.submit(body, None).await.expect("submit");
    match answered.finish {
        Some(finish) => c.finish(finish).await.expect("finish"),
        None => answered.answer.record,
    }
}

/// `body` under `idempotency_key`, run to its end.
async fn keyed_to_end<L: TxLog, T: Transport, C: Clock>(
    c: &Coordinator<L, T, C>,
    body: &Value,
    idempotency_key: &str,
) -> TxRecord {
    let answered = c.submit(body, Some(idempotency_key)).await.expect("submit");
    match answered.finish {
        Some(finish) => c.finish(finish).await.expect("finish"),
        None => answered.answer.record,
    }
}

fn key(id: &str) -> Key {
    [("id".to_owned(), json!(id))].into()
}

fn bank() -> Bank {
    bank_in(CommitMode::Classic)
}

/// The bank with its coordinator committing in `mode`.
fn bank_in(mode: CommitMode) -> Bank {
    let (items, log, clock) = (
        MemoryItems::default(),
        MemoryTxLog::default(),
        ManualClock::new(1_800_000_000_000),
    );
    for (id, balance) in [("alice", "100"), ("bob", "50")] {
        let balance: Value = serde_json::from_str(balance).expect("number");
        items.put(TABLE, &key(id), [("balance".to_owned(), balance)].into());
    }
    let participant = Participant::new(
        items.clone(),
        log.clone(),
        clock.clone(),
        ParticipantConfig::default(),
    );
    let services: BTreeMap<String, ServiceConfig> = [(
        "accounts".to_owned(),
        ServiceConfig::table(
            Target::Direct {
                table: TABLE.into(),
            },
            KeySchema::string_hash("id"),
        ),
    )]
    .into();
    let coordinator = Coordinator::new(
        log.clone(),
        DirectTransport::new(participant.clone()),
        clock.clone(),
        CoordinatorConfig {
            id: "in-memory".into(),
            services,
            limits: Limits::default(),
            mode,
            heat_window_ms: CoordinatorConfig::DEFAULT_HEAT_WINDOW_MS,
        },
    );
    Bank {
        items,
        log,
        clock,
        participant,
        coordinator,
    }
}

fn transfer(from: &str, to: &str, amount: &str) -> Value {
    let a: Value = serde_json::from_str(amount).expect("amount");
    let minus: Value = serde_json::from_str(&format!("-{amount}")).expect("amount");
    json!({"timeoutMs": 5000, "participants": [
        {"participant": "accounts", "key": {"id": from}, "op": {"add": {"balance": minus}, "require": {"balance": {"gte": a}}}},
        {"participant": "accounts", "key": {"id": to}, "op": {"add": {"balance": a}}}]})
}

impl Bank {
    async fn transfer(&self, from: &str, to: &str, amount: &str) -> TxRecord {
        to_end(&self.coordinator, &transfer(from, to, amount)).await
    }

    /// Decides `record` to commit, as its coordinator would have before going silent.
    async fn decide_commit(&self, record: &TxRecord) -> TxRecord {
        let votes = vec![Vote::yes(twopc_core::op::Mode::Exclusive); record.participants.len()];
        match self
            .log
            .transition(
                record,
                TxStatus::Committing,
                Some(&votes),
                self.clock.now_ms(),
            )
            .await
            .expect("decide")
        {
            Swapped::Done(r) => *r,
            other => panic!("{other:?}"),
        }
    }

    /// The balance, in canonical spelling (`99.9`: stores may keep or drop trailing zeros).
    async fn balance(&self, id: &str) -> String {
        let item = self.items.read(TABLE, &key(id)).await.expect("read");
        let text = item.expect("item").attributes["balance"].to_string();
        Decimal::parse(&text)
            .expect("a number")
            .canonical()
            .to_string()
    }

    async fn locked(&self, id: &str) -> bool {
        let item = self.items.read(TABLE, &key(id)).await.expect("read");
        item.expect("item").lock.is_some()
    }

    fn prepare_request(&self, record: &TxRecord, i: usize) -> PrepareRequest {
        let p = &record.participants[i];
        PrepareRequest {
            tx_id: record.tx_id.clone(),
            deadline: record.deadline,
            began: record.created_at,
            key: p.key.clone(),
            op: p.op.clone(),
            coordinator: "in-memory".into(),
            payload: None,
            hot_until: None,
        }
    }

    /// A transaction begun and prepared everywhere (locks: its operations also set `memo`),
    /// whose coordinator then went silent.
    async fn abandoned(&self, body: &Value) -> TxRecord {
        let mut body = body.clone();
        for p in body["participants"].as_array_mut().into_iter().flatten() {
            p["op"]["set"] = json!({"memo": "abandoned"});
        }
        let request = self.coordinator.validate(&body).expect("valid");
        let record = request.begin(TxId::random(), None, "gone".into(), self.clock.now_ms());
        self.log.create(&record).await.expect("begin");
        for i in 0..record.participants.len() {
            let reply = self
                .participant
                .prepare(TABLE, &self.prepare_request(&record, i))
                .await
                .expect("prepare");
            assert!(reply.vote.is_yes(), "{reply:?}");
        }
        record
    }
}

#[tokio::test]
async fn a_transfer_commits_exactly_and_an_overdraft_aborts_leaving_no_lock() {
    let b = bank();
    let done = b.transfer("alice", "bob", "0.10").await;
    assert_eq!(done.status, TxStatus::Committed);
    assert_eq!(
        (b.balance("alice").await, b.balance("bob").await),
        ("99.9".to_owned(), "50.1".to_owned())
    );
    let refused = b.transfer("bob", "alice", "1000").await;
    assert_eq!(refused.status, TxStatus::Aborted);
    assert!(matches!(
        &refused.votes[0],
        Vote::No {
            reason: VoteReason::Condition,
            ..
        }
    ));
    assert_eq!(b.balance("bob").await, "50.1");
    assert!(!b.locked("alice").await && !b.locked("bob").await);
}

#[tokio::test]
async fn a_late_prepare_of_a_committed_transaction_is_fenced_out() {
    let b = bank();
    let record = b.transfer("alice", "bob", "1").await;
    let late = b.prepare_request(&record, 0);
    let reply = b.participant.prepare(TABLE, &late).await.expect("prepare");
    assert!(
        matches!(
            &reply.vote,
            Vote::No {
                reason: VoteReason::Fenced,
                ..
            }
        ),
        "{reply:?}"
    );
    assert!(!b.locked("alice").await);
}

#[tokio::test]
async fn a_newcomer_rolls_an_expired_committing_owner_forward_before_it_locks() {
    let b = bank();
    let owner = b.abandoned(&transfer("alice", "bob", "10")).await;
    let decided = b.decide_commit(&owner).await;
    b.clock.advance(6_000); // past the owner's deadline: its locks may be resolved
    let newcomer = b.transfer("alice", "bob", "1").await;
    assert_eq!(newcomer.status, TxStatus::Committed);
    // The owner's commit was applied on both items (rolled forward), then the newcomer's.
    assert_eq!(b.balance("alice").await, "89");
    assert_eq!(b.balance("bob").await, "61");
    let alice = b
        .items
        .read(TABLE, &key("alice"))
        .await
        .expect("read")
        .expect("alice");
    assert_eq!(
        alice.fence.get(&decided.tx_id).map(|e| e.outcome),
        Some(FenceOutcome::Committed)
    );
}

#[tokio::test]
async fn a_newcomer_aborts_an_expired_undecided_owner_and_never_applies_it() {
    let b = bank();
    let owner = b.abandoned(&transfer("alice", "bob", "10")).await;
    b.clock.advance(6_000);
    let newcomer = b.transfer("alice", "bob", "1").await;
    assert_eq!(newcomer.status, TxStatus::Committed);
    let record = b.log.get(&owner.tx_id).await.expect("get").expect("record");
    assert_eq!(
        record.status,
        TxStatus::Aborting,
        "decided abort by compare-and-swap"
    );
    assert_eq!(b.balance("alice").await, "99");
    assert_eq!(b.balance("bob").await, "51");
}

#[tokio::test]
async fn a_lock_whose_owner_never_began_is_recorded_aborted_and_removed() {
    let b = bank();
    let ghost = TxId::random();
    let op = Operation::from_json(
        "op",
        &json!({"add": {"balance": 5}, "set": {"memo": "ghost"}}),
    )
    .expect("op");
    let now = b.clock.now_ms();
    let req = PrepareRequest {
        tx_id: ghost.clone(),
        deadline: now + 1_000,
        began: now,
        key: key("alice"),
        op,
        payload: None,
        coordinator: "ghost".into(),
        hot_until: None,
    };
    assert!(
        b.participant
            .prepare(TABLE, &req)
            .await
            .expect("prepare")
            .vote
            .is_yes()
    );
    b.clock.advance(2_000);
    let done = b.transfer("alice", "bob", "1").await;
    assert_eq!(done.status, TxStatus::Committed);
    let record = b.log.get(&ghost).await.expect("get").expect("record");
    assert_eq!(record.status, TxStatus::Aborted);
    assert_eq!(
        b.balance("alice").await,
        "99",
        "the ghost's add was never applied"
    );
}

#[tokio::test]
async fn a_table_participant_refuses_a_prepare_without_an_operation() {
    // A custom participant's messages carry no operation (its work is its payload); one that
    // reaches a table's participant holds nothing.
    let b = bank();
    let now = b.clock.now_ms();
    let req = PrepareRequest {
        tx_id: TxId::random(),
        deadline: now + 1_000,
        began: now,
        key: key("alice"),
        op: Operation::default(),
        payload: Some(json!({"card": "4242"})),
        coordinator: "custom".into(),
        hot_until: None,
    };
    let reply = b.participant.prepare(TABLE, &req).await.expect("prepare");
    assert!(
        matches!(
            reply.vote,
            Vote::No {
                reason: VoteReason::Invalid,
                ..
            }
        ),
        "{reply:?}"
    );
    assert_eq!(b.balance("alice").await, "100");
    let done = b.transfer("alice", "bob", "1").await;
    assert_eq!(done.status, TxStatus::Committed, "nothing was held");
}

#[tokio::test]
async fn the_sweeper_finishes_a_decided_commit_from_the_record_alone() {
    let b = bank();
    let owner = b.abandoned(&transfer("alice", "bob", "10")).await;
    b.decide_commit(&owner).await;
    b.clock.advance(6_000);
    let sweeper = Sweeper::new(
        Coordinator::new(
            b.log.clone(),
            DirectTransport::new(b.participant.clone()),
            b.clock.clone(),
            b.coordinator.config().clone(),
        ),
        b.participant.clone(),
        b.clock.clone(),
        vec![LockTable {
            table: TABLE.into(),
            key: KeySchema::string_hash("id"),
        }],
        SweepConfig::default(),
    );
    let report = sweeper.run().await.expect("sweep");
    assert_eq!(report.found, 1, "{report:?}");
    let record = b.log.get(&owner.tx_id).await.expect("get").expect("record");
    assert_eq!(record.status, TxStatus::Committed);
    assert_eq!(
        (b.balance("alice").await, b.balance("bob").await),
        ("90".to_owned(), "60".to_owned())
    );
    assert!(!b.locked("alice").await && !b.locked("bob").await);
    // Sending the commit again is answered "already done" and applies nothing.
    let transport = DirectTransport::new(b.participant.clone());
    let again = twopc_core::message::CompleteRequest {
        tx_id: owner.tx_id.clone(),
        deadline: owner.deadline,
        began: owner.created_at,
        key: key("alice"),
        op: owner.participants[0].op.clone(),
        prune: None,
        refused: false,
    };
    let target = Target::Direct {
        table: TABLE.into(),
    };
    let reply = transport.commit(&target, &again).await.expect("commit");
    assert_eq!(reply, twopc_core::message::CompleteReply::AlreadyDone);
    assert_eq!(b.balance("alice").await, "90");
}

#[tokio::test]
async fn a_coordinator_whose_clock_runs_past_the_margin_is_refused_and_leaves_no_trace() {
    // The bank's participants on its clock; a coordinator whose clock is 30 s ahead of it (the
    // margin is 10 s).
    let b = bank();
    let ahead = ManualClock::new(b.clock.now_ms() + 30_000);
    let coordinator = Coordinator::new(
        b.log.clone(),
        DirectTransport::new(b.participant.clone()),
        ahead,
        b.coordinator.config().clone(),
    );
    let record = to_end(&coordinator, &transfer("alice", "bob", "10")).await;
    assert_eq!(record.status, TxStatus::Aborted);
    assert!(
        record.votes.iter().all(|v| matches!(
            v,
            Vote::No {
                reason: VoteReason::ClockSkew,
                ..
            }
        )),
        "{:?}",
        record.votes
    );
    // Nothing held, nothing fenced, no horizon: the next transaction on time commits.
    for id in ["alice", "bob"] {
        let item = b
            .items
            .read(TABLE, &key(id))
            .await
            .expect("read")
            .expect("item");
        assert!(item.lock.is_none() && item.reservations.is_empty() && item.fence.is_empty());
        assert_eq!(item.horizon, 0);
    }
    assert_eq!(
        b.transfer("alice", "bob", "10").await.status,
        TxStatus::Committed
    );
}

#[tokio::test]
async fn an_idempotency_key_used_again_after_its_record_expired_is_a_new_transaction() {
    for mode in [CommitMode::Classic, CommitMode::Staged] {
        let b = bank_in(mode);
        let body = transfer("alice", "bob", "10");
        let first = keyed_to_end(&b.coordinator, &body, "order-42").await;
        assert_eq!(
            first.status,
            TxStatus::Committed,
            "{mode:?}: {:?}",
            first.votes
        );
        // A week later its record is gone (TTL); the items keep its fence entries.
        b.log.expire(&first.tx_id);
        b.clock.advance(8 * 24 * 3_600_000);
        let alice = b.items.read(TABLE, &key("alice")).await.expect("read");
        assert!(alice.expect("alice").fence.contains_key(&first.tx_id));
        // The same key again: the same id, another `began`: a new transaction, applied.
        let again = keyed_to_end(&b.coordinator, &body, "order-42").await;
        assert_eq!(again.tx_id, first.tx_id);
        assert_eq!(
            again.status,
            TxStatus::Committed,
            "{mode:?}: {:?}",
            again.votes
        );
        assert_eq!(b.balance("alice").await, "80", "{mode:?}");
        assert_eq!(b.balance("bob").await, "70", "{mode:?}");
        for id in ["alice", "bob"] {
            let item = b.items.read(TABLE, &key(id)).await.expect("read");
            let item = item.expect("item");
            // The first use's entry retired, the horizon raised over it: its late prepare
            // stays refused.
            let entry = item.fence[&again.tx_id];
            assert_eq!(
                (entry.outcome, entry.began),
                (FenceOutcome::Committed, again.created_at)
            );
            assert!(item.horizon >= first.created_at, "{mode:?} {id}");
            assert!(item.lock.is_none());
        }
    }
}
