//! Load shapes: closed loop (a fixed number of transfers in flight, each worker starting the
//! next as soon as one ends; for a time, or for a count of transfers) and open loop (transfers arrive on a schedule whatever happens,
//! queue, and are served by a pool; latency runs from the scheduled arrival, so queueing counts).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::sync::{Mutex, mpsc};

use crate::BenchError;
use crate::systems::{Done, Driver, Outcome};
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
    /// Latency (to the transfer's end: applied).
    pub fn latency(&self) -> Duration {
        self.end.saturating_duration_since(self.start)
    }

    /// Latency to the client's answer.
    pub fn answer_latency(&self) -> Duration {
        self.done.answered.saturating_duration_since(self.start)
    }
}

/// What one closed-loop run measured.
pub struct ClosedLoop {
    /// Every transfer, warm-up and tail included.
    pub samples: Vec<Sample>,
    /// The measured window: transfers committed with an end inside it count.
    pub window: (Instant, Instant),
}

impl ClosedLoop {
    /// Latencies of the transfers committed inside the window.
    pub fn window_latencies(&self) -> Vec<Duration> {
        let (from, to) = self.window;
        self.samples
            .iter()
            .filter(|s| s.done.outcome == Outcome::Committed && s.end >= from && s.end < to)
            .map(Sample::latency)
            .collect()
    }
}

/// Keeps `concurrency` transfers in flight for `warmup + measure`, and longer if fewer than
/// `min_in_window` transfers committed after the warm-up (a loaded machine or a slow system
/// must still yield latencies, not an empty window; the window then grows, and throughput is
/// computed over its real length). Gives up extending after `max_extension`. Returns when the
/// last transfer has ended.
pub async fn closed_loop(
    driver: Arc<Driver>,
    keys: KeyGen,
    workload: Workload,
    concurrency: usize,
    (warmup, measure): (Duration, Duration),
    (min_in_window, max_extension): (usize, Duration),
    seed: u64,
) -> Result<ClosedLoop, BenchError> {
    let t0 = Instant::now();
    let from = t0 + warmup;
    let stop = from + measure;
    let give_up = stop + max_extension;
    let in_window = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..concurrency)
        .map(|w| {
            let (driver, in_window) = (driver.clone(), in_window.clone());
            tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed ^ ((w as u64) << 32));
                let mut out = vec![];
                loop {
                    let now = Instant::now();
                    let short = in_window.load(Ordering::Relaxed) < min_in_window;
                    if now >= stop && !(short && now < give_up) {
                        break;
                    }
                    let t = keys.transfer(&mut rng, workload);
                    let sample = run_one(&driver, &t, now).await;
                    if sample.done.outcome == Outcome::Committed && sample.end >= from {
                        in_window.fetch_add(1, Ordering::Relaxed);
                    }
                    out.push(sample);
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
    // The window closes at `stop`, or just after the `min_in_window`-th commit if that came later.
    let mut ends: Vec<Instant> = samples
        .iter()
        .filter(|s| s.done.outcome == Outcome::Committed && s.end >= from)
        .map(|s| s.end)
        .collect();
    ends.sort_unstable();
    let to = match ends.get(min_in_window.saturating_sub(1)) {
        Some(&end) if min_in_window > 0 && end >= stop => end + Duration::from_nanos(1),
        _ => stop,
    };
    Ok(ClosedLoop {
        samples,
        window: (from, to),
    })
}

/// Keeps `concurrency` transfers in flight until `transfers` have started, each worker
/// starting its next transfer once the previous one ended (applied, not merely answered, so one
/// transfer's finish never overlaps the next one's answer). Returns when the last has ended.
pub async fn closed_count(
    driver: Arc<Driver>,
    keys: KeyGen,
    workload: Workload,
    concurrency: usize,
    transfers: usize,
    seed: u64,
) -> Result<Vec<Sample>, BenchError> {
    let started = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..concurrency)
        .map(|w| {
            let (driver, started) = (driver.clone(), started.clone());
            tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed ^ ((w as u64) << 32));
                let mut out = vec![];
                while started.fetch_add(1, Ordering::Relaxed) < transfers {
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
    Ok(samples)
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
