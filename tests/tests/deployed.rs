//! The deployed configuration on DynamoDB Local: each function configured from
//! `template.yaml`'s own `Environment` (its logical ids replaced by this test's tables and
//! function, its parameters by their defaults) and wired as its `main` wires it, the wallets
//! participant function's real binary served by `cargo lambda watch`. What a deployed stack
//! does, done here: a native transfer, a put and a delete committed through the participant
//! function, an abort, reservations, a sweeper's roll-forward and orphan lock, the completer,
//! the pending listing. `make test` records every AWS call these make (`tests/grants.rs`).

use std::sync::Arc;

use aws_lambda_events::dynamodb::Event;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};
use twopc_core::coordinator::Outcome;
use twopc_core::fault::FaultPoint;
use twopc_core::ids::TxId;
use twopc_core::op::Mode;
use twopc_core::participant::Participant;
use twopc_core::ports::{Clock, ManualClock, SystemClock, Transport, TxLog};
use twopc_core::record::{Target, Vote, VoteReason};
use twopc_core::status::TxStatus;
use twopc_core::sweeper::Sweeper;
use twopc_dynamo::DynamoItems;
use twopc_fanout::poll::{Poller, local_client, stream_arn};
use twopc_function::var;
use twopc_runtime::config::{CoordinatorSettings, Settings, SweeperSettings};
use twopc_runtime::telemetry::Metrics;
use twopc_runtime::{Aws, Clients, LiveCoordinator};
use twopc_tests::lambda::LocalFunction;
use twopc_tests::template::{Template, value};
use twopc_tests::{CrashAt, SubmitToEnd, World, complete_req, endpoint, first_no, prepare_req};

const TEMPLATE: Template<'static> = Template::repo();
/// The function the template's `WalletsParticipantFunction` runs, as `cargo lambda watch`
/// serves it.
const PARTICIPANT: &str = "participant";

/// A function's environment as `template.yaml` sets it (Globals, then its own), pointed at
/// DynamoDB Local and at `lambda` (when given); values it cannot have here (secrets, the
/// stack's name) are left unset, as the template leaves them by default.
fn deployed_env(
    function: &str,
    w: &World,
    lambda: Option<&LocalFunction>,
) -> Vec<(String, String)> {
    let name = |logical: &str| -> Option<String> {
        match logical {
            "TransactionsTable" => Some(w.tx_table.clone()),
            "AccountsTable" => Some(w.accounts.clone()),
            "WalletsTable" => Some(w.wallets.clone()),
            "WalletsParticipantFunction.Arn" => Some(PARTICIPANT.to_owned()),
            parameter => {
                value(&TEMPLATE.block("Parameters", parameter), "Default").map(str::to_owned)
            }
        }
    };
    let mut env: Vec<(String, String)> = vec![];
    for (owner, variable, v) in TEMPLATE.variables() {
        if owner != "Function" && owner != function {
            continue;
        }
        let resolved = if v == "!Sub >-" {
            Some(TEMPLATE.folded_sub(function, variable, |r| {
                name(r).unwrap_or_else(|| panic!("{function} {variable}: no stand-in for {r}"))
            }))
        } else {
            v.strip_prefix("!Ref ").and_then(name)
        };
        if let Some(resolved) = resolved {
            env.retain(|(k, _)| k != variable);
            env.push((variable.to_owned(), resolved));
        }
    }
    env.push((var::DYNAMODB_ENDPOINT.to_owned(), endpoint()));
    if let Some(f) = lambda {
        env.push((var::LAMBDA_ENDPOINT.to_owned(), f.url.clone()));
    }
    env
}

