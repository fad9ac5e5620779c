//! Metrics. (Logs are JSON lines, set up by `twopc_function::logs`, shared with services on
//! the participant SDK: handlers open a `tx_span` so every line of a transaction's work carries
//! its `txId`, and every line written during an invocation carries the invocation's X-Ray trace
//! id, `spans.0.xrayTraceId`; a test below holds it.)
//!
//! Metrics are CloudWatch embedded-metric-format (EMF) lines: plain JSON objects on stdout that
//! CloudWatch turns into metrics, with no agent, no API call and no extra crate. The format is
//! small enough to write here: a `_aws` header naming the namespace, the dimension sets and the
//! metrics, then the dimension values and metric values as top-level fields.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use twopc_core::coordinator::{Outcome, Submitted};
use twopc_core::ports::{Clock, SystemClock};
use twopc_core::record::{TxRecord, Vote};
use twopc_core::sweeper::SweepReport;

/// A metric's unit, as CloudWatch names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    /// A count.
    Count,
    /// Milliseconds.
    Milliseconds,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

/// One EMF line: `dimension_sets` name dimensions from `dimensions`; every metric is reported
/// under each set. Values are whole numbers (`u64`, or `i64` where a metric may be negative).
pub(crate) fn emf_line<V: Into<Value> + Copy>(
    namespace: &str,
    timestamp_ms: u64,
    dimensions: &[(&str, &str)],
    dimension_sets: &[&[&str]],
    metrics: &[(&str, Unit, V)],
) -> Value {
    let mut line = Map::new();
    line.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": dimension_sets,
                "Metrics": metrics
                    .iter()
                    .map(|(name, unit, _)| json!({"Name": name, "Unit": unit.name()}))
                    .collect::<Vec<_>>(),
            }],
        }),
    );
    for (name, value) in dimensions {
        line.insert((*name).into(), Value::String((*value).into()));
    }
    for (name, _, value) in metrics {
        line.insert((*name).into(), (*value).into());
    }
    Value::Object(line)
}

/// Where metric lines go.
#[derive(Clone, Debug)]
enum Sink {
    Stdout,
    Memory(Arc<Mutex<Vec<Value>>>),
}

/// Emits the functions' metrics as EMF lines.
#[derive(Clone, Debug)]
pub struct Metrics {
    namespace: String,
    function: String,
    sink: Sink,
}

impl Metrics {
    /// Metrics of `function` under `namespace`, written to stdout.
    pub fn new(namespace: impl Into<String>, function: impl Into<String>) -> Self {
        Metrics {
            namespace: namespace.into(),
            function: function.into(),
            sink: Sink::Stdout,
        }
    }

    /// Metrics kept in memory (tests read them with [`Metrics::lines`]).
    pub fn in_memory(function: impl Into<String>) -> Self {
        Metrics {
            namespace: "test".into(),
            function: function.into(),
            sink: Sink::Memory(Arc::default()),
        }
    }

    /// The lines kept by an in-memory sink.
    pub fn lines(&self) -> Vec<Value> {
        match &self.sink {
            Sink::Stdout => vec![],
            Sink::Memory(m) => m.lock().map(|l| l.clone()).unwrap_or_default(),
        }
    }

