//! # twopc-dynamo — DynamoDB adapters of the core's ports
//!
//! - [`txlog`]: the transactions table ([`twopc_core::ports::TxLog`]): conditional status
//!   swaps, the sparse `pending-by-deadline` index while a record is open, TTL once terminal.
//! - [`items`]: participant items ([`twopc_core::ports::ParticipantStore`]): one conditional
//!   `UpdateItem`/`DeleteItem` per protocol step, lock, fence and placeholder.
//! - [`native`]: native transactions ([`twopc_core::ports::NativeStore`]): the record and
//!   every item in one `TransactWriteItems`.
//! - [`pending`]: the one query of the sharded `pending-by-deadline` index; `operator`: what an
//!   operator lists (that index and `ended-by-time`), counts and notes
//!   ([`twopc_core::ports::OperatorLog`]).
//! - [`tables`]: table definitions (keys, indexes, streams, TTL) and idempotent creation.
//! - [`connections`]: WebSocket subscriptions by topic.
//! - [`codec`]: JSON ↔ attribute values with exact numbers; [`expr`]: placeholders for every
//!   name and value; [`error`]: SDK errors classified into what the caller can do.
//!
//! Inside, from the ground up: `state` reads an item into the protocol's view; `clauses` spells
//! the expression clauses every participant write shares; `write` is the one conditional
//! `UpdateItem` and consistent read; `release` (a lock holder's release, a committed delete)
//! and `reservations` (escrow) are the writes [`items`] and [`native`] are made of.
#![warn(missing_docs)]

mod clauses;
pub mod codec;
pub mod connections;
pub mod error;
pub mod expr;
pub mod items;
pub mod native;
mod operator;
pub mod pending;
mod release;
mod reservations;
mod state;
pub mod tables;
pub mod txlog;
mod write;

pub use items::DynamoItems;
pub use native::DynamoNative;
pub use txlog::DynamoTxLog;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::config::Credentials;

/// The AWS configuration loader: the default chain, or, for local endpoints (DynamoDB Local, the
/// local WebSocket gateway, moto, `cargo lambda watch`), a fixed region and static dummy
/// credentials. DynamoDB Local keeps one database per access key and region, so every local
/// client built from this sees the same tables.
pub fn aws_loader(local: bool) -> aws_config::ConfigLoader {
    let loader = aws_config::defaults(BehaviorVersion::latest());
    if !local {
        return loader;
    }
    loader
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "local",
            "local",
            None,
            None,
            "local-endpoint",
        ))
}

/// The AWS configuration ([`aws_loader`]), with every client pointed at `endpoint` if given.
pub async fn sdk_config(endpoint: Option<&str>) -> aws_config::SdkConfig {
    let loader = aws_loader(endpoint.is_some());
    match endpoint {
        Some(url) => loader.endpoint_url(url),
        None => loader,
    }
    .load()
    .await
}

/// A DynamoDB client over [`sdk_config`].
pub async fn client(endpoint: Option<&str>) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&sdk_config(endpoint).await)
}
