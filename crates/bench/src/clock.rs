//! Model time. Under dilation every latency, hold and rate of the model is `k` times as long
//! (or slow) in wall time, so the product must see time pass `k` times slower too: its
//! deadlines, lock expiries and what it learns over time are in model time. [`ModelClock`] is
//! the clock port every product part of a cell runs on (coordinator, participants, sweeper).
//! Between cells, when nothing runs, it can jump ahead ([`ModelClock::advance`]), as if the
//! load had paused, so the sweeper finds what is past its deadline without a wall-clock wait.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use twopc_core::ports::Clock;

/// Wall time slowed by a factor, from the epoch time it started at; clones share it.
#[derive(Clone, Debug)]
pub struct ModelClock {
    base: Arc<Mutex<Base>>,
}

#[derive(Debug)]
struct Base {
    /// The wall instant of the last change of factor (or jump).
    wall: Instant,
    /// Model time then, µs since the epoch.
    model_us: u64,
    factor: u32,
}

impl Default for ModelClock {
    fn default() -> Self {
        ModelClock::starting_at(SystemTime::now())
    }
}

impl ModelClock {
    /// A clock at `t`, running at wall speed.
    pub fn starting_at(t: SystemTime) -> ModelClock {
        let model_us = t
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        ModelClock {
            base: Arc::new(Mutex::new(Base {
                wall: Instant::now(),
                model_us,
                factor: 1,
            })),
        }
    }

    fn rebase(&self, change: impl FnOnce(&mut Base)) {
        let mut b = self.base.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        b.model_us += (now - b.wall).as_micros() as u64 / u64::from(b.factor);
        b.wall = now;
        change(&mut b);
    }

    /// From now on, time runs `factor` times slower than the wall's.
    pub fn set_dilation(&self, factor: u32) {
        self.rebase(|b| b.factor = factor.max(1));
    }

    /// The factor.
    pub fn dilation(&self) -> u32 {
        self.base
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .factor
    }

    /// Jumps ahead by `d` of model time.
    pub fn advance(&self, d: Duration) {
        self.rebase(|b| b.model_us += d.as_micros() as u64);
    }

    /// Wall time that `model` of model time takes now.
    pub fn wall(&self, model: Duration) -> Duration {
        model * self.dilation()
    }

    /// Model time that `wall` of wall time is now.
    pub fn model(&self, wall: Duration) -> Duration {
        wall / self.dilation()
    }
}

impl Clock for ModelClock {
    fn now_ms(&self) -> u64 {
        let b = self.base.lock().unwrap_or_else(PoisonError::into_inner);
        let elapsed = b.wall.elapsed().as_micros() as u64 / u64::from(b.factor);
        (b.model_us + elapsed) / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_time_runs_slower_by_the_factor_and_jumps_when_told() {
        let clock = ModelClock::starting_at(UNIX_EPOCH + Duration::from_secs(1000));
        clock.set_dilation(1000);
        let t0 = clock.now_ms();
        assert!((1_000_000..1_000_010).contains(&t0), "{t0}");
        // 50 ms of wall time is at most a few µs of model time at a thousandfold dilation.
        std::thread::sleep(Duration::from_millis(50));
        assert!(clock.now_ms() - t0 <= 1);
        clock.advance(Duration::from_secs(5));
        assert!((t0 + 5000..=t0 + 5001).contains(&clock.now_ms()));
        assert_eq!(clock.wall(Duration::from_millis(3)), Duration::from_secs(3));
        assert_eq!(
            clock.model(Duration::from_secs(3)),
            Duration::from_millis(3)
        );
    }
}
