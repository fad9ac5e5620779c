//! The stream-processor function: DynamoDB Streams of the participant tables and of the
//! transactions table in; committed item changes and transaction outcomes out, to the data lake
//! (Kinesis Data Firehose) and to WebSocket subscribers (`PostToConnection`). Records whose
//! delivery failed come back as batch item failures (`ReportBatchItemFailures`), so Lambda
//! retries just those. The logic is `twopc_fanout`; this crate wires it.
#![warn(missing_docs)]

use std::collections::BTreeMap;

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::DynamoDbEventResponse;
use lambda_runtime::LambdaEvent;
use twopc_dynamo::connections::DynamoConnections;
use twopc_fanout::detect::{TableRole, Tables};
use twopc_fanout::firehose::FirehoseLake;
use twopc_fanout::processor::Processor;
use twopc_fanout::sinks::ApiGatewayPush;
use twopc_function::env::{ConfigError, Env};
use twopc_function::var;
use twopc_runtime::Aws;
use twopc_runtime::config::{CONNECTION_TTL_SECS, Role, Settings, Shared, connections_table};
use twopc_runtime::telemetry::{Metrics, StreamBatch};

/// The stream processor's settings, its table map read into the fan-out's types.
#[derive(Clone, Debug)]
pub struct StreamSettings {
    /// What every function reads.
    pub shared: Shared,
    /// The tables whose streams arrive, and what each is (`TWOPC_STREAM_TABLES`).
    pub tables: Tables,
    /// The Firehose delivery stream of the data lake.
    pub delivery_stream: String,
    /// The WebSocket API's management endpoint.
    pub websocket_endpoint: String,
    /// Firehose's endpoint when it is not AWS's (a local emulator).
    pub firehose_endpoint: Option<String>,
    /// The WebSocket subscriptions table.
    pub connections_table: String,
}

impl Settings for StreamSettings {
    const ROLE: Role = Role::StreamProcessor;

    fn read<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Self, ConfigError> {
        let tables = env.required(
            var::STREAM_TABLES,
            r#"set it to a JSON object of table → role, e.g. {"twopc-transactions": "transactions", "twopc-accounts": {"participant": "accounts", "key": {"hash": {"name": "id", "type": "S"}}}}"#,
        )?;
        Ok(StreamSettings {
            shared: Shared::read(Self::ROLE, env),
            tables: tables_of(&tables)?,
            delivery_stream: env.required(
                var::DELIVERY_STREAM,
                "set it to the data lake's Firehose delivery stream name",
            )?,
            connections_table: connections_table(env)?,
            websocket_endpoint: env.required(
                var::WEBSOCKET_ENDPOINT,
                "set it to the WebSocket API's management endpoint, https://{api-id}.execute-api.{region}.amazonaws.com/{stage}",
            )?,
            firehose_endpoint: env.get(var::FIREHOSE_ENDPOINT),
        })
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }

    fn resources(&self) -> Vec<(String, &'static str)> {
        vec![
            (self.connections_table.clone(), var::CONNECTIONS_TABLE),
            (self.delivery_stream.clone(), var::DELIVERY_STREAM),
        ]
    }
}

/// `TWOPC_STREAM_TABLES` read into the fan-out's types; a map that does not read is refused
/// naming the variable.
fn tables_of(json: &str) -> Result<Tables, ConfigError> {
    parse_tables(json).map_err(|problem| ConfigError::Invalid {
        var: var::STREAM_TABLES,
        problem: format!(
            "{problem}; e.g. {{\"twopc-transactions\": \"transactions\", \"twopc-accounts\": {{\"participant\": \"accounts\", \"key\": {{\"hash\": {{\"name\": \"id\", \"type\": \"S\"}}}}}}}}"
        ),
    })
}

/// Parses `TWOPC_STREAM_TABLES`.
fn parse_tables(json: &str) -> Result<Tables, String> {
    let v: BTreeMap<String, serde_json::Value> = serde_json::from_str(json)
        .map_err(|e| format!("not a JSON object of table → role: {e}"))?;
    v.into_iter()
        .map(|(table, role)| {
            let role = match role {
                serde_json::Value::String(s) if s == "transactions" => TableRole::Transactions,
                serde_json::Value::Object(mut m) => {
                    let participant = m.get("participant").and_then(|p| p.as_str()).ok_or(format!("{table}: \"participant\" missing"))?.to_owned();
                    let key = serde_json::from_value(m.remove("key").unwrap_or_default()).map_err(|e| format!("{table}: key: {e}"))?;
                    TableRole::Participant { participant, key }
                }
                other => return Err(format!("{table}: expected \"transactions\" or {{\"participant\", \"key\"}}, got {other}")),
            };
            Ok((table, role))
        })
        .collect()
}

