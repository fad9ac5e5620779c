#![doc = include_str!("../README.md")]
//!
//! ## Map of the crate
//!
//! - [`Hooks`] (with [`Call`], [`Reservation`], [`HookError`]): what a service implements.
//! - [`SdkParticipant`], built by [`Builder`]: the driver (prepare, commit, abort, inquiry,
//!   [`SdkParticipant::resolve`] and [`SdkParticipant::sweep`] of states whose coordinator went
//!   silent, [`SdkParticipant::spawn_sweeper`]).
//! - [`state`]: a transaction's state here and its legal moves; [`StateStore`]: the port for
//!   it, in memory ([`MemoryStates`]) or (feature `dynamodb`) `DynamoStates` on a table of the
//!   service's own.
//! - `http` (feature `http`): the signed router and `serve_http`; `lambda` (feature `lambda`):
//!   the Lambda adapter; `conformance` (feature `conformance`): the kit a participant's own
//!   tests run.
//!
//! The answers are the core's rules (`twopc_core::rules`); the messages are the ones every
//! participant receives (`twopc_core::message`).
#![warn(missing_docs)]

mod builder;
#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "dynamodb")]
mod dynamo;
mod hooks;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "lambda")]
pub mod lambda;
mod participant;
mod start;
pub mod state;
mod store;

pub use builder::Builder;
#[cfg(feature = "dynamodb")]
pub use dynamo::DynamoStates;
pub use hooks::{Call, HookError, Hooks, Reservation};
#[cfg(feature = "http")]
pub use http::serve_http;
pub use participant::{DEFAULT_CLAIM_MS, Error, Resolved, SWEEP_LIMIT, SdkParticipant};

/// The usual participant: the service's hooks `H`, its states and the coordinator's log on
/// DynamoDB, the system's clock (what [`Builder::dynamodb_from_env`] builds).
#[cfg(feature = "dynamodb")]
pub type DynamoParticipant<H> = SdkParticipant<H, DynamoStates, DynamoTxLog, SystemClock>;
pub use start::StartError;
pub use store::{MemoryStates, StateStore, Written};
/// The transaction log a participant resolves silent coordinators by, on DynamoDB.
#[cfg(feature = "dynamodb")]
pub use twopc_dynamo::DynamoTxLog;

// What a service's code names besides the SDK's own types, so that it needs no other crate of
// the project: exact decimals for its payloads, the transaction id, a vote and its reason, the ports
// a participant is generic over, and the start-up errors and logs.
pub use twopc_core::decimal::Decimal;
pub use twopc_core::ids::TxId;
pub use twopc_core::ports::{Clock, PortError, SystemClock, TxLog};
pub use twopc_core::record::{Vote, VoteReason};
pub use twopc_function::env::ConfigError;
/// Installs JSON log lines on stdout, filtered by `RUST_LOG` (once per process; later calls do
/// nothing).
pub use twopc_function::logs::init_tracing;
