//! # twopc-participant-sdk — a service takes part with its own logic
//!
//! A service implements [`Hooks`] (`reserve`, `confirm`, `cancel`: its business logic, given
//! the transaction id, its opaque payload and a deadline); [`SdkParticipant`] answers the
//! coordinator's prepare, commit and abort around them and owns the protocol: each hook runs at
//! most once per transaction and outcome; duplicates are answered from the recorded state; an
//! abort before its prepare is recorded, so the prepare is refused (null compensation,
//! anti-hanging); a prepared transaction whose coordinator went silent is resolved by its
//! record ([`SdkParticipant::resolve`], [`SdkParticipant::sweep`]), never decided here; the
//! staged commit's recovery is answered over the phases ([`SdkParticipant::inquire`]: held,
//! committed, prevented, or, with `prevent`, made prevented by ending a claim still deciding).
//!
//! Map of the crate:
//! - [`hooks`]: the trait a service implements, and what its hooks are given and answer.
//! - [`state`]: a transaction's state here, its legal moves, how the core's rules read it.
//! - [`store`]: the port for that state ([`StateStore`]) and its in-memory implementation;
//!   [`dynamo`]: on a DynamoDB table of the service's own
//!   (`twopc_dynamo::tables::TableKind::ParticipantState`).
//! - [`participant`]: the driver.
//! - [`http`]: the HTTP adapter (`POST /prepare|commit|abort|inquire`, signed requests).
//! - `lambda` (feature `lambda`): the Lambda adapter, for the coordinator's `lambda` transport.
//! - [`conformance`]: the conformance kit a participant's own tests run against it.
//!
//! The answers are the core's (`twopc_core::rules`); the messages are the ones every
//! participant receives (`twopc_core::message`), the payload in [`PrepareRequest::payload`].
//!
//! [`PrepareRequest::payload`]: twopc_core::message::PrepareRequest::payload
#![warn(missing_docs)]

pub mod conformance;
pub mod dynamo;
pub mod hooks;
pub mod http;
#[cfg(feature = "lambda")]
pub mod lambda;
pub mod participant;
pub mod state;
pub mod store;

pub use dynamo::DynamoStates;
pub use hooks::{Call, HookError, Hooks, Reservation};
pub use participant::{Error, Resolved, SdkConfig, SdkParticipant};
pub use store::{MemoryStates, StateStore, Written};
