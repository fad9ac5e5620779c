//! # twopc-function — what every function and a participant service share
//!
//! The small ground the Lambda functions (through `twopc-runtime`) and a service on
//! `twopc-participant-sdk` both stand on, without the coordinator's machinery or its AWS
//! clients:
//!
//! - [`var`]: the environment variables, each named once; [`env`]: reading them at start.
//! - [`logs`]: JSON logs and the transaction's span.
//! - [`errors`]: how a participant function reports a failure, and how callers read it.
//! - `call` (feature `lambda`): answering one participant invocation.
#![warn(missing_docs)]

#[cfg(feature = "lambda")]
pub mod call;
pub mod env;
pub mod errors;
pub mod logs;
pub mod var;
