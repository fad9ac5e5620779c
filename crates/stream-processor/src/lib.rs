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
use twopc_runtime::config::DEFAULT_METRICS_NAMESPACE;
use twopc_runtime::telemetry::{Metrics, StreamBatch};

/// The environment variables this function reads (named once, in `twopc_runtime`).
pub use twopc_runtime::config::var;

/// A variable is missing or malformed.
#[derive(Debug, thiserror::Error)]
#[error("{var}: {problem}")]
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// What to fix.
    pub problem: String,
}

/// The function's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Tables whose streams arrive here, and what they are.
    pub tables: Tables,
    /// Firehose delivery stream.
    pub delivery_stream: String,
    /// Connections table.
    pub connections_table: String,
    /// Management endpoint.
    pub websocket_endpoint: String,
    /// Firehose's endpoint when it is not AWS's (a local emulator).
    pub firehose_endpoint: Option<String>,
    /// The CloudWatch namespace of the batch metrics.
    pub metrics_namespace: String,
}

impl Config {
    /// Reads variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let get = |var: &'static str, what: &str| {
            lookup(var)
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| ConfigError {
                    var,
                    problem: format!("missing: set it to {what}"),
                })
        };
        let tables_json = get(
            var::STREAM_TABLES,
            r#"e.g. {"twopc-transactions": "transactions", "twopc-accounts": {"participant": "accounts", "key": {"hash": {"name": "id", "type": "S"}}}}"#,
        )?;
        Ok(Config {
            tables: parse_tables(&tables_json).map_err(|problem| ConfigError {
                var: var::STREAM_TABLES,
                problem,
            })?,
            delivery_stream: get(var::DELIVERY_STREAM, "the Firehose delivery stream name")?,
            connections_table: get(var::CONNECTIONS_TABLE, "the connections table name")?,
            websocket_endpoint: get(
                var::WEBSOCKET_ENDPOINT,
                "https://{api-id}.execute-api.{region}.amazonaws.com/{stage}",
            )?,
            firehose_endpoint: lookup(var::FIREHOSE_ENDPOINT).filter(|v| !v.trim().is_empty()),
            metrics_namespace: lookup(var::METRICS_NAMESPACE)
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_METRICS_NAMESPACE.to_owned()),
        })
    }
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

/// Builds the processor from configuration and the functions' one AWS configuration.
pub fn processor(config: &Config, aws: &twopc_runtime::Aws) -> LiveProcessor {
    let dynamodb = aws.dynamodb();
    let mut firehose = aws_sdk_firehose::config::Builder::from(&aws.sdk);
    if let Some(url) = &config.firehose_endpoint {
        firehose = firehose.endpoint_url(url);
    }
    let firehose = aws_sdk_firehose::Client::from_conf(firehose.build());
    let management = aws_sdk_apigatewaymanagement::config::Builder::from(&aws.sdk)
        .endpoint_url(&config.websocket_endpoint)
        .build();
    Processor::new(
        config.tables.clone(),
        FirehoseLake::new(firehose, &config.delivery_stream),
        DynamoConnections::new(dynamodb, &config.connections_table, 7_200),
        ApiGatewayPush::new(aws_sdk_apigatewaymanagement::Client::from_conf(management)),
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

    #[test]
    fn configuration_names_what_is_missing() {
        let err = Config::from_lookup(|_| None).expect_err("empty");
        assert_eq!(err.var, var::STREAM_TABLES);
        assert!(parse_tables(r#"{"t": 3}"#).is_err());
    }
}
