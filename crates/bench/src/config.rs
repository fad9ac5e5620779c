//! What a run measures: the full run (`make bench`) and `--quick`'s seconds-long one with the
//! same shape. Every figure of the model and the load is here, and printed in the report.

use std::time::Duration;

use rand::Rng;
use serde::Serialize;
use twopc_core::participant::ParticipantConfig;

use crate::inject::model::LatencyModel;
use crate::inject::service::Production;
use crate::systems::System;
use crate::workload::{Contention, KeyGen, Workload};

/// How a client retries a transfer whose attempt met a conflict, the same for every system:
/// full-jitter exponential backoff (a random wait up to `base · 2^(attempt-1)`, at most `cap`),
/// at most `attempts` attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// Attempts per transfer, the first included.
    pub attempts: u32,
    /// The first backoff's bound.
    #[serde(serialize_with = "as_ms")]
    pub base: Duration,
    /// No backoff's bound exceeds this.
    #[serde(serialize_with = "as_ms")]
    pub cap: Duration,
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

/// One assumption changed, for the sensitivity rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    /// The assumption changed, and to what (as the report prints it).
    pub name: String,
    /// The production model with that change.
    pub production: Production,
}

/// The cells whose assumptions the sensitivity rows change.
#[derive(Clone, Debug, PartialEq)]
pub struct Sensitivity {
    /// The workload of the rows.
    pub workload: Workload,
    /// Transfers in flight.
    pub concurrency: usize,
    /// The systems compared.
    pub systems: Vec<System>,
    /// The changed assumptions.
    pub variants: Vec<Variant>,
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
    /// The workloads, each at every concurrency.
    pub workloads: Vec<Workload>,
    /// Transfers in flight, per cell.
    pub concurrency: Vec<usize>,
    /// The systems of every cell ([`System::Classic`] runs at one in flight only).
    pub systems: Vec<System>,
    /// Unmeasured time at the start of each slice.
    pub warmup: Duration,
    /// Measured time of each slice.
    pub measure: Duration,
    /// Slices per cell: the systems of a cell group take turns, so a change in the machine's
    /// load reaches them alike.
    pub slices: u32,
    /// How conflicts are retried.
    pub retry: Retry,
    /// The transaction timeout the protocol's requests carry.
    pub timeout_ms: u64,
    /// The participants' fence capacity.
    pub fence_capacity: usize,
    /// DynamoDB's latency per operation (seeded).
    pub latency: LatencyModel,
    /// DynamoDB's conflicts and partition rate.
    pub production: Production,
    /// The rows that change one assumption.
    pub sensitivity: Sensitivity,
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

    /// The full run (`make bench`): about five minutes on a 2-core machine.
    pub fn full(endpoint: &str) -> BenchConfig {
        let production = Production::default();
        let variant = |name: &str, production| Variant {
            name: name.into(),
            production,
        };
        BenchConfig {
            mode: "full",
            endpoint: endpoint.into(),
            engine: DYNAMODB_LOCAL.into(),
            keys: KeyGen {
                accounts: 10_000,
                hot: 2,
                hot_fraction: 0.9,
            },
            initial_balance: 1_000_000_000,
            workloads: [Contention::Uniform, Contention::Hot]
                .into_iter()
                .flat_map(|contention| {
                    [2, 8].map(|participants| Workload {
                        contention,
                        participants,
                    })
                })
                .collect(),
            concurrency: vec![1, 8, 32],
            systems: System::ALL.to_vec(),
            warmup: Duration::from_millis(300),
            measure: Duration::from_millis(2000),
            slices: 2,
            retry: Retry {
                attempts: 5,
                base: Duration::from_millis(25),
                cap: Duration::from_millis(400),
            },
            timeout_ms: 5000,
            fence_capacity: ParticipantConfig::default().fence_capacity,
            latency: LatencyModel::default(),
            production,
            sensitivity: Sensitivity {
                workload: Workload {
                    contention: Contention::Hot,
                    participants: 2,
                },
                concurrency: 32,
                systems: vec![System::Native, System::Staged],
                variants: vec![
                    variant(
                        "hold share 0.25",
                        Production {
                            hold_share: 0.25,
                            ..production
                        },
                    ),
                    variant(
                        "hold share 1.0",
                        Production {
                            hold_share: 1.0,
                            ..production
                        },
                    ),
                    variant(
                        "partition 500 units/s",
                        Production {
                            partition_units: 500,
                            ..production
                        },
                    ),
                ],
            },
        }
    }

    /// A seconds-long run with the same shape (`--quick`, and the test in `make test`).
    pub fn quick(endpoint: &str) -> BenchConfig {
        let full = BenchConfig::full(endpoint);
        let mut sensitivity = full.sensitivity.clone();
        sensitivity.concurrency = 4;
        sensitivity.variants.truncate(1);
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
            ],
            concurrency: vec![1, 4],
            warmup: Duration::from_millis(50),
            measure: Duration::from_millis(400),
            slices: 1,
            sensitivity,
            ..full
        }
    }
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
}