    fn emit<V: Into<Value> + Copy>(
        &self,
        dimensions: &[(&str, &str)],
        sets: &[&[&str]],
        metrics: &[(&str, Unit, V)],
    ) {
        let line = emf_line(
            &self.namespace,
            SystemClock.now_ms(),
            dimensions,
            sets,
            metrics,
        );
        match &self.sink {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                // A lost metric line must not fail a transaction.
                let _ = writeln!(out, "{line}");
            }
            Sink::Memory(m) => {
                if let Ok(mut l) = m.lock() {
                    l.push(line);
                }
            }
        }
    }

    /// A transaction answered by the coordinator: committed (decided, applied or not),
    /// aborted (with the first no vote's reason), or pending (left to recovery); with its
    /// latency to the answer.
    pub fn transaction(&self, answered: &Submitted, latency_ms: u64) {
        let f = self.function.as_str();
        match answered.outcome {
            Outcome::Committed => self.emit(
                &[("Function", f), ("Outcome", "committed")],
                &[&["Function", "Outcome"]],
                &[
                    ("Committed", Unit::Count, 1),
                    ("Latency", Unit::Milliseconds, latency_ms),
                ],
            ),
            Outcome::Aborted => {
                let reason = abort_reason(&answered.record);
                self.emit(
                    &[("Function", f), ("Outcome", "aborted"), ("Reason", reason)],
                    &[&["Function", "Outcome"], &["Function", "Outcome", "Reason"]],
                    &[
                        ("Aborted", Unit::Count, 1),
                        ("Latency", Unit::Milliseconds, latency_ms),
                    ],
                );
            }
            Outcome::Pending => self.emit(
                &[("Function", f), ("Outcome", "pending")],
                &[&["Function", "Outcome"]],
                &[
                    ("Pending", Unit::Count, 1),
                    ("Latency", Unit::Milliseconds, latency_ms),
                ],
            ),
        }
    }

    /// A recovery pass that ran: transactions it drove to their end (`Recovered`), those it
    /// could not (`Unfinished`, retried later; `StagingUnfinished` of them `STAGING`, waiting
    /// on a participant's answer: the blocked-staging alarm's metric), how long the oldest transaction still pending
    /// has been past its deadline (`OldestOverdue`, when it could be read: the stuck-transaction
    /// alarm's metric), how long the pass took; and `SweepFailed` 0.
    pub fn sweep(&self, report: &SweepReport, latency_ms: u64) {
        let recovered = (report.aborted + report.rolled_forward) as u64;
        let mut metrics = vec![
            ("Recovered", Unit::Count, recovered),
            ("Unfinished", Unit::Count, report.failed as u64),
            (
                "StagingUnfinished",
                Unit::Count,
                report.staging_unfinished as u64,
            ),
            ("SweepFailed", Unit::Count, 0),
            ("SweepLatency", Unit::Milliseconds, latency_ms),
        ];
        if let Some(age) = report.oldest_overdue_ms {
            metrics.push(("OldestOverdue", Unit::Milliseconds, age));
        }
        self.emit(
            &[("Function", self.function.as_str())],
            &[&["Function"]],
            &metrics,
        );
    }

    /// A recovery pass that could not run (`SweepFailed` 1).
    pub fn sweep_failed(&self, latency_ms: u64) {
        self.emit(
            &[("Function", self.function.as_str())],
            &[&["Function"]],
            &[
                ("SweepFailed", Unit::Count, 1),
                ("SweepLatency", Unit::Milliseconds, latency_ms),
            ],
        );
    }

    /// A prepare's `BeganAge` on the participant that served it (`table`): `now - began` on the
    /// participant's clock, in ms (`Participant::age`). Time in flight plus the skew between
    /// the coordinator's clock and the participant's: its Minimum going negative means a
    /// coordinator's clock runs ahead (by more than `TWOPC_FENCE_MARGIN_MS`, its prepares are
    /// refused `clockSkew`); a Maximum far above the prepare latency, one that lags (its
    /// prepares meet horizons and are refused `fenced`).
    pub fn began_age(&self, table: &str, age_ms: i64) {
        self.emit(
            &[("Function", self.function.as_str()), ("Table", table)],
            &[&["Function", "Table"]],
            &[("BeganAge", Unit::Milliseconds, age_ms)],
        );
    }

    /// A participant answered a commit or abort with a protocol violation: counted without a
    /// dimension too, so one alarm covers every function that reports one.
    pub fn protocol_violation(&self) {
        self.emit(
            &[("Function", self.function.as_str())],
            &[&[], &["Function"]],
            &[("ProtocolViolations", Unit::Count, 1)],
        );
    }

    /// A WebSocket connection refused by the `$connect` authorizer, by refusal code (and
    /// without a dimension, for the alarm on bursts).
    pub fn connect_refused(&self, code: &str) {
        self.emit(
            &[("Function", self.function.as_str()), ("Code", code)],
            &[&[], &["Code"]],
            &[("ConnectRefused", Unit::Count, 1)],
        );
    }

    /// A WebSocket subscription refused (a topic outside the token's grants, an expired
    /// connection), by refusal code (and without a dimension, for the alarm on bursts).
    pub fn subscribe_refused(&self, code: &str) {
        self.emit(
            &[("Function", self.function.as_str()), ("Code", code)],
            &[&[], &["Code"]],
            &[("SubscribeRefused", Unit::Count, 1)],
        );
    }

    /// An operator's action (`recover`, `abort`) by its result (`done`, or the refusal's or
    /// failure's code), and without the result (every action asked).
    pub fn operator_action(&self, action: &str, result: &str) {
        self.emit(
            &[
                ("Function", self.function.as_str()),
                ("Action", action),
                ("Result", result),
            ],
            &[&["Action"], &["Action", "Result"]],
            &[("OperatorActions", Unit::Count, 1)],
        );
    }

    /// One batch of stream records handled by the stream processor.
    pub fn stream_batch(&self, batch: &StreamBatch) {
        let mut metrics = vec![
            ("Records", Unit::Count, batch.records),
            ("LakeRows", Unit::Count, batch.rows),
            ("Pushed", Unit::Count, batch.pushed),
            ("GoneConnections", Unit::Count, batch.gone),
            ("FailedRecords", Unit::Count, batch.failed),
        ];
        if let Some(age) = batch.commit_age_ms {
            metrics.push(("CommitAge", Unit::Milliseconds, age));
        }
        self.emit(
            &[("Function", self.function.as_str())],
            &[&["Function"]],
            &metrics,
        );
    }
}

