//! What a run measures: the full run (`make bench`) and `--quick`'s seconds-long one with the
//! same shape. Every figure of the model and the load is here, and printed in the report.
//! Times are model time: under dilation each takes `k` times as long on the wall
//! ([`crate::clock`]).

use std::time::Duration;

use rand::Rng;
use serde::Serialize;
use twopc_core::participant::ParticipantConfig;

use crate::inject::model::LatencyModel;
use crate::inject::service::Production;
use crate::systems::System;
use crate::workload::{Contention, KeyGen, Workload};

/// How a client retries a transfer whose attempt met a conflict or a throttle, the same for
/// every system: full-jitter exponential backoff (a random wait up to `base · 2^(attempt-1)`,
/// at most `cap`), no new attempt past the transfer's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// The first backoff's bound.
    #[serde(serialize_with = "as_ms")]
    pub base: Duration,
    /// No backoff's bound exceeds this.
    #[serde(serialize_with = "as_ms")]
    pub cap: Duration,
    /// A transfer's deadline from its start: the protocol's transaction timeout, and the time
    /// native's client retries for.
    #[serde(serialize_with = "as_ms")]
    pub deadline: Duration,
}

impl Retry {
    /// The wait after attempt `attempt` (1-based) failed.
    pub fn backoff(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let bound = self
            .base
            .saturating_mul(1 << attempt.saturating_sub(1).min(16))
            .min(self.cap);
        bound.mul_f64(rng.random_range(0.0..=1.0))
    }
}

/// The hop in front of the product as deployed: the caller's request through API Gateway to a
/// warm coordinator function, and its answer back (a lognormal, model ms).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FrontDoor {
    /// What it is.
    pub name: String,
    /// Median added (ms).
    pub p50_ms: f64,
    /// 99th percentile added (ms).
    pub p99_ms: f64,
}

/// One assumption changed, for the sensitivity rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    /// The assumption changed, and to what (as the report prints it).
    pub name: String,
    /// The production model with that change.
    pub production: Production,
}

/// Cells that change one thing against a main-grid cell: an assumption (the sensitivity
/// rows), or the share of transfers on hot items (the crossing point).
#[derive(Clone, Debug, PartialEq)]
pub struct Rows<T> {
    /// The workload of the rows.
    pub workload: Workload,
    /// Transfers in flight.
    pub concurrency: usize,
    /// The systems compared.
    pub systems: Vec<System>,
    /// What each row changes.
    pub rows: Vec<T>,
}

/// The engine `make bench` runs on, and reports written before the report named its engine.
pub const DYNAMODB_LOCAL: &str = "DynamoDB Local";

/// What a run measures.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    /// `full` or `quick`.
    pub mode: &'static str,
    /// The engine's URL.
    pub endpoint: String,
    /// The engine under the model, named for the report ("DynamoDB Local", the embedded one).
    pub engine: String,
    /// How transfers draw their keys.
    pub keys: KeyGen,
    /// Balance of every seeded item.
    pub initial_balance: u64,
    /// The workloads, each at its concurrencies.
    pub workloads: Vec<Workload>,
    /// Transfers in flight, per cell, of the uniform workloads.
    pub concurrency: Vec<usize>,
    /// Transfers in flight of the hot workloads.
    pub hot_concurrency: Vec<usize>,
    /// Transfers in flight of the moving hot spot.
    pub moving_concurrency: Vec<usize>,
    /// The systems of every cell ([`System::Classic`] runs at one in flight only).
    pub systems: Vec<System>,
    /// The dilation factor by concurrency: `(c, k)`, the first whose `c` is at least the
    /// cell's.
    pub dilation: Vec<(usize, u32)>,
    /// Unmeasured time at the start of each repeat.
    pub warmup: Duration,
    /// Measured time of each repeat.
    pub measure: Duration,
    /// Repeats per cell: the systems of a cell group take turns, so a change in the machine's
    /// load reaches them alike.
    pub repeats: u32,
    /// How conflicts are retried.
    pub retry: Retry,
    /// The participants' fence capacity.
    pub fence_capacity: usize,
    /// DynamoDB's latency per operation (seeded).
    pub latency: LatencyModel,
    /// DynamoDB's conflicts and partitions.
    pub production: Production,
    /// The product's front hop as deployed.
    pub front_door: FrontDoor,
    /// The rows that change one assumption.
    pub sensitivity: Rows<Variant>,
    /// The rows that change the share of transfers on hot items.
    pub crossing: Rows<f64>,
}

impl BenchConfig {
    /// The participants' tunables: the defaults, but for the fence's capacity.
    pub fn participant(&self) -> ParticipantConfig {
        ParticipantConfig {
            fence_capacity: self.fence_capacity,
            ..ParticipantConfig::default()
        }
    }

    /// The systems of a cell at `concurrency` in flight.
    pub fn systems_at(&self, concurrency: usize) -> Vec<System> {
        self.systems
            .iter()
            .copied()
            .filter(|s| *s != System::Classic || concurrency == 1)
            .collect()
    }

    /// The concurrencies of a workload.
    pub fn concurrency_of(&self, workload: Workload) -> &[usize] {
        match workload.contention {
            Contention::Uniform => &self.concurrency,
            Contention::Hot => &self.hot_concurrency,
            Contention::Moving => &self.moving_concurrency,
        }
    }

    /// The dilation factor of a cell at `concurrency` in flight.
    pub fn dilation_at(&self, concurrency: usize) -> u32 {
        self.dilation
            .iter()
            .find(|(c, _)| *c >= concurrency)
            .or(self.dilation.last())
            .map_or(1, |(_, k)| *k)
    }

