//! The closed loop: a fixed number of transfers in flight, each worker starting the next as
//! soon as one ends, for a warm-up and a measured window.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::BenchError;
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
pub struct ClosedLoop {
    /// Every transfer, warm-up and tail included.
    pub samples: Vec<Sample>,
    /// The measured window: a transfer that started inside it counts.
    pub window: (Instant, Instant),
}

impl ClosedLoop {
    /// The transfers that started inside the window.
    pub fn measured(&self) -> impl Iterator<Item = &Sample> {
        let (from, to) = self.window;
        self.samples
            .iter()
            .filter(move |s| s.start >= from && s.start < to)
    }
}

/// Keeps `concurrency` transfers of `workload` in flight for `warmup + measure`. Returns when
/// the last transfer has ended.
pub async fn closed_loop(
    driver: Arc<Driver>,
    (keys, workload): (KeyGen, Workload),
    concurrency: usize,
    (warmup, measure): (Duration, Duration),
    seed: u64,
) -> Result<ClosedLoop, BenchError> {
    let from = Instant::now() + warmup;
    let to = from + measure;
    let workers: Vec<_> = (0..concurrency)
        .map(|w| {
            let driver = driver.clone();
            tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed ^ ((w as u64) << 32));
                let mut out = vec![];
                while Instant::now() < to {
                    let t = keys.transfer(&mut rng, workload);
                    let start = Instant::now();
                    let done = driver.transfer(&t).await;
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
    Ok(ClosedLoop {
        samples,
        window: (from, to),
    })
}
