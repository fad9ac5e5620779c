//! Local stand-in for Lambda's DynamoDB Streams event source mapping: reads the tables' streams
//! (DynamoDB Local serves them) with `aws-sdk-dynamodbstreams`, turns each batch into the very
//! event Lambda would deliver (`aws_lambda_events::dynamodb::Event`), hands it to the
//! processor, and — like the mapping with `ReportBatchItemFailures` — redelivers from the first
//! failed record until it goes through. Positions are checkpointed after each delivered batch,
//! so a restart resumes where it stopped (at-least-once, never skipping).
//!
//! [`Poller::run`] reads every stream at once, each in its own loop that reads again at once
//! while a shard has a backlog (it filled a batch), soon after records came, and otherwise
//! waits `every`; it lists a stream's shards (`DescribeStream`, costly on DynamoDB Local) at
//! start, when a shard closes or fails, and otherwise every `DISCOVER_EVERY`.
//! [`Poller::poll_once`] reads everything there is, once (for tests and tools).
//!
//! Here: the clients and stream ARNs a poller is built from, and its errors. The poller itself
//! is in `poller`, the saved positions in `checkpoint`, the record-to-event conversion in
//! `event`, and DynamoDB Local's malformed empty maps repaired in `repair`.

mod checkpoint;
mod event;
mod poller;
mod repair;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
use aws_sdk_dynamodbstreams::Client;
use aws_sdk_dynamodbstreams::operation::describe_stream::DescribeStreamError;
use aws_sdk_dynamodbstreams::operation::get_shard_iterator::GetShardIteratorError;

pub use checkpoint::{Checkpointer, Checkpoints};
pub use poller::Poller;
use repair::RepairEmptyMaps;

/// Why a stream could not be found, listed or delivered. The messages carry the SDK's whole
/// error context (as `DisplayErrorContext` prints it) besides keeping it as the source, since
/// they are logged and shown as they are.
#[derive(Debug, thiserror::Error)]
pub enum PollError {
    /// `DescribeTable` failed.
    #[error("describing {table}: {}", aws_sdk_dynamodb::error::DisplayErrorContext(source.as_ref()))]
    DescribeTable {
        /// The table.
        table: String,
        /// Why.
        #[source]
        source: Box<SdkError<DescribeTableError>>,
    },
    /// The table has no stream enabled.
    #[error("table {table} has no stream")]
    NoStream {
        /// The table.
        table: String,
    },
    /// `DescribeStream` failed: the stream's shards could not be listed.
    #[error("describing stream {arn}: {}", aws_sdk_dynamodbstreams::error::DisplayErrorContext(source.as_ref()))]
    DescribeStream {
        /// The stream's ARN.
        arn: String,
        /// Why.
        #[source]
        source: Box<aws_sdk_dynamodbstreams::error::SdkError<DescribeStreamError>>,
    },
    /// `GetShardIterator` failed.
    #[error("iterator for {shard}: {}", aws_sdk_dynamodbstreams::error::DisplayErrorContext(source.as_ref()))]
    ShardIterator {
        /// The shard.
        shard: String,
        /// Why.
        #[source]
        source: Box<aws_sdk_dynamodbstreams::error::SdkError<GetShardIteratorError>>,
    },
    /// The records read do not make Lambda's stream event.
    #[error("building the stream event: {source}")]
    Event {
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// The stream ARN of a table.
pub async fn stream_arn(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<String, PollError> {
    let out = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| PollError::DescribeTable {
            table: table.to_owned(),
            source: Box::new(e),
        })?;
    out.table()
        .and_then(|t| t.latest_stream_arn())
        .map(str::to_owned)
        .ok_or_else(|| PollError::NoStream {
            table: table.to_owned(),
        })
}

/// A streams client for a local endpoint (`twopc_dynamo::sdk_config`: it sees the same tables
/// as the DynamoDB client), with the repair of DynamoDB Local's empty maps (`repair`).
pub async fn local_client(endpoint: &str) -> Client {
    let sdk = twopc_dynamo::sdk_config(Some(endpoint)).await;
    Client::from_conf(
        aws_sdk_dynamodbstreams::config::Builder::from(&sdk)
            .interceptor(RepairEmptyMaps)
            .build(),
    )
}
