//! # twopc-bench — what the coordinator costs, measured against what a user would pick instead
//!
//! `make bench` runs this crate's binary against a DynamoDB Local of its own and writes
//! `bench/results/latest.{md,svg,json}`. One run measures, side by side (each system on its own
//! seeded tables, the systems of a workload taking turns slice by slice):
//!
//! - [`systems`]: the coordinator (`direct` transport), native `TransactWriteItems`, the seed's
//!   serial driver, and a lone conditional `UpdateItem` (the engine's unit cost);
//! - [`workload`]: transfers between `accounts` and `wallets`, uniform or hot keys, 2 or 8
//!   participants; [`config`]: the full and the `--quick` parameter sets;
//! - [`load`]: closed loop at fixed concurrency, and the seed's open-loop burst;
//! - [`counter`]: DynamoDB requests counted by an SDK interceptor, per operation, and the
//!   sequential rounds they form; [`capacity`]: the write capacity units each response
//!   reports, by coordinator step; [`procfs`]: CPU time and peak memory from `/proc/self`;
//! - [`tables`]: the tables of each system (streams off: see there), seeding and the audit that
//!   checks after each cell that the balance sum was conserved, exactly the committed writes were
//!   applied and no lock or reservation was left behind, every escrow idle at the value;
//! - [`timing`]: the coordinator's ports wrapped to time each protocol step;
//! - [`stats`]: percentiles from sorted samples; [`report`]: Markdown, hand-written SVG, JSON;
//! - [`inject`]: the injected-latency cells: DynamoDB's latency as measured from AWS Lambda
//!   (seeded lognormal fits per operation) laid over DynamoDB Local by a wrapped HTTP client,
//!   native against the coordinator at one and four in flight: time to the answer and to
//!   applied, lock holds, the one-round floor;
//! - [`live`]: `make bench-live`, another bench: the local stack (`twopc serve`) from outside,
//!   a committed transfer's WebSocket push fresh and after aging, and a restart.
//!
//! The run itself ([`run`]: table sets, warm-up, the cells, the bursts, the audits) and what
//! it measured ([`Report`], [`CellResult`], [`Tally`], ...) are in two private modules,
//! `runner` and `results`, whose items this root re-exports.
//!
//! Every figure is reported beside the native figure of the same run, as a ratio: a lone
//! absolute time on a shared 2-core machine means little.
#![warn(missing_docs)]

pub mod capacity;
pub mod config;
pub mod counter;
pub mod inject;
pub mod live;
pub mod load;
pub mod procfs;
pub mod report;
pub mod stats;
pub mod systems;
pub mod tables;
pub mod timing;
pub mod workload;

mod results;
mod runner;

use std::error::Error as StdError;

use aws_sdk_dynamodb::Client;
use twopc_core::ports::PortError;

use crate::counter::RequestCounter;

pub use results::{BurstResult, Capacity, CellResult, Costs, Report, Tally};
pub use runner::run;

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
    /// Writing the report.
    #[error("writing {path}")]
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

/// A DynamoDB client for DynamoDB Local whose requests `counter` counts.
pub async fn client(endpoint: &str, counter: &RequestCounter) -> Client {
    let sdk = twopc_dynamo::sdk_config(Some(endpoint)).await;
    let conf = aws_sdk_dynamodb::config::Builder::from(&sdk)
        .interceptor(counter.clone())
        .build();
    Client::from_conf(conf)
}
