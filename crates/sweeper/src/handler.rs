//! The handler: a scheduled event in, one recovery pass, its report out; or a batch of the
//! transactions table's stream in, the completer over it, the batch's failures out.

use std::time::Instant;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::Value;
use tracing::{Instrument, error, info, info_span};
use twopc_core::ports::PortError;
use twopc_core::sweeper::SweepReport;
use twopc_function::errors::ErrorKind;
use twopc_runtime::config::SweeperSettings;
use twopc_runtime::record::Caller;
use twopc_runtime::telemetry::Metrics;
use twopc_runtime::{Aws, Clients, LiveCoordinator, LiveSweeper};

/// What the handler needs, built once in `main`.
pub struct App {
    /// The recovery pass.
    pub sweeper: LiveSweeper,
    /// The completer's recoveries (the sweeper's coordinator, its calls recorded as the
    /// completer's: `twopc_runtime::record`).
    pub completer: LiveCoordinator,
    /// Where recoveries are counted.
    pub metrics: Metrics,
}

impl App {
    /// The pass and the completer over one AWS configuration.
    pub fn new(settings: &SweeperSettings, aws: &Aws, metrics: Metrics) -> App {
        let completer = Clients::of(&aws.acting_as(Caller::Completer));
        App {
            sweeper: twopc_runtime::sweeper(settings, &Clients::of(aws)),
            completer: twopc_runtime::coordinator(settings, &completer),
            metrics,
        }
    }
}

/// A pass that could not run (the transactions table or a lock index could not be read). Its
/// `errorType` says what the caller can do; the next scheduled run tries again.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SweepError {
    /// What the caller can do.
    pub kind: ErrorKind,
    /// What happened.
    pub message: String,
}

impl From<SweepError> for Diagnostic {
    fn from(e: SweepError) -> Diagnostic {
        Diagnostic {
            error_type: e.kind.name().to_owned(),
            error_message: e.message,
        }
    }
}

impl From<PortError> for SweepError {
    fn from(e: PortError) -> SweepError {
        SweepError {
            kind: ErrorKind::of(&e),
            message: format!("sweep failed: {e}"),
        }
    }
}

/// What invoked the function: a batch of the transactions table's stream (it has `Records`)
/// goes to the [`completer`](crate::completer); anything else is a schedule (or a manual
/// invoke) and runs one pass.
pub async fn invoke(app: &App, event: LambdaEvent<Value>) -> Result<Value, SweepError> {
    let (payload, ctx) = event.into_parts();
    let invalid = |what: &str, e: serde_json::Error| SweepError {
        kind: ErrorKind::Invalid,
        message: format!("{what}: {e}"),
    };
    if payload.get("Records").is_some() {
        let batch: aws_lambda_events::dynamodb::Event = serde_json::from_value(payload)
            .map_err(|e| invalid("a stream batch that does not parse", e))?;
        let response = crate::completer::complete(&app.completer, &batch).await;
        return serde_json::to_value(&response).map_err(|e| invalid("the batch's answer", e));
    }
    let scheduled: EventBridgeEvent<Value> = serde_json::from_value(payload)
        .map_err(|e| invalid("neither a stream batch nor a scheduled event", e))?;
    let report = handle(app, LambdaEvent::new(scheduled, ctx)).await?;
    serde_json::to_value(&report).map_err(|e| invalid("the report", e))
}

