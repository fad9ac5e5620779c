//! Injected latency: the same systems with DynamoDB's latency as measured from AWS Lambda laid
//! over DynamoDB Local, at one (and four) in flight, so the protocols' round trips show as they
//! would deployed rather than as DynamoDB Local's serial engine makes them.
//!
//! - [`lognormal`]: the fits (closed form from a p50 and a p99) and their quantiles, including
//!   the slowest of several requests sent together (the floor);
//! - [`model`]: the published figures per operation, their source, the Lambda hop;
//! - [`connector`]: the SDK's HTTP client wrapped to wait a seeded sample before each request;
//! - [`cells`]: the injected cells (a fixed count of transfers each), answer and applied times,
//!   lock holds per item, round trips to the answer;
//! - [`report`]: their section of `latest.md` and the `injected` list of `latest.json`.

pub mod cells;
pub mod connector;
pub mod lognormal;
pub mod model;
pub mod report;

use crate::workload::{Contention, Workload};
use model::LatencyModel;

/// What the injected cells run.
#[derive(Clone, Debug, PartialEq)]
pub struct Injection {
    /// The latencies injected.
    pub model: LatencyModel,
    /// Workloads.
    pub workloads: Vec<Workload>,
    /// Transfers in flight, per cell.
    pub concurrency: Vec<usize>,
    /// Transfers measured per cell.
    pub transfers: usize,
    /// Transfers run first in each cell, unmeasured (connections).
    pub warmup: usize,
}

impl Injection {
    /// `make bench`'s: uniform 2P and 8P and the exclusive hot 2P workload, at 1 and 4 in
    /// flight, 200 transfers a cell.
    pub fn full(seed: u64) -> Injection {
        Injection {
            model: LatencyModel {
                seed,
                ..LatencyModel::default()
            },
            workloads: vec![
                workload(Contention::Uniform, 2),
                workload(Contention::Uniform, 8),
                workload(Contention::Exclusive, 2),
            ],
            concurrency: vec![1, 4],
            transfers: 200,
            warmup: 5,
        }
    }

    /// `--quick`'s: the same workloads at one in flight, a dozen transfers a cell.
    pub fn quick(seed: u64) -> Injection {
        Injection {
            concurrency: vec![1],
            transfers: 12,
            warmup: 2,
            ..Injection::full(seed)
        }
    }
}

fn workload(contention: Contention, participants: usize) -> Workload {
    Workload {
        contention,
        participants,
    }
}
