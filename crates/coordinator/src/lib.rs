//! # coordinator — the coordinator function's handler
//!
//! API Gateway (REST, proxy integration) → `POST /transactions`, `GET /transactions/{id}`, and
//! the operator API under `/operator` ([`operator`]) (docs/api.md). [`handler::handle`] is a plain async function over an [`handler::App`]: the
//! Lambda binary (`main.rs`) wires it to the Lambda runtime, the local stack (`twopc serve`)
//! to its HTTP server, and the tests call it directly with sample events.
#![warn(missing_docs)]

pub mod after;
pub mod handler;
pub mod operator;
