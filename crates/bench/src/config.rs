//! The bench's parameters: the full run of `make bench` and the seconds-long `--quick` one.

use std::time::Duration;

use twopc_core::participant::ParticipantConfig;

use crate::inject::Injection;
use crate::systems::System;
use crate::workload::{Contention, Workload};

/// The open-loop scenario of the seed: transfers arrive at a fixed rate, served by a pool.
#[derive(Clone, Debug, PartialEq)]
pub struct Burst {
    /// Arrivals per second.
    pub rate: u32,
    /// For how long arrivals come.
    pub seconds: f64,
    /// Transfers in flight at most (the pool serving the queue).
    pub workers: usize,
    /// Participants per transfer (uniform keys).
    pub participants: usize,
}

impl Burst {
    /// Transfers that arrive.
    pub fn transfers(&self) -> usize {
        (f64::from(self.rate) * self.seconds).round() as usize
    }
}

/// Everything a run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    /// `full` or `quick` (printed in the report).
    pub mode: String,
    /// DynamoDB Local.
    pub endpoint: String,
    /// Accounts per table.
    pub accounts: u32,
    /// Hot accounts per table (hot workload).
    pub hot_accounts: u32,
    /// Share of hot keys in the hot workload.
    pub hot_fraction: f64,
    /// Balance of every account and wallet at the start of a cell.
    pub initial_balance: u64,
    /// Systems run (all four by default; fewer for profiling one).
    pub systems: Vec<System>,
    /// Workloads measured closed-loop.
    pub workloads: Vec<Workload>,
    /// Transactions in flight (closed loop), per cell.
    pub concurrency: Vec<usize>,
    /// Not measured at the start of each slice (connections, caches).
    pub warmup: Duration,
    /// Measured part of each cell (all its slices together).
    pub measure: Duration,
    /// A slice's window is extended until at least this many transfers committed in it, so a
    /// slow system on a loaded machine still yields latencies (throughput uses the real window).
    pub min_in_window: usize,
    /// How long a slice's window may be extended for `min_in_window`.
    pub max_extension: Duration,
    /// Slices per cell: the systems of one workload and concurrency take turns this many times.
    pub slices: u32,
    /// Mixed load run once before everything, unmeasured (DynamoDB Local's JIT).
    pub engine_warmup: Duration,
    /// The open-loop scenario, if run.
    pub burst: Option<Burst>,
    /// Attempts per transfer: a transfer that aborts on a conflict is retried (new transaction)
    /// up to this many attempts in all, by every system alike.
    pub max_attempts: u32,
    /// The coordinator's transaction timeout (`timeoutMs`).
    pub timeout_ms: u64,
    /// Seed of the key generators (runs are repeatable up to timing).
    pub seed: u64,
    /// Entries an item's fence keeps (`ParticipantConfig::fence_capacity`): the default a
    /// deployment runs, or `--fence-capacity`, as `TWOPC_FENCE_CAPACITY` would set it, to measure
    /// what it costs.
    pub fence_capacity: usize,
    /// Whether each cell ends with a units slice per system, whose requests ask for their
    /// consumed capacity (the write units column); `--no-write-units` skips them.
    pub write_units: bool,
    /// The injected-latency cells, if run (`--no-injected` skips them).
    pub injection: Option<Injection>,
    /// Only the injected-latency cells (`--only injected`).
    pub only_injected: bool,
}

impl BenchConfig {
    /// The participants' tunables: the defaults, but for the fence's capacity.
    pub fn participant(&self) -> ParticipantConfig {
        ParticipantConfig {
            fence_capacity: self.fence_capacity,
            ..ParticipantConfig::default()
        }
    }
}

impl BenchConfig {
    /// The transfer systems to run, in the order each workload runs them.
    pub fn transfer_systems(&self) -> Vec<System> {
        System::TRANSFER
            .into_iter()
            .filter(|s| self.systems.contains(s))
            .collect()
    }

    /// The full run (`make bench`): ~6 minutes of measurement on a 2-core machine.
    pub fn full(endpoint: &str) -> BenchConfig {
        let seed = 7;
        let mut workloads = vec![];
        for contention in [Contention::Uniform, Contention::Hot] {
            for participants in [2, 8] {
                workloads.push(Workload {
                    contention,
                    participants,
                });
            }
        }
        BenchConfig {
            mode: "full".into(),
            endpoint: endpoint.into(),
            systems: vec![
                System::Unit,
                System::Native,
                System::Auto,
                System::Coordinator,
                System::Staged,
                System::StagedApplied,
                System::Serial,
            ],
            accounts: 10_000,
            hot_accounts: 10,
            hot_fraction: 0.9,
            initial_balance: 1_000_000_000,
            workloads,
            concurrency: vec![1, 8, 32],
            warmup: Duration::from_millis(200),
            measure: Duration::from_millis(3600),
            slices: 3,
            min_in_window: 10,
            max_extension: Duration::from_secs(20),
            engine_warmup: Duration::from_secs(6),
            burst: Some(Burst {
                rate: 1000,
                seconds: 5.0,
                workers: 32,
                participants: 2,
            }),
            max_attempts: 4,
            timeout_ms: 5000,
            seed,
            fence_capacity: ParticipantConfig::default().fence_capacity,
            write_units: true,
            injection: Some(Injection::full(seed)),
            only_injected: false,
        }
    }

    /// A seconds-long run with the same shape (`--quick`, and the test in `make test`).
    pub fn quick(endpoint: &str) -> BenchConfig {
        let w = |contention, participants| Workload {
            contention,
            participants,
        };
        let full = BenchConfig::full(endpoint);
        BenchConfig {
            mode: "quick".into(),
            accounts: 200,
            workloads: vec![
                w(Contention::Uniform, 2),
                w(Contention::Uniform, 8),
                w(Contention::Hot, 2),
            ],
            concurrency: vec![1, 4],
            warmup: Duration::from_millis(50),
            measure: Duration::from_millis(400),
            slices: 2,
            min_in_window: 3,
            engine_warmup: Duration::from_millis(300),
            burst: Some(Burst {
                rate: 200,
                seconds: 0.25,
                workers: 8,
                participants: 2,
            }),
            injection: Some(Injection::quick(full.seed)),
            ..full
        }
    }
}
