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
use twopc_runtime::Aws;
use twopc_runtime::config::{CONNECTION_TTL_SECS, Config, ConfigError};
use twopc_runtime::telemetry::{Metrics, StreamBatch};

/// The environment variables this function reads (named once, in `twopc_runtime`).
pub use twopc_runtime::config::var;

/// The stream tables of the stream processor's configuration (`TWOPC_STREAM_TABLES`), read into
/// the fan-out's types; a map that does not read is refused naming the variable.
pub fn tables(config: &Config) -> Result<Tables, ConfigError> {
    let json = config
        .stream
        .as_ref()
        .map_or("", |s| s.tables_json.as_str());
    parse_tables(json).map_err(|problem| ConfigError::Invalid {
        var: var::STREAM_TABLES,
        problem: format!(
            "{problem}; e.g. {{\"twopc-transactions\": \"transactions\", \"twopc-accounts\": {{\"participant\": \"accounts\", \"key\": {{\"hash\": {{\"name\": \"id\", \"type\": \"S\"}}}}}}}}"
        ),
    })
}

/// Parses `TWOPC_STREAM_TABLES`.
pub fn parse_tables(json: &str) -> Result<Tables, String> {
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

/// Builds the processor from the stream processor's configuration
/// (`Role::StreamProcessor`) and the functions' one AWS configuration; a stream table map that
/// does not read is refused.
pub fn processor(config: &Config, aws: &Aws) -> Result<LiveProcessor, ConfigError> {
    let tables = tables(config)?;
    let Some(stream) = &config.stream else {
        return Err(ConfigError::Missing {
            var: var::STREAM_TABLES,
            what: "read the configuration as the stream processor's (Role::StreamProcessor)",
        });
    };
    Ok(Processor::new(
        tables,
        FirehoseLake::new(
            aws.firehose(stream.firehose_endpoint.as_deref()),
            &stream.delivery_stream,
        ),
        DynamoConnections::new(
            aws.dynamodb(),
            config.connections_table(),
            CONNECTION_TTL_SECS,
        ),
        ApiGatewayPush::new(aws.websocket_management(&stream.websocket_endpoint)),
    ))
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
    use twopc_runtime::config::Role;

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

    fn config(pairs: &[(&'static str, &'static str)]) -> Result<Config, ConfigError> {
        let pairs = pairs.to_vec();
        Config::from_lookup(Role::StreamProcessor, move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    const ALL: [(&str, &str); 4] = [
        (var::STREAM_TABLES, r#"{"tx": "transactions"}"#),
        (var::DELIVERY_STREAM, "lake"),
        (var::CONNECTIONS_TABLE, "connections"),
        (var::WEBSOCKET_ENDPOINT, "https://ws.example/prod"),
    ];

    #[test]
    fn configuration_names_what_is_missing() {
        for missing in ALL.map(|(name, _)| name) {
            let some: Vec<_> = ALL.into_iter().filter(|(n, _)| *n != missing).collect();
            let err = config(&some).expect_err(missing);
            assert!(
                matches!(err, ConfigError::Missing { var, .. } if var == missing),
                "{err}"
            );
        }
        let c = config(&ALL).expect("complete");
        assert_eq!(c.connections_table(), "connections");
        assert_eq!(tables(&c).expect("tables").len(), 1);
    }

    #[test]
    fn stream_tables_that_do_not_read_are_refused_naming_the_variable() {
        let mut bad = ALL;
        bad[0] = (var::STREAM_TABLES, r#"{"t": 3}"#);
        let err = tables(&config(&bad).expect("read as text")).expect_err("not a role");
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
