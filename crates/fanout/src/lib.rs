//! # twopc-fanout — committed changes out
//!
//! DynamoDB Streams tell every write; only some are commits. This crate turns stream records
//! into what analysts and browsers should see, and nothing else:
//! - [`detect`]: pure commit detection. A participant item's change is a commit of `T` when the
//!   write added `T`'s `committed` fence entry (the commit write releases the lock and adds the
//!   entry in one conditional update); when the new image is a tombstone, that commit was a
//!   `delete` (no item). Prepares (lock added), aborts (lock removed with an `aborted` entry,
//!   placeholders buried as tombstones) and fence-only writes are not commits. A
//!   transactions-table change is
//!   an outcome when `status` becomes `COMMITTED` or `ABORTED`.
//! - [`lake`]: the data lake's one schema (columns and types, from which the Glue table's and
//!   the local Parquet files' are derived) and the typing of item attributes; `parquet_lake`
//!   (feature `parquet`): the local lake as Parquet files rolled like Firehose's.
//! - [`rows`]: data-lake rows (`eventId, txId, participant, key, item, version, committedAt`; one
//!   per transaction outcome too) with ids that make duplicates detectable, and the WebSocket
//!   messages (`entity.committed`, `transaction.completed`) with their topics.
//! - [`processor`]: a batch of stream records in, rows to the lake and messages to subscribers
//!   out, and the records whose delivery failed reported back (Lambda's
//!   `ReportBatchItemFailures`), so only those are retried.
//! - [`ports`]: the lake, the subscriptions and the push channel, as traits; [`sinks`]: API
//!   Gateway's `PostToConnection`.
//! - `poll` (feature `poller`): the local stand-in for Lambda's stream event source mapping.
//! - `firehose` (feature `firehose`): the data lake in AWS, with partial-failure retries.
//! - [`connections`]: the WebSocket routes (`$connect`, `$disconnect`, `subscribe`).
#![warn(missing_docs)]

pub mod connections;
pub mod detect;
#[cfg(feature = "firehose")]
pub mod firehose;
pub mod lake;
#[cfg(feature = "parquet")]
pub mod parquet_lake;
#[cfg(feature = "poller")]
pub mod poll;
pub mod ports;
pub mod processor;
pub mod rows;
pub mod sinks;
