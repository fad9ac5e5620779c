//! The process's own accounting, read from `/proc` (the workspace forbids `unsafe`, so no
//! `getrusage` through libc): CPU time, and the machine's load. DynamoDB Local is another
//! process (a JVM), so this CPU is the coordinator's and the SDK's (plus the bench driver's
//! small share), never the engine's.

use std::time::Duration;

/// Linux reports `utime`/`stime` in clock ticks of `USER_HZ`, 100 on every Linux ABI in use.
const TICK: Duration = Duration::from_millis(10);

/// The process's CPU time at one moment (`utime + stime` of `/proc/self/stat`, in ticks;
/// threads that exited included).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuSnapshot {
    ticks: u64,
}

impl CpuSnapshot {
    /// Reads the counter now.
    pub fn now() -> CpuSnapshot {
        CpuSnapshot {
            ticks: process_ticks().unwrap_or(0),
        }
    }

    /// CPU time since `earlier` (to a tick: sum it over windows of seconds).
    pub fn since(&self, earlier: &CpuSnapshot) -> Duration {
        TICK * u32::try_from(self.ticks.saturating_sub(earlier.ticks)).unwrap_or(u32::MAX)
    }
}

fn process_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start after its closing ')'.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The machine's load average (1, 5, 15 minutes), as `/proc/loadavg` has it.
pub fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_when_this_process_works() {
        // Work until the counter shows 50 ms of CPU (a loaded machine gives this thread less
        // of each wall-clock second, so no fixed time is waited), within a generous bound.
        let before = CpuSnapshot::now();
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while CpuSnapshot::now().since(&before) < Duration::from_millis(50) {
            for _ in 0..100_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no CPU time counted"
            );
        }
        assert_ne!(x, 1);
    }
}
