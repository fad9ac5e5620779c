//! # twopc-bench — "should I use this instead of `TransactWriteItems`?", in production terms
//!
//! `make bench` runs this crate's binary against an engine of its own (DynamoDB Local) and
//! writes `bench/results/latest.json` (every figure) and `latest.md` (tables rendered from it
//! alone). The engine serves one request at a time and never refuses a transaction for a
//! conflict, so every cell runs behind the **production model** ([`inject`]): DynamoDB's
//! latency as measured from Lambda, its transaction conflicts, its partitions' throttling;
//! dilated where the engine cannot keep up ([`clock`]).
//!
//! - [`systems`]: native `TransactWriteItems`, `auto` (the default mode), the staged commit and
//!   the five-round path, each doing the same transfers; [`workload`]: transfers between
//!   `accounts` and `wallets`, uniform, hot or moving-hot keys, 2 or 8 participants;
//!   [`config`]: the full and the `--quick` runs, every parameter;
//! - [`load`]: the closed loop; [`run`]: the cell groups (systems taking turns), the
//!   sensitivity and crossing rows, the product's sweeper and the audits; [`tables`]: seeding
//!   and the audit that checks the balance sum was conserved, exactly the committed writes
//!   applied and nothing left held;
//! - [`counter`]: DynamoDB requests counted by an SDK interceptor, and the rounds they form;
//!   [`capacity`]: the units each response reports; [`cost`]: dollars at list prices;
//!   [`procfs`]: CPU time; [`stats`]: percentiles;
//! - [`results`]: what `latest.json` holds; [`report`]: `latest.md` and the pages' figures,
//!   rendered from it.
//!
//! `make bench-live`, the other bench (the local stack from outside), is the crate
//! `twopc-bench-live`.
//!
//! Every figure is reported beside native's figure of the same run, as a ratio: a lone
//! absolute time on a shared 2-core machine means little.
#![warn(missing_docs)]

pub mod capacity;
pub mod clock;
pub mod config;
pub mod cost;
pub mod counter;
pub mod inject;
pub mod load;
pub mod procfs;
pub mod report;
pub mod results;
pub mod run;
pub mod stats;
pub mod systems;
pub mod tables;
pub mod workload;

use std::error::Error as StdError;

use twopc_core::ports::PortError;

pub use results::{Cell, Report};
pub use run::run;

/// Why the bench could not run (a failed *check* is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A protocol port (log, items, tables) failed.
    #[error(transparent)]
    Port(#[from] PortError),
    /// A DynamoDB call of the bench itself failed.
    #[error("{context}")]
    Sdk {
        /// What was attempted.
        context: String,
        /// The SDK's error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// Something the bench relies on does not hold.
    #[error("{0}")]
    Check(String),
    /// Reading or writing the report.
    #[error("{path}")]
    Io {
        /// The file.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

impl BenchError {
    /// Wraps an SDK error.
    pub fn sdk(context: impl Into<String>, e: impl StdError + Send + Sync + 'static) -> Self {
        BenchError::Sdk {
            context: context.into(),
            source: Box::new(e),
        }
    }
}

/// An error and its sources, on one line.
pub fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