/// Runs one pass. The event's content does not matter: any schedule (or a manual invoke)
/// triggers a pass.
pub async fn handle(
    app: &App,
    event: LambdaEvent<EventBridgeEvent<Value>>,
) -> Result<SweepReport, SweepError> {
    let (scheduled, ctx) = event.into_parts();
    let span = info_span!(
        "sweep",
        requestId = %ctx.request_id,
        scheduledAt = scheduled.time.map(|t| t.to_rfc3339()).unwrap_or_default()
    );
    let trace = ctx.xray_trace_id.clone();
    let pass = async {
        let started = Instant::now();
        match app.sweeper.run().await {
            Ok(report) => {
                app.metrics
                    .sweep(&report, started.elapsed().as_millis() as u64);
                info!(
                    report = %serde_json::to_value(&report).unwrap_or_default(),
                    "sweep report"
                );
                Ok(report)
            }
            Err(e) => {
                app.metrics
                    .sweep_failed(started.elapsed().as_millis() as u64);
                error!(error = ?e, "sweep could not run");
                Err(SweepError::from(e))
            }
        }
    }
    .instrument(span);
    // The pass's participant calls join its invocation's trace.
    twopc_runtime::trace::within(trace, pass).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use lambda_runtime::Context;
    use serde_json::json;
    use twopc_core::coordinator::Coordinator;
    use twopc_core::direct::DirectTransport;
    use twopc_core::fault::FaultPoint;
    use twopc_core::ids::TxId;
    use twopc_core::participant::{Participant, ParticipantConfig};
    use twopc_core::ports::{Clock, ManualClock, SystemClock, TxLog};
    use twopc_core::status::TxStatus;
    use twopc_dynamo::DynamoItems;
    use twopc_function::var;
    use twopc_runtime::config::Settings;
    use twopc_tests::{CrashAt, SubmitToEnd, World, transfer};

    const SCHEDULE: &str = include_str!("../../../events/sweeper-schedule.json");
    const ASKED: &str = include_str!("../../../events/sweeper-asked-recovery.json");

    /// Runs `body` through a coordinator whose clock is an hour behind and that dies before
    /// deciding: to the sweeper (on the real clock) the transaction is long overdue, with both
    /// items locked.
    async fn abandoned_an_hour_ago(w: &World, body: &Value) -> TxId {
        let past = ManualClock::new(SystemClock.now_ms() - 3_600_000);
        let participant = Participant::new(
            DynamoItems::new(w.client.clone()),
            w.log.clone(),
            past.clone(),
            ParticipantConfig::default(),
        );
        let c = Coordinator::new(
            w.log.clone(),
            DirectTransport::new(participant),
            past,
            w.coordinator.config().clone(),
        );
        let crash = Arc::new(CrashAt::new(FaultPoint::BeforeDecide));
        let c = c.with_faults(crash.clone());
        let key = format!("abandoned-{}", TxId::random());
        crash
            .run(c.submit_to_end(body, Some(&key)))
            .await
            .expect_err("crashes");
        TxId::for_idempotency_key(&key)
    }

    fn schedule() -> EventBridgeEvent<Value> {
        serde_json::from_str(SCHEDULE).expect("a scheduled event")
    }

    async fn app(w: &World, endpoint: &str) -> App {
        let lock_tables = json!({
            w.accounts.clone(): {"hash": {"name": "id", "type": "S"}},
            w.wallets.clone(): {"hash": {"name": "id", "type": "S"}},
        })
        .to_string();
        let env = |name: &str| match name {
            var::TRANSACTIONS_TABLE => Some(w.tx_table.clone()),
            var::LOCK_TABLES => Some(lock_tables.clone()),
            var::DYNAMODB_ENDPOINT => Some(endpoint.to_owned()),
            _ => None,
        };
        let settings = SweeperSettings::from_lookup(env).expect("config");
        let aws = twopc_runtime::Aws::load(&settings).await;
        App::new(&settings, &aws, Metrics::in_memory("sweeper"))
    }

    #[test]
    fn the_sample_event_round_trips_through_the_eventbridge_type() {
        let e = schedule();
        assert_eq!(e.detail_type, "Scheduled Event");
        assert_eq!(e.source, "aws.events");
        let again: EventBridgeEvent<Value> =
            serde_json::from_value(serde_json::to_value(&e).expect("serialize"))
                .expect("deserialize");
        assert_eq!(again.time, e.time);
        assert_eq!(again.resources, e.resources);
        assert_eq!(again.detail, e.detail);
    }

    #[tokio::test]
    async fn a_scheduled_run_finishes_a_transaction_its_coordinator_abandoned() {
        // GIVEN a transaction whose coordinator crashed after locking both items, long past
        // its deadline (the harness's clock)
        let w = World::new().await;
        w.seed("accounts", "alice", json!({"balance": 100})).await;
        w.seed("wallets", "bob", json!({"balance": 0})).await;
        let crashed = abandoned_an_hour_ago(&w, &transfer("alice", "bob", 30)).await;
        let alice = w.item("accounts", "alice").await.expect("alice");
        assert_eq!(alice.reservations.len(), 1, "the debit holds a reservation");
        let app = app(&w, &twopc_tests::endpoint()).await;

        // WHEN the schedule fires
        let report = handle(&app, LambdaEvent::new(schedule(), Context::default()))
            .await
            .expect("a report");

        // THEN it was aborted everywhere and counted
        assert_eq!(report.found, 1, "{report:?}");
        assert_eq!(report.aborted, 1, "{report:?}");
        let record = w.log.get(&crashed).await.expect("read").expect("record");
        assert_eq!(record.status, TxStatus::Aborted);
        for (s, id) in [("accounts", "alice"), ("wallets", "bob")] {
            let item = w.item(s, id).await.expect("item");
            assert!(
                item.lock.is_none() && item.reservations.is_empty(),
                "{s}/{id} still held"
            );
        }
        assert_eq!(
            w.attr("accounts", "alice", "balance").await.as_deref(),
            Some("100")
        );
        let metrics = app.metrics.lines();
        assert_eq!(metrics[0]["Recovered"], 1);
        assert_eq!(metrics[0]["OldestOverdue"], 0, "nothing left pending");
        // The report is what the function returns: JSON with camelCase fields.
        let v = serde_json::to_value(&report).expect("json");
        assert_eq!(v["aborted"], 1);
        assert!(v.get("failedTxIds").is_some(), "{v}");
    }

    #[tokio::test]
    async fn a_stream_batch_goes_to_the_completer_and_a_schedule_to_a_pass() {
        let w = World::new().await;
        let app = app(&w, &twopc_tests::endpoint()).await;
        // A batch of the transactions stream whose change is not a participant's ask (the
        // sample without its mark): nothing to recover, and the answer is the mapping's (batch
        // item failures), not a sweep report.
        let mut batch: Value = serde_json::from_str(ASKED).expect("the sample");
        let image = &mut batch["Records"][0]["dynamodb"]["NewImage"];
        image
            .as_object_mut()
            .expect("an image")
            .remove(twopc_core::layout::RECOVERY_ASKED);
        let answer = invoke(&app, LambdaEvent::new(batch, Context::default()))
            .await
            .expect("the completer's answer");
        assert_eq!(answer, json!({"batchItemFailures": []}));
        assert!(app.metrics.lines().is_empty(), "no pass ran");
        let report = invoke(
            &app,
            LambdaEvent::new(
                serde_json::to_value(schedule()).expect("json"),
                Context::default(),
            ),
        )
        .await
        .expect("a report");
        assert_eq!(report["found"], 0, "{report}");
        let e = invoke(
            &app,
            LambdaEvent::new(json!({"Records": 1}), Context::default()),
        )
        .await
        .expect_err("not a batch");
        assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    }

    #[tokio::test]
    async fn an_unreachable_transactions_table_is_a_classified_function_error() {
        let w = World::new().await;
        let app = app(&w, "http://127.0.0.1:9").await;
        let e = handle(&app, LambdaEvent::new(schedule(), Context::default()))
            .await
            .expect_err("cannot run");
        // The DynamoDB adapter cannot tell a refused connection from a lost answer.
        assert_eq!(e.kind, ErrorKind::Undetermined, "{e}");
        let d = Diagnostic::from(e);
        assert_eq!(d.error_type, "Undetermined");
        assert!(d.error_message.contains("sweep failed"), "{d:?}");
        assert_eq!(app.metrics.lines()[0]["SweepFailed"], 1, "counted");
    }
}