/// What one stream batch did, as counted by [`Metrics::stream_batch`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamBatch {
    /// Stream records in the batch.
    pub records: u64,
    /// Rows delivered to the data lake.
    pub rows: u64,
    /// Messages delivered to WebSocket connections.
    pub pushed: u64,
    /// Connections found gone and forgotten.
    pub gone: u64,
    /// Records handed back to Lambda to retry (delivery failed).
    pub failed: u64,
    /// How old the batch's oldest transaction record was on arrival, in ms (from its commit
    /// write to here), when the batch had one.
    pub commit_age_ms: Option<u64>,
}

/// Why a transaction aborted: its first no vote's reason, or `deadline` (aborted by recovery
/// past its deadline, before every vote was in).
pub(crate) fn abort_reason(record: &TxRecord) -> &'static str {
    record
        .votes
        .iter()
        .find_map(|v| match v {
            Vote::No { reason, .. } => Some(reason.code()),
            Vote::Yes { .. } => None,
        })
        .unwrap_or("deadline")
}

#[cfg(test)]
mod tests {
    use super::*;
    use twopc_core::ids::TxId;
    use twopc_core::record::VoteReason;
    use twopc_core::status::TxStatus;

    /// A transaction as answered from its record alone.
    fn record(status: TxStatus, votes: Vec<Vote>) -> Submitted {
        Submitted::of(TxRecord {
            tx_id: TxId::random(),
            status,
            participants: vec![],
            votes,
            deadline: 0,
            created_at: 0,
            updated_at: 0,
            idempotency_key: None,
            request_hash: String::new(),
            begun_by: String::new(),
            attempts: 0,
            retry_after: None,
            recovery_asked: None,
            decided_at: None,
            operator_actions: vec![],
        })
    }