fn config<S: Settings>(env: &[(String, String)]) -> S {
    S::from_lookup(|name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
        .unwrap_or_else(|e| panic!("{:?} configured as template.yaml says: {e}", S::ROLE))
}

/// The wallets participant function, configured as the template configures it.
async fn wallets_function(w: &World) -> LocalFunction {
    let env = deployed_env("WalletsParticipantFunction", w, None);
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    LocalFunction::start(PARTICIPANT, &env).await
}

/// The coordinator function's configuration and its coordinator, as its `main` wires it.
async fn deployed_coordinator(
    w: &World,
    lambda: Option<&LocalFunction>,
) -> (CoordinatorSettings, LiveCoordinator) {
    let config: CoordinatorSettings = config(&deployed_env("CoordinatorFunction", w, lambda));
    let coordinator = twopc_runtime::coordinator(&config, &Clients::load(&config).await);
    (config, coordinator)
}

async fn bank(w: &World) {
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("accounts", "bob", json!({"balance": 0})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    w.seed("wallets", "carol", json!({"balance": 7})).await;
}

/// A transfer from alice's account to bob's wallet (two services: staged, reserving).
fn to_wallet(amount: i64) -> Value {
    json!({"participants": [
        {"participant": "accounts", "key": {"id": "alice"},
         "op": {"add": {"balance": -amount}, "require": {"balance": {"gte": amount}}}},
        {"participant": "wallets", "key": {"id": "bob"}, "op": {"add": {"balance": amount}}}]})
}

async fn status(w: &World, tx: &TxId) -> TxStatus {
    w.log.get(tx).await.expect("get").expect("record").status
}

#[tokio::test]
async fn a_plain_table_transfer_with_the_templates_defaults_is_one_native_write() {
    let w = World::new().await;
    bank(&w).await;
    let (_, c) = deployed_coordinator(&w, None).await;
    let within = json!({"participants": [
        {"participant": "accounts", "key": {"id": "alice"},
         "op": {"add": {"balance": -10}, "require": {"balance": {"gte": 10}}}},
        {"participant": "accounts", "key": {"id": "bob"}, "op": {"add": {"balance": 10}}}]});
    let staged = c.submit(&within, None).await.expect("stage");
    assert_eq!(staged.answer.outcome, Outcome::Committed);
    // Native: answered terminal with nothing left to do, and no fence entry (a protocol
    // commit writes one).
    let tx = staged.answer.record.tx_id.clone();
    assert!(
        staged.finish.is_none() && staged.answer.applied(),
        "{:?}",
        staged.answer
    );
    let alice = w.item("accounts", "alice").await.expect("alice");
    assert!(!alice.fence.contains_key(&tx), "{alice:?}");
    assert_eq!(
        w.attr("accounts", "bob", "balance").await.as_deref(),
        Some("10")
    );
}

/// An item deleted by a committed transaction: a tombstone, with no attributes left.
async fn assert_deleted(w: &World, service: &str, id: &str) {
    let item = w.item(service, id).await.expect("a tombstone");
    assert!(
        item.tombstone && !item.attributes.contains_key("balance") && item.lock.is_none(),
        "{service}/{id}: {item:?}"
    );
}

#[tokio::test]
async fn puts_deletes_an_abort_and_reservations_go_through_the_wallets_function() {
    // GIVEN the coordinator and the wallets participant function as the template configures them
    let w = World::new().await;
    bank(&w).await;
    let lambda = wallets_function(&w).await;
    let (config, c) = deployed_coordinator(&w, Some(&lambda)).await;
    assert!(matches!(
        config.coordinator.services["wallets"].target,
        Target::Lambda { .. }
    ));

    // WHEN a put and a delete of wallets, and a delete of an account, commit together
    let body = json!({"participants": [
        {"participant": "wallets", "key": {"id": "dave"}, "op": {"put": {"balance": 5}}},
        {"participant": "wallets", "key": {"id": "carol"}, "op": {"delete": true}},
        {"participant": "accounts", "key": {"id": "bob"}, "op": {"delete": true}}]});
    let rec = c.submit_to_end(&body, None).await.expect("submit");

    // THEN each item holds its change: written by the function, and by the coordinator itself
    assert_eq!(
        rec.status,
        TxStatus::Committed,
        "{rec:?}\n{}",
        lambda.log_text()
    );
    assert_eq!(
        w.attr("wallets", "dave", "balance").await.as_deref(),
        Some("5")
    );
    assert!(
        w.item("wallets", "dave")
            .await
            .expect("dave")
            .lock
            .is_none()
    );
    assert_deleted(&w, "wallets", "carol").await;
    assert_deleted(&w, "accounts", "bob").await;

    // WHEN alice pays bob's wallet THEN both sides reserve (commuting adds) and commit
    let rec = c.submit_to_end(&to_wallet(30), None).await.expect("submit");
    assert_eq!(rec.status, TxStatus::Committed, "{rec:?}");
    assert_eq!(rec.votes, vec![Vote::yes(Mode::Reserved); 2], "{rec:?}");
    assert_eq!(
        w.attr("wallets", "bob", "balance").await.as_deref(),
        Some("30")
    );

    // WHEN the wallet pays more than it holds THEN the function votes no and nothing moves
    let overdraft = json!({"participants": [
        {"participant": "wallets", "key": {"id": "bob"},
         "op": {"add": {"balance": -1000}, "require": {"balance": {"gte": 1000}}}},
        {"participant": "accounts", "key": {"id": "alice"}, "op": {"add": {"balance": 1000}}}]});
    let rec = c.submit_to_end(&overdraft, None).await.expect("submit");
    assert_eq!(rec.status, TxStatus::Aborted, "{rec:?}");
    assert_eq!(
        first_no(&rec),
        Some(VoteReason::Condition),
        "{:?}",
        rec.votes
    );
    assert_eq!(
        (
            w.attr("accounts", "alice", "balance").await,
            w.attr("wallets", "bob", "balance").await
        ),
        (Some("70".to_owned()), Some("30".to_owned()))
    );
    for (service, id) in [("accounts", "alice"), ("wallets", "bob")] {
        let item = w.item(service, id).await.expect("item");
        assert!(
            item.lock.is_none() && item.reservations.is_empty(),
            "{service}/{id}: {item:?}"
        );
    }
}

#[tokio::test]
async fn the_sweeper_rolls_a_decided_commit_forward_and_resolves_an_orphan_lock() {
    // GIVEN a transfer and a delete decided committed whose coordinator died before completing
    // them
    let w = World::new().await;
    bank(&w).await;
    let lambda = wallets_function(&w).await;
    let (coordinator_config, c) = deployed_coordinator(&w, Some(&lambda)).await;
    let crash = Arc::new(CrashAt::new(FaultPoint::AfterDecide));
    let key = format!("deployed-{}", TxId::random());
    let mut body = to_wallet(10);
    body["participants"]
        .as_array_mut()
        .expect("participants")
        .push(json!({"participant": "accounts", "key": {"id": "bob"}, "op": {"delete": true}}));
    crash
        .run(
            c.with_faults(crash.clone())
                .submit_to_end(&body, Some(&key)),
        )
        .await
        .expect_err("crashes");
    let decided = TxId::for_idempotency_key(&key);
    assert_eq!(status(&w, &decided).await, TxStatus::Committing);
    // AND a lock on carol's wallet whose transaction never got a record (its coordinator died
    // after the prepare)
    let orphan = TxId::random();
    let deadline = SystemClock.now_ms() + 5_000;
    let reply = twopc_runtime::transport(
        &coordinator_config,
        &Clients::load(&coordinator_config).await,
    )
    .prepare(
        &Target::Lambda {
            function: PARTICIPANT.to_owned(),
        },
        &prepare_req(
            &orphan,
            deadline,
            "carol",
            json!({"set": {"note": "orphan"}}),
        ),
    )
    .await
    .expect("prepared");
    assert!(reply.vote.is_yes(), "{reply:?}");

    // WHEN the sweeper function runs an hour later (its clock; its calls are the function's)
    let config: SweeperSettings = config(&deployed_env("SweeperFunction", &w, Some(&lambda)));
    let clients = Clients::load(&config).await;
    let later = ManualClock::new(SystemClock.now_ms() + 3_600_000);
    let log = twopc_runtime::tx_log(&config.protocol, &clients);
    let coordinator = twopc_core::coordinator::Coordinator::new(
        log.clone(),
        twopc_runtime::transport(&config, &clients),
        later.clone(),
        config.coordinator.clone(),
    );
    let participant = Participant::new(
        DynamoItems::new(clients.dynamodb.clone()),
        log,
        later.clone(),
        config.protocol.participant.clone(),
    );
    let sweeper = Sweeper::new(
        coordinator,
        participant,
        later,
        config.lock_tables.clone(),
        config.sweep.clone(),
    );
    let report = sweeper.run().await.expect("a pass");

    // THEN the commit is rolled forward through the function and on the coordinator's table
    // (the delete's tombstone too), and the orphan lock's transaction recorded aborted and its
    // lock released
    assert_eq!(
        report.rolled_forward,
        1,
        "{report:?}\n{}",
        lambda.log_text()
    );
    assert_eq!(report.locks_resolved, 1, "{report:?}");
    assert_eq!(status(&w, &decided).await, TxStatus::Committed);
    assert_eq!(status(&w, &orphan).await, TxStatus::Aborted);
    assert_eq!(
        (
            w.attr("accounts", "alice", "balance").await,
            w.attr("wallets", "bob", "balance").await
        ),
        (Some("90".to_owned()), Some("10".to_owned()))
    );
    assert_deleted(&w, "accounts", "bob").await;
    let carol = w.item("wallets", "carol").await.expect("carol");
    assert!(
        carol.lock.is_none() && !carol.attributes.contains_key("note"),
        "{carol:?}"
    );
}

#[tokio::test]
async fn the_completer_recovers_at_once_what_a_participant_asked_for_and_the_listing_shows_it_until_then()
 {
    // GIVEN a transfer answered committed whose coordinator died before finishing it
    let w = World::new().await;
    bank(&w).await;
    let lambda = wallets_function(&w).await;
    let (_, c) = deployed_coordinator(&w, Some(&lambda)).await;
    let crash = Arc::new(CrashAt::new(FaultPoint::AfterAnswer));
    let key = format!("deployed-{}", TxId::random());
    let mut body = to_wallet(10);
    body["timeoutMs"] = json!(2_000);
    crash
        .run(
            c.with_faults(crash.clone())
                .submit_to_end(&body, Some(&key)),
        )
        .await
        .expect_err("crashes");
    let tx = TxId::for_idempotency_key(&key);
    let record = w.log.get(&tx).await.expect("get").expect("record");
    assert_eq!(record.status, TxStatus::Staging);

    // WHEN the coordinator function lists the unfinished transactions THEN it is there
    let coordinator: CoordinatorSettings =
        config(&deployed_env("CoordinatorFunction", &w, Some(&lambda)));
    let listed = twopc_runtime::tx_log(&coordinator.protocol, &Clients::load(&coordinator).await)
        .pending(None, None, 10)
        .await
        .expect("the listing");
    assert_eq!(
        listed.records.iter().map(|r| &r.tx_id).collect::<Vec<_>>(),
        [&tx]
    );

    // AND a lock on carol's wallet whose transaction never got a record, as old
    let transport = twopc_runtime::transport(&coordinator, &Clients::load(&coordinator).await);
    let function = Target::Lambda {
        function: PARTICIPANT.to_owned(),
    };
    let note = |v: &str| json!({"set": {"note": v}});
    let orphan = TxId::random();
    let reply = transport
        .prepare(
            &function,
            &prepare_req(&orphan, record.deadline, "carol", note("orphan")),
        )
        .await
        .expect("prepared");
    assert!(reply.vote.is_yes(), "{reply:?}");

    // WHEN, past their deadline (what the function and the completer wait for, on their own
    // clocks), the wallets function prepares bob's wallet, where the transfer's reservation
    // stands, and carol's, where the orphan lock does
    let wait = (record.deadline + 1).saturating_sub(SystemClock.now_ms());
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    let deadline = SystemClock.now_ms() + 5_000;
    let other = TxId::random();
    let reply = transport
        .prepare(
            &function,
            &prepare_req(&other, deadline, "bob", json!({"set": {"owner": "x"}})),
        )
        .await
        .expect("prepare");
    // THEN bob's votes conflict and asks for the transfer's recovery (a participant has no
    // transport to inquire with)
    assert!(
        matches!(
            reply.vote,
            Vote::No {
                reason: VoteReason::Conflict,
                ..
            }
        ),
        "{reply:?}\n{}",
        lambda.log_text()
    );
    // AND carol's records the orphan's transaction aborted and takes the lock (released again)
    let third = TxId::random();
    let reply = transport
        .prepare(
            &function,
            &prepare_req(&third, deadline, "carol", note("third")),
        )
        .await
        .expect("prepare");
    assert!(reply.vote.is_yes(), "{reply:?}\n{}", lambda.log_text());
    assert_eq!(status(&w, &orphan).await, TxStatus::Aborted);
    let released = transport
        .abort(
            &function,
            &complete_req(&third, deadline, "carol", note("third")),
        )
        .await
        .expect("abort");
    assert_eq!(released, twopc_core::message::CompleteReply::Done);
    let asked = w.log.get(&tx).await.expect("get").expect("record");
    assert!(asked.recovery_asked.is_some(), "{asked:?}");

    // THEN the sweeper function, given the transactions stream's batch, recovers it at once:
    // every participant holds it, so it commits
    let config: SweeperSettings = config(&deployed_env("SweeperFunction", &w, Some(&lambda)));
    let app = sweeper::handler::App::new(
        &config,
        &Aws::load(&config).await,
        Metrics::in_memory("sweeper"),
    );
    let arn = stream_arn(&w.client, &w.tx_table).await.expect("stream");
    let mut poller = Poller::new(local_client(&endpoint()).await, vec![arn], None);
    let app = &app;
    poller
        .poll_once(&|e: Event| async move {
            let batch = serde_json::to_value(&e).expect("the batch as Lambda sends it");
            let answer = sweeper::handler::invoke(app, LambdaEvent::new(batch, Context::default()))
                .await
                .expect("the completer's answer");
            serde_json::from_value(answer).expect("the mapping's answer")
        })
        .await
        .expect("poll");
    assert_eq!(
        status(&w, &tx).await,
        TxStatus::Committed,
        "{}",
        lambda.log_text()
    );
    assert_eq!(
        (
            w.attr("accounts", "alice", "balance").await,
            w.attr("wallets", "bob", "balance").await
        ),
        (Some("90".to_owned()), Some("10".to_owned()))
    );
}