/// The processor as the function runs it.
pub type LiveProcessor = Processor<FirehoseLake, DynamoConnections, ApiGatewayPush>;

/// Builds the processor from the stream processor's settings and the functions' one AWS
/// configuration.
pub fn processor(settings: &StreamSettings, aws: &Aws) -> LiveProcessor {
    Processor::new(
        settings.tables.clone(),
        FirehoseLake::new(
            aws.firehose(settings.firehose_endpoint.as_deref()),
            &settings.delivery_stream,
        ),
        DynamoConnections::new(
            aws.dynamodb(),
            &settings.connections_table,
            CONNECTION_TTL_SECS,
        ),
        ApiGatewayPush::new(aws.websocket_management(&settings.websocket_endpoint)),
    )
}

/// Handles one batch of stream records, and counts what it did.
pub async fn handle<K, S, P>(
    processor: &Processor<K, S, P>,
    metrics: &Metrics,
    event: LambdaEvent<Event>,
) -> Result<DynamoDbEventResponse, lambda_runtime::Error>
where
    K: twopc_fanout::ports::Lake,
    S: twopc_fanout::ports::Subscriptions,
    P: twopc_fanout::ports::Push,
{
    let (response, done) = processor.handle_reporting(&event.payload).await;
    metrics.stream_batch(&StreamBatch {
        records: event.payload.records.len() as u64,
        rows: done.rows as u64,
        pushed: done.pushed as u64,
        gone: done.gone as u64,
        failed: done.failed.len() as u64,
        commit_age_ms: done.stages.age.map(|a| a.as_millis() as u64),
    });
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../../../events/stream-processor-commit.json");

    #[test]
    fn the_sample_stream_event_round_trips_and_holds_a_commit() {
        let event: Event =
            serde_json::from_str(SAMPLE).expect("sample parses as a DynamoDB Streams event");
        let again: Event = serde_json::from_value(serde_json::to_value(&event).expect("serialize"))
            .expect("round trip");
        assert_eq!(again.records.len(), event.records.len());
        let tables = parse_tables(r#"{"twopc-accounts": {"participant": "accounts", "key": {"hash": {"name": "id", "type": "S"}}}, "twopc-transactions": "transactions"}"#).expect("tables");
        let changes: Vec<_> = event
            .records
            .iter()
            .filter_map(twopc_fanout::detect::change_of)
            .collect();
        let detected: Vec<_> = changes
            .iter()
            .filter_map(|c| twopc_fanout::detect::detect(c, &tables))
            .collect();
        assert_eq!(detected.len(), 1, "{detected:?}");
    }

    fn settings(pairs: &[(&'static str, &'static str)]) -> Result<StreamSettings, ConfigError> {
        let pairs = pairs.to_vec();
        StreamSettings::from_lookup(move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    const ALL: [(&str, &str); 5] = [
        (var::STREAM_TABLES, r#"{"tx": "transactions"}"#),
        (var::DELIVERY_STREAM, "lake"),
        (var::CONNECTIONS_TABLE, "connections"),
        (var::WEBSOCKET_ENDPOINT, "https://ws.example/prod"),
        (var::FIREHOSE_ENDPOINT, "http://127.0.0.1:4566"),
    ];

    #[test]
    fn configuration_names_what_is_missing() {
        for missing in Role::StreamProcessor.required().iter().copied() {
            let some: Vec<_> = ALL.into_iter().filter(|(n, _)| *n != missing).collect();
            let err = settings(&some).expect_err(missing);
            assert!(
                matches!(err, ConfigError::Missing { var, .. } if var == missing),
                "{err}"
            );
            assert!(
                err.to_string().contains("set it to"),
                "says what to set: {err}"
            );
        }
        let s = settings(&ALL).expect("complete");
        assert_eq!(s.shared.role, Role::StreamProcessor);
        assert_eq!(s.connections_table, "connections");
        assert_eq!(s.delivery_stream, "lake");
        assert_eq!(
            s.firehose_endpoint.as_deref(),
            Some("http://127.0.0.1:4566")
        );
        assert_eq!(s.tables.len(), 1);
    }

    #[test]
    fn stream_tables_that_do_not_read_are_refused_naming_the_variable() {
        let mut bad = ALL;
        bad[0] = (var::STREAM_TABLES, r#"{"t": 3}"#);
        let err = settings(&bad).expect_err("not a role");
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    var: var::STREAM_TABLES,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("e.g."), "{err}");
    }
}
