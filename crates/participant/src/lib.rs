//! # participant — the participant function's handler
//!
//! The generic participant (`docs/protocol.md`) behind the `lambda` transport: one function per
//! service table. [`handler::handle`] takes a `ParticipantCall` (`{"action", "request"}`), runs
//! the core's participant logic on the function's table and returns the reply; a failure is a
//! function error whose `errorType` says what the caller can do.
#![warn(missing_docs)]

pub mod handler;
