//! Crashes for tests: a coordinator armed with a [`CrashAt`] plan stops dead where the plan
//! fires (its future never resumes, see `twopc_core::fault`), and [`CrashAt::run`] drops it
//! there, as a killed process leaves it: nothing after the point happens, nothing is cleaned up,
//! calls still in flight are cut off.

use std::future::Future;
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Notify;
use twopc_core::fault::{FaultPoint, Faults};

type Decide = Box<dyn Fn(FaultPoint) -> bool + Send + Sync>;

/// When the coordinator crashes.
pub struct CrashAt {
    decide: Decide,
    fired: Mutex<Vec<FaultPoint>>,
    crashed: Notify,
}

impl CrashAt {
    /// Crashes at `point` (or never, with `None`).
    pub fn new(point: impl Into<Option<FaultPoint>>) -> Self {
        let point = point.into();
        Self::when(move |p| Some(p) == point)
    }

    /// Crashes at any point with probability `p`, drawn from a generator seeded with `seed`.
    pub fn randomly(seed: u64, p: f64) -> Self {
        let rng = Mutex::new(StdRng::seed_from_u64(seed));
        Self::when(move |_| rng.lock().expect("rng").random_bool(p))
    }

    fn when(decide: impl Fn(FaultPoint) -> bool + Send + Sync + 'static) -> Self {
        CrashAt {
            decide: Box::new(decide),
            fired: Mutex::default(),
            crashed: Notify::new(),
        }
    }

    /// Runs `work` (a `submit`, `recover` or sweeper pass over a coordinator armed with this
    /// plan) to its end, or until the plan fires: then `work` is dropped where it stopped and
    /// the point is returned.
    pub async fn run<T>(&self, work: impl Future<Output = T>) -> Result<T, FaultPoint> {
        let crashed = self.crashed.notified();
        tokio::pin!(crashed);
        crashed.as_mut().enable(); // registered before `work` can fire
        tokio::select! {
            biased;
            () = crashed => Err(self.last().expect("a crash fired a point")),
            out = work => Ok(out),
        }
    }

    /// How many times the plan fired.
    pub fn fired(&self) -> usize {
        self.fired.lock().expect("fired").len()
    }

    fn last(&self) -> Option<FaultPoint> {
        self.fired.lock().expect("fired").last().copied()
    }
}

impl Faults for CrashAt {
    fn fire(&self, point: FaultPoint) -> bool {
        let fire = (self.decide)(point);
        if fire {
            self.fired.lock().expect("fired").push(point);
            self.crashed.notify_waiters();
        }
        fire
    }
}