    /// The full run (`make bench`).
    pub fn full(endpoint: &str) -> BenchConfig {
        let production = Production::default();
        let hot2 = Workload {
            contention: Contention::Hot,
            participants: 2,
        };
        BenchConfig {
            mode: "full",
            endpoint: endpoint.into(),
            engine: DYNAMODB_LOCAL.into(),
            keys: KeyGen {
                accounts: 10_000,
                hot: 2,
                hot_fraction: 0.9,
                hot_period_ms: 3000,
            },
            initial_balance: 1_000_000_000,
            workloads: [Contention::Uniform, Contention::Hot, Contention::Moving]
                .into_iter()
                .flat_map(|contention| {
                    [2, 8].map(|participants| Workload {
                        contention,
                        participants,
                    })
                })
                .collect(),
            concurrency: vec![1, 32],
            hot_concurrency: vec![8, 32, 128],
            moving_concurrency: vec![8, 32],
            systems: System::ALL.to_vec(),
            dilation: vec![(1, 4), (8, 8), (32, 16), (128, 16)],
            warmup: Duration::from_millis(200),
            measure: Duration::from_millis(500),
            repeats: 3,
            retry: Retry {
                base: Duration::from_millis(25),
                cap: Duration::from_millis(400),
                deadline: Duration::from_millis(5000),
            },
            fence_capacity: ParticipantConfig::default().fence_capacity,
            latency: LatencyModel::default(),
            production,
            front_door: FrontDoor {
                name: "API Gateway REST API and a warm coordinator function".into(),
                p50_ms: 12.0,
                p99_ms: 40.0,
            },
            sensitivity: Rows {
                workload: hot2,
                concurrency: 32,
                systems: vec![System::Native, System::Staged],
                rows: sensitivity_rows(production),
            },
            crossing: Rows {
                workload: hot2,
                concurrency: 32,
                systems: vec![System::Native, System::Staged],
                rows: vec![0.05, 0.1, 0.25, 0.5],
            },
        }
    }

    /// A seconds-long run with the same shape (`--quick`, and the test in `make test`).
    pub fn quick(endpoint: &str) -> BenchConfig {
        let full = BenchConfig::full(endpoint);
        let mut sensitivity = full.sensitivity.clone();
        sensitivity.concurrency = 4;
        sensitivity.systems = vec![System::Native, System::Staged];
        sensitivity.rows.truncate(1);
        let mut crossing = full.crossing.clone();
        crossing.concurrency = 4;
        crossing.systems = vec![System::Native, System::Staged];
        crossing.rows = vec![0.5];
        BenchConfig {
            mode: "quick",
            keys: KeyGen {
                accounts: 200,
                ..full.keys
            },
            workloads: vec![
                Workload {
                    contention: Contention::Uniform,
                    participants: 2,
                },
                sensitivity.workload,
                Workload {
                    contention: Contention::Moving,
                    participants: 2,
                },
            ],
            concurrency: vec![1, 4],
            hot_concurrency: vec![4],
            moving_concurrency: vec![4],
            dilation: vec![(usize::MAX, 2)],
            warmup: Duration::from_millis(50),
            measure: Duration::from_millis(250),
            repeats: 1,
            sensitivity,
            crossing,
            ..full
        }
    }
}

/// The sensitivity rows: each unsourced assumption of the model moved to either side.
fn sensitivity_rows(p: Production) -> Vec<Variant> {
    let rows = [
        (
            "hold share 0.25",
            Production {
                hold_share: 0.25,
                ..p
            },
        ),
        (
            "hold share 1.0",
            Production {
                hold_share: 1.0,
                ..p
            },
        ),
        (
            "cancelled hold share 0",
            Production {
                cancel_hold_share: 0.0,
                ..p
            },
        ),
        (
            "cancelled hold share 0.5",
            Production {
                cancel_hold_share: 0.5,
                ..p
            },
        ),
        (
            "partition burst 100 ms",
            Production {
                partition_burst_ms: 100,
                ..p
            },
        ),
        (
            "hot items split (a partition each)",
            Production {
                partition_span: 1,
                ..p
            },
        ),
    ];
    rows.into_iter()
        .map(|(name, production)| Variant {
            name: name.into(),
            production,
        })
        .collect()
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u128(d.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn backoff_grows_with_the_attempt_and_stops_at_the_cap() {
        let r = BenchConfig::full("http://x").retry;
        let mut rng = SmallRng::seed_from_u64(1);
        let mut worst = |attempt| {
            (0..200)
                .map(|_| r.backoff(attempt, &mut rng))
                .max()
                .unwrap()
        };
        assert!(worst(1) <= r.base && worst(1) > r.base / 2);
        assert!(worst(2) > r.base && worst(2) <= r.base * 2);
        assert!(worst(10) <= r.cap && worst(10) > r.cap / 2);
    }

    #[test]
    fn the_five_round_path_runs_at_one_in_flight_only() {
        let c = BenchConfig::full("http://x");
        assert!(c.systems_at(1).contains(&System::Classic));
        assert_eq!(
            c.systems_at(32),
            [System::Native, System::Auto, System::Staged]
        );
    }

    #[test]
    fn a_moving_repeat_is_shorter_than_the_hot_period() {
        // docs/bench.md: each repeat measures the time right after a move, not a whole period.
        let c = BenchConfig::full("http://x");
        let period = Duration::from_millis(c.keys.hot_period_ms);
        assert!(c.warmup + c.measure < period, "{:?}", c.warmup + c.measure);
    }

    #[test]
    fn the_dilation_is_the_first_step_at_or_above_the_concurrency() {
        let c = BenchConfig::full("http://x");
        assert_eq!(c.dilation_at(1), 4);
        assert_eq!(c.dilation_at(32), 16);
        assert_eq!(c.dilation_at(64), 16);
        assert_eq!(c.dilation_at(1000), 16);
    }
}
