//! # twopc-core — the two-phase-commit protocol, without I/O
//!
//! Map of the crate:
//! - [`decimal`], [`ids`], [`status`]: exact numbers, transaction ids, the status machine.
//! - [`op`]: the participant operation language and its validation.
//! - [`request`]: the client's request, its limits and validation, request hashing;
//!   [`service`]: the configuration of the services a request may name.
//! - [`layout`]: every attribute name the protocol stores, named once.
//! - [`record`]: the transaction record (participants, status, votes); [`item`]: what the
//!   protocol keeps on a participant item (lock, fence, horizon, shape); [`message`]: prepare,
//!   commit, abort and their answers.
//! - [`ports`]: what the protocol needs from the world (transaction log, participant store,
//!   transport, clock), with errors classified by what the caller can do.
//! - [`rules`]: the protocol's decisions as pure functions (the kernel the model check runs).
//! - [`participant`]: prepare / commit / abort / owner resolution (the lock rule), as drivers of
//!   the rules.
//! - [`coordinator`]: begin, prepare, decide, complete, finalize, and recovery.
//! - [`direct`]: the in-process transport.
//! - [`codes`]: every stable `code` an answer or a refusal carries.
//! - [`api`]: the HTTP API's answers.
//! - [`sweeper`]: recovery of overdue transactions and orphan locks; [`operator`]: what an
//!   operator lists, reads and asks for one transaction (recover, abort), by the same rules.
//! - `memory` (feature `memory`): in-memory stores with DynamoDB's conditional semantics, for
//!   tests.
//! - [`fault`]: named crash points for tests.
//! - [`signing`]: HMAC signatures of requests to `http` participants.
//!
//! `docs/protocol.md` describes the protocol this crate implements; `docs/architecture.md`
//! records the decisions behind it.
#![warn(missing_docs)]

pub mod api;
pub mod codes;
pub mod coordinator;
pub mod decimal;
pub mod direct;
pub mod fault;
pub mod ids;
pub mod item;
pub mod layout;
#[cfg(feature = "memory")]
pub mod memory;
pub mod message;
pub mod op;
pub mod operator;
pub mod participant;
pub mod ports;
pub mod record;
pub mod request;
pub mod rules;
pub mod service;
pub mod signing;
pub mod status;
pub mod sweeper;
