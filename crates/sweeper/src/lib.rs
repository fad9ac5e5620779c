//! # sweeper — the sweeper function's handler
//!
//! An EventBridge schedule invokes the function; [`handler::handle`] runs one recovery pass
//! (`twopc_core::sweeper`: overdue transactions, then orphan locks) and returns its report,
//! which is also logged and counted as metrics. The transactions table's stream invokes it too
//! ([`completer`]): the records a participant asked to recover are recovered at once. The
//! recovery logic lives in the core; this is only its shell.
#![warn(missing_docs)]

pub mod completer;
pub mod handler;