    /// A log destination in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn lines(&self) -> Vec<Value> {
            let bytes = self.0.lock().expect("buffer").clone();
            String::from_utf8(bytes)
                .expect("utf-8")
                .lines()
                .map(|l| serde_json::from_str(l).expect("a JSON line"))
                .collect()
        }
    }

    /// One invocation through `lambda_runtime`'s own `TracingLayer` (what `lambda_runtime::run`
    /// wraps every handler in), logged by our subscriber with the default filter: every line,
    /// outside our spans and inside a transaction's, carries the invocation's X-Ray trace id.
    #[tokio::test]
    async fn every_line_of_an_invocation_carries_its_xray_trace_id() {
        use lambda_runtime::tower::{Layer, Service, ServiceExt};
        use lambda_runtime::{Context, LambdaInvocation, layers::TracingLayer};
        use tracing::Instrument;
        use tracing_subscriber::EnvFilter;
        use twopc_function::logs::{log_filter, subscriber, tx_span};

        let out = Captured::default();
        let sink = out.clone();
        let logs = subscriber(EnvFilter::new(log_filter(None, None)), move || sink.clone());
        let _default = tracing::subscriber::set_default(logs.finish());
        let trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let tx = TxId::random();
        let mut ctx = Context::default();
        ctx.request_id = "8476a536-e9f4-11e8-9739-2dfe598c3fcd".into();
        ctx.xray_trace_id = Some(trace.into());

        let handler = lambda_runtime::service_fn(|invocation: LambdaInvocation| {
            let tx = tx.clone();
            async move {
                tracing::info!("before the transaction is known");
                async { tracing::warn!(attempt = 1, "inside the transaction") }
                    .instrument(tx_span(Some(&tx), &invocation.context.request_id))
                    .await;
                tracing::error!("after it");
                Ok::<(), lambda_runtime::Error>(())
            }
        });
        let invocation = LambdaInvocation {
            parts: hyper::Response::new(()).into_parts().0,
            body: bytes::Bytes::new(),
            context: ctx.clone(),
        };
        TracingLayer::new()
            .layer(handler)
            .ready()
            .await
            .expect("ready")
            .call(invocation)
            .await
            .expect("invocation");
        tracing::info!("between invocations");

        let lines = out.lines();
        assert_eq!(lines.len(), 4, "{lines:?}");
        for line in &lines[..3] {
            assert_eq!(line["spans"][0]["xrayTraceId"], trace, "{line}");
            assert_eq!(
                line["spans"][0]["requestId"],
                ctx.request_id.as_str(),
                "{line}"
            );
        }
        assert_eq!(lines[1]["message"], "inside the transaction");
        assert_eq!(lines[1]["span"]["txId"], tx.as_str(), "{}", lines[1]);
        assert_eq!(lines[1]["attempt"], 1);
        assert_eq!(lines[3]["message"], "between invocations");
        assert!(
            lines[3]
                .get("spans")
                .is_none_or(|s| s.as_array().is_some_and(Vec::is_empty)),
            "no invocation, no trace id: {}",
            lines[3]
        );
    }

    #[test]
    fn an_emf_line_declares_what_it_carries() {
        let line = emf_line(
            "ns",
            1_700_000_000_000,
            &[("Function", "coordinator")],
            &[&["Function"]],
            &[
                ("Committed", Unit::Count, 1),
                ("Latency", Unit::Milliseconds, 42),
            ],
        );
        assert_eq!(
            line,
            json!({
                "_aws": {"Timestamp": 1_700_000_000_000u64, "CloudWatchMetrics": [{
                    "Namespace": "ns", "Dimensions": [["Function"]],
                    "Metrics": [{"Name": "Committed", "Unit": "Count"}, {"Name": "Latency", "Unit": "Milliseconds"}]}]},
                "Function": "coordinator", "Committed": 1, "Latency": 42
            })
        );
    }

    #[test]
    fn aborted_transactions_are_counted_by_reason() {
        let m = Metrics::in_memory("coordinator");
        m.transaction(
            &record(
                TxStatus::Aborted,
                vec![
                    Vote::yes(twopc_core::op::Mode::Exclusive),
                    Vote::no(VoteReason::Condition, "balance"),
                ],
            ),
            7,
        );
        m.transaction(&record(TxStatus::Aborted, vec![]), 9);
        m.transaction(
            &record(
                TxStatus::Committed,
                vec![Vote::yes(twopc_core::op::Mode::Exclusive)],
            ),
            3,
        );
        let lines = m.lines();
        assert_eq!(lines[0]["Reason"], "condition");
        assert_eq!(lines[0]["Aborted"], 1);
        assert_eq!(
            lines[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function", "Outcome"], ["Function", "Outcome", "Reason"]])
        );
        assert_eq!(lines[1]["Reason"], "deadline");
        assert_eq!(lines[2]["Committed"], 1);
        assert_eq!(lines[2]["Latency"], 3);
        assert_eq!(lines[2]["Outcome"], "committed");
    }

    #[test]
    fn a_sweep_reports_what_it_recovered_left_and_found_stuck() {
        let m = Metrics::in_memory("sweeper");
        let report = SweepReport {
            found: 4,
            aborted: 2,
            rolled_forward: 1,
            failed: 1,
            staging_unfinished: 1,
            oldest_overdue_ms: Some(90_000),
            ..SweepReport::default()
        };
        m.sweep(&report, 120);
        m.sweep(&SweepReport::default(), 5);
        m.sweep_failed(7);
        let lines = m.lines();
        assert_eq!(
            (
                &lines[0]["Recovered"],
                &lines[0]["Unfinished"],
                &lines[0]["OldestOverdue"],
                &lines[0]["SweepFailed"],
                &lines[0]["StagingUnfinished"],
            ),
            (&json!(3), &json!(1), &json!(90_000), &json!(0), &json!(1))
        );
        assert_eq!(lines[1]["StagingUnfinished"], 0, "reported on every pass");
        assert!(
            lines[1].get("OldestOverdue").is_none(),
            "not read: not sent"
        );
        assert_eq!(lines[2]["SweepFailed"], 1);
    }

    #[test]
    fn a_prepare_reports_its_age_per_table_negative_for_a_clock_ahead() {
        let m = Metrics::in_memory("participant");
        m.began_age("accounts", 120);
        m.began_age("accounts", -30_000);
        let lines = m.lines();
        assert_eq!(
            (&lines[0]["BeganAge"], &lines[0]["Table"]),
            (&json!(120), &json!("accounts"))
        );
        assert_eq!(lines[1]["BeganAge"], -30_000);
        assert_eq!(
            lines[1]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function", "Table"]])
        );
    }

    #[test]
    fn a_violation_is_counted_with_and_without_the_function() {
        let m = Metrics::in_memory("participant");
        m.protocol_violation();
        let line = &m.lines()[0];
        assert_eq!(line["ProtocolViolations"], 1);
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([[], ["Function"]])
        );
    }

    #[test]
    fn every_declared_metric_and_dimension_has_a_value() {
        let m = Metrics::in_memory("sweeper");
        m.sweep(
            &SweepReport {
                oldest_overdue_ms: Some(1),
                ..SweepReport::default()
            },
            120,
        );
        m.sweep_failed(3);
        m.protocol_violation();
        m.stream_batch(&StreamBatch {
            records: 3,
            commit_age_ms: Some(40),
            ..StreamBatch::default()
        });
        m.transaction(&record(TxStatus::Committing, vec![]), 1);
        for line in m.lines() {
            let decl = &line["_aws"]["CloudWatchMetrics"][0];
            for metric in decl["Metrics"].as_array().expect("metrics") {
                let name = metric["Name"].as_str().expect("name");
                assert!(line[name].is_u64(), "{name} missing in {line}");
            }
            for set in decl["Dimensions"].as_array().expect("dimensions") {
                for d in set.as_array().expect("set") {
                    let d = d.as_str().expect("dimension");
                    assert!(line[d].is_string(), "{d} missing in {line}");
                }
            }
        }
    }
}
