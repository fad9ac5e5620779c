//! Load shapes: closed loop (a fixed number of transfers in flight, each worker starting the
//! next as soon as one ends) and open loop (transfers arrive on a schedule whatever happens,
//! queue, and are served by a pool; latency runs from the scheduled arrival, so queueing counts).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::sync::{Mutex, mpsc};

use crate::BenchError;
use crate::systems::{Done, Driver};
use crate::workload::{KeyGen, Transfer, Workload};

/// One transfer as measured.
#[derive(Clone, Debug)]
pub struct Sample {
    /// When it started (closed loop) or was due to arrive (open loop).
    pub start: Instant,
    /// When its outcome was known.
    pub end: Instant,
    /// Items it wrote if committed.
    pub participants: usize,
    /// Net change of the balance sum if committed.
    pub net: i128,
    /// Its end.
    pub done: Done,
}

impl Sample {
    /// Latency.
    pub fn latency(&self) -> Duration {
        self.end.saturating_duration_since(self.start)
    }
}

/// Keeps `concurrency` transfers in flight from now until `until` has passed; returns when the
/// last one has ended.
pub async fn closed_loop(
    driver: Arc<Driver>,
    keys: KeyGen,
    workload: Workload,
    concurrency: usize,
    until: Duration,
    seed: u64,
) -> Result<(Instant, Vec<Sample>), BenchError> {
    let t0 = Instant::now();
    let stop = t0 + until;
    let workers: Vec<_> = (0..concurrency)
        .map(|w| {
            let driver = driver.clone();
            tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed ^ ((w as u64) << 32));
                let mut out = vec![];
                while Instant::now() < stop {
                    let t = keys.transfer(&mut rng, workload);
                    out.push(run_one(&driver, &t, Instant::now()).await);
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
    Ok((t0, samples))
}

async fn run_one(driver: &Driver, t: &Transfer, start: Instant) -> Sample {
    let done = driver.transfer(t).await;
    Sample {
        start,
        end: Instant::now(),
        participants: t.participants(),
        net: t.net(),
        done,
    }
}

/// `transfers` arrive at `rate` per second; `workers` serve them in arrival order.
pub async fn open_loop(
    driver: Arc<Driver>,
    keys: KeyGen,
    workload: Workload,
    rate: u32,
    transfers: usize,
    workers: usize,
    seed: u64,
) -> Result<(Instant, Vec<Sample>), BenchError> {
    let (tx, rx) = mpsc::unbounded_channel::<(Instant, Transfer)>();
    let rx = Arc::new(Mutex::new(rx));
    let t0 = Instant::now();
    let interval = Duration::from_secs(1) / rate.max(1);
    let arrivals = tokio::spawn(async move {
        let mut rng = SmallRng::seed_from_u64(seed);
        for i in 0..transfers {
            let due = t0 + interval * u32::try_from(i).unwrap_or(u32::MAX);
            tokio::time::sleep_until(due.into()).await;
            if tx.send((due, keys.transfer(&mut rng, workload))).is_err() {
                break;
            }
        }
    });
    let pool: Vec<_> = (0..workers)
        .map(|_| {
            let (driver, rx) = (driver.clone(), rx.clone());
            tokio::spawn(async move {
                let mut out = vec![];
                loop {
                    let next = rx.lock().await.recv().await;
                    let Some((due, t)) = next else { break };
                    out.push(run_one(&driver, &t, due).await);
                }
                out
            })
        })
        .collect();
    arrivals
        .await
        .map_err(|e| BenchError::Check(format!("arrivals: {e}")))?;
    let mut samples = vec![];
    for w in pool {
        samples.extend(
            w.await
                .map_err(|e| BenchError::Check(format!("worker: {e}")))?,
        );
    }
    Ok((t0, samples))
}
