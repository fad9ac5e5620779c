//! The closed loop: a fixed number of transfers in flight, each worker starting the next as
//! soon as one ends, for a warm-up and a measured window; the counters are read when the
//! window opens and when it closes, so they count the window alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use twopc_core::ports::Clock;

use crate::BenchError;
use crate::clock::ModelClock;
use crate::systems::{Done, Driver, TransferEnd};
use crate::workload::{KeyGen, Workload};

/// One transfer as measured.
#[derive(Clone, Debug)]
pub struct Sample {
    /// When it started.
    pub start: Instant,
    /// When it ended (applied, or its last attempt aborted).
    pub end: Instant,
    /// Items it wrote if committed.
    pub participants: usize,
    /// Net change of the balance sum if committed.
    pub net: i128,
    /// Its end.
    pub done: Done,
}

impl Sample {
    /// Time to the client's answer.
    pub fn answer_latency(&self) -> Duration {
        self.done.answered.saturating_duration_since(self.start)
    }

    /// Whether it committed.
    pub fn committed(&self) -> bool {
        self.done.end == TransferEnd::Committed
    }
}

/// What one closed-loop run measured.
pub struct ClosedLoop<S> {
    /// Every transfer, warm-up and tail included.
    pub samples: Vec<Sample>,
    /// The measured window.
    pub window: (Instant, Instant),
    /// The counters when it opened and when it closed.
    pub counters: (S, S),
}

impl<S> ClosedLoop<S> {
    /// The transfers that started inside the window.
    pub fn measured(&self) -> impl Iterator<Item = &Sample> {
        let (from, to) = self.window;
        self.samples
            .iter()
            .filter(move |s| s.start >= from && s.start < to)
    }

    /// Transfers answered committed inside the window.
    pub fn committed_in_window(&self) -> u64 {
        let (from, to) = self.window;
        self.samples
            .iter()
            .filter(|s| s.committed() && s.done.answered >= from && s.done.answered < to)
            .count() as u64
    }
}

/// What a closed loop runs: the driver, how keys are drawn, how many in flight.
pub struct Load {
    /// The system's driver.
    pub driver: Arc<Driver>,
    /// The keys.
    pub keys: KeyGen,
    /// The workload.
    pub workload: Workload,
    /// Transfers in flight.
    pub concurrency: usize,
    /// Model time (the moving hot spot's periods).
    pub clock: ModelClock,
}

/// Keeps `load.concurrency` transfers in flight for `warmup + measure` (wall time), reading
/// `counters` as the measured window opens and closes. Returns when the last transfer has
/// ended.
pub async fn closed_loop<S: Send + 'static>(
    load: &Load,
    (warmup, measure): (Duration, Duration),
    seed: u64,
    counters: impl Fn() -> S + Send + 'static,
) -> Result<ClosedLoop<S>, BenchError> {
    let from = Instant::now() + warmup;
    let to = from + measure;
    let reader = tokio::spawn(async move {
        tokio::time::sleep_until(from.into()).await;
        let opened = counters();
        tokio::time::sleep_until(to.into()).await;
        (opened, counters())
    });
    let started_ms = load.clock.now_ms();
    let workers: Vec<_> = (0..load.concurrency)
        .map(|w| {
            let (driver, clock) = (load.driver.clone(), load.clock.clone());
            let (keys, workload) = (load.keys, load.workload);
            tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed ^ ((w as u64) << 32));
                let mut out = vec![];
                while Instant::now() < to {
                    let period = (clock.now_ms() - started_ms) / keys.hot_period_ms.max(1);
                    let t = keys.transfer(&mut rng, workload, seed << 20 | period);
                    let start = Instant::now();
                    let done = driver.transfer(w, &t).await;
                    out.push(Sample {
                        start,
                        end: Instant::now(),
                        participants: t.participants(),
                        net: t.net(),
                        done,
                    });
                }
                out
            })
        })
        .collect();
    let mut samples = vec![];
    for w in workers {
        samples.extend(
            w.await
                .map_err(|e| BenchError::Check(format!("worker: {e}")))?,
        );
    }
    let counters = reader
        .await
        .map_err(|e| BenchError::Check(format!("counter reader: {e}")))?;
    Ok(ClosedLoop {
        samples,
        window: (from, to),
        counters,
    })
}
