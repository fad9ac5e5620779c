//! The handler: a [`ParticipantCall`] in, the participant logic's reply out.
//!
//! A failure is a function error whose `errorType` says what the caller can do
//! (`Retryable`, `Undetermined`, `Invalid`, `Fatal`: see `twopc_function::errors`); the handler
//! never panics on a request.

use lambda_runtime::LambdaEvent;
use serde_json::Value;
use twopc_core::message::ParticipantCall;
use twopc_function::call::{CallError, answer_call};
use twopc_function::errors::ErrorKind;
use twopc_runtime::LiveParticipant;
use twopc_runtime::telemetry::Metrics;

/// What the handler needs, built once in `main`.
pub struct App {
    /// The participant logic.
    pub participant: LiveParticipant,
    /// The table this function serves.
    pub table: String,
    /// Where prepares' ages are counted.
    pub metrics: Metrics,
}

/// Handles one call.
pub async fn handle(app: &App, event: LambdaEvent<Value>) -> Result<Value, CallError> {
    let answer = |call: ParticipantCall| async move {
        let (p, table) = (&app.participant, &app.table);
        match &call {
            ParticipantCall::Prepare(r) => {
                app.metrics.began_age(table, p.age(r.began));
                p.prepare(table, r).await.map(serde_json::to_value)
            }
            // A violation answered here is counted by whoever sent the call (its dispatcher),
            // once; the participant logic has logged it.
            ParticipantCall::Commit(r) => p.commit(table, r).await.map(serde_json::to_value),
            ParticipantCall::Abort(r) => p.abort(table, r).await.map(serde_json::to_value),
            ParticipantCall::Inquire(r) => p.inquire(table, r).await.map(serde_json::to_value),
        }
    };
    answer_call(event, answer, ErrorKind::of).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_runtime::{Context, Diagnostic};
    use serde_json::json;
    use twopc_core::message::{CompleteReply, PrepareReply};
    use twopc_core::op::Mode;
    use twopc_core::record::{Vote, VoteReason};
    use twopc_function::var;
    use twopc_runtime::Clients;
    use twopc_runtime::config::{ParticipantSettings, Settings};

    const PREPARE: &str = include_str!("../../../events/participant-prepare.json");
    const COMMIT: &str = include_str!("../../../events/participant-commit.json");
    const ABORT: &str = include_str!("../../../events/participant-abort.json");

    fn json(text: &str) -> Value {
        serde_json::from_str(text).expect("json")
    }

    async fn app(tx_table: &str, table: &str, endpoint: &str) -> App {
        let env = |name: &str| match name {
            var::TRANSACTIONS_TABLE => Some(tx_table.to_owned()),
            var::PARTICIPANT_TABLE => Some(table.to_owned()),
            var::DYNAMODB_ENDPOINT => Some(endpoint.to_owned()),
            _ => None,
        };
        let settings = ParticipantSettings::from_lookup(env).expect("config");
        let clients = Clients::load(&settings).await;
        App {
            participant: twopc_runtime::participant(&settings.protocol, &clients),
            table: settings.table,
            metrics: Metrics::in_memory("participant"),
        }
    }

    async fn call(app: &App, event: Value) -> Result<Value, CallError> {
        handle(app, LambdaEvent::new(event, Context::default())).await
    }

    #[test]
    fn the_sample_events_round_trip_through_the_participant_call() {
        for (text, action) in [(PREPARE, "prepare"), (COMMIT, "commit"), (ABORT, "abort")] {
            let call = ParticipantCall::from_json(json(text)).expect("a participant call");
            assert_eq!(call.action(), action);
            assert_eq!(call.to_json(), json(text), "{action} does not round-trip");
        }
    }

    #[tokio::test]
    async fn the_sample_prepare_and_commit_apply_the_operation_once() {
        let w = twopc_tests::World::new().await;
        w.seed("accounts", "alice", json!({"balance": 100})).await;
        let app = app(&w.tx_table, &w.accounts, &twopc_tests::endpoint()).await;

        let vote: PrepareReply =
            serde_json::from_value(call(&app, json(PREPARE)).await.expect("prepare"))
                .expect("a vote");
        assert_eq!(
            vote.vote,
            Vote::yes(Mode::Reserved),
            "a debit with a floor commutes"
        );
        let alice = w.item("accounts", "alice").await.expect("item");
        assert!(alice.lock.is_none() && alice.reservations.len() == 1);

        let done: CompleteReply =
            serde_json::from_value(call(&app, json(COMMIT)).await.expect("commit"))
                .expect("a reply");
        assert_eq!(done, CompleteReply::Done);
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some("0")
        );

        // A redelivered commit changes nothing; a late prepare is fenced out.
        let again: CompleteReply =
            serde_json::from_value(call(&app, json(COMMIT)).await.expect("commit"))
                .expect("a reply");
        assert_eq!(again, CompleteReply::AlreadyDone);
        let late: PrepareReply =
            serde_json::from_value(call(&app, json(PREPARE)).await.expect("prepare"))
                .expect("a vote");
        assert!(
            matches!(
                late.vote,
                Vote::No {
                    reason: VoteReason::Fenced,
                    ..
                }
            ),
            "{late:?}"
        );
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some("0")
        );
    }

    #[tokio::test]
    async fn a_commit_without_its_prepare_is_a_protocol_violation_counted_by_its_sender() {
        // GIVEN alice, never prepared for the sample transaction
        let w = twopc_tests::World::new().await;
        w.seed("accounts", "alice", json!({"balance": 100})).await;
        let app = app(&w.tx_table, &w.accounts, &twopc_tests::endpoint()).await;
        // WHEN its commit arrives
        let reply: CompleteReply =
            serde_json::from_value(call(&app, json(COMMIT)).await.expect("an answer"))
                .expect("a reply");
        // THEN it is refused as a violation and nothing is applied; the alarm's metric is its
        // sender's to count (`DispatchTransport`), so the function does not count it again
        assert!(
            matches!(reply, CompleteReply::Violation { .. }),
            "{reply:?}"
        );
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some("100")
        );
        assert!(
            app.metrics
                .lines()
                .iter()
                .all(|l| l.get("ProtocolViolations").is_none())
        );
    }

    #[tokio::test]
    async fn the_sample_abort_releases_the_lock_without_applying() {
        let w = twopc_tests::World::new().await;
        w.seed("accounts", "alice", json!({"balance": 100})).await;
        let app = app(&w.tx_table, &w.accounts, &twopc_tests::endpoint()).await;
        call(&app, json(PREPARE)).await.expect("prepare");
        let done: CompleteReply =
            serde_json::from_value(call(&app, json(ABORT)).await.expect("abort")).expect("a reply");
        assert_eq!(done, CompleteReply::Done);
        let item = w.item("accounts", "alice").await.expect("item");
        assert_eq!(item.lock, None);
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some("100")
        );
    }

    #[tokio::test]
    async fn malformed_events_are_invalid_function_errors() {
        let app = app("tx", "accounts", "http://127.0.0.1:9").await;
        for event in [
            json!({}),
            json!({"action": "explode", "request": {}}),
            json!({"action": "prepare", "request": {"txId": "nope"}}),
        ] {
            let e = call(&app, event.clone()).await.expect_err("refused");
            assert_eq!(e.kind, ErrorKind::Invalid, "{event}: {e}");
            let d = Diagnostic::from(e);
            assert_eq!(d.error_type, "Invalid");
            assert!(
                d.error_message.contains("participant call"),
                "{}",
                d.error_message
            );
        }
    }

    #[tokio::test]
    async fn a_missing_table_is_a_classified_function_error_not_a_panic() {
        let w = twopc_tests::World::new().await;
        let app = app(&w.tx_table, "no-such-table", &twopc_tests::endpoint()).await;
        let e = call(&app, json(PREPARE)).await.expect_err("fails");
        assert_eq!(e.kind, ErrorKind::Fatal, "{e}");
        assert!(
            e.message.contains("ResourceNotFound") || e.message.contains("non-existent"),
            "{e}"
        );
    }
}
