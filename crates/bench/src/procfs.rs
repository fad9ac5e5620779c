//! The process's own accounting, read from `/proc` (the workspace forbids `unsafe`, so no
//! `getrusage` through libc): CPU time and peak resident memory. DynamoDB Local is another
//! process (a JVM), so this CPU is the coordinator's and the SDK's (plus the bench driver's
//! small share), never the engine's.

use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

/// Linux reports `utime`/`stime` in clock ticks of `USER_HZ`, 100 on every Linux ABI in use.
const TICK: Duration = Duration::from_millis(10);

/// CPU counters at one moment.
#[derive(Clone, Debug, Default)]
pub struct CpuSnapshot {
    /// Per live thread: nanoseconds on CPU (`/proc/self/task/<tid>/schedstat`, field 1).
    threads: BTreeMap<u32, u64>,
    /// Process `utime + stime` in ticks (`/proc/self/stat`), exited threads included.
    ticks: u64,
}

impl CpuSnapshot {
    /// Reads the counters now.
    pub fn now() -> CpuSnapshot {
        let mut threads = BTreeMap::new();
        if let Ok(dir) = fs::read_dir("/proc/self/task") {
            for entry in dir.flatten() {
                let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                    continue;
                };
                let ns = fs::read_to_string(entry.path().join("schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse().ok());
                if let Some(ns) = ns {
                    threads.insert(tid, ns);
                }
            }
        }
        CpuSnapshot {
            threads,
            ticks: process_ticks().unwrap_or(0),
        }
    }

    /// CPU time used since `earlier`: the per-thread nanosecond counters when they account for
    /// it (no thread that ran in between has exited), else the coarser process ticks.
    pub fn since(&self, earlier: &CpuSnapshot) -> Duration {
        let fine: u64 = self
            .threads
            .iter()
            .map(|(tid, ns)| ns.saturating_sub(earlier.threads.get(tid).copied().unwrap_or(0)))
            .sum();
        let coarse = TICK * u32::try_from(self.ticks.saturating_sub(earlier.ticks)).unwrap_or(0);
        let fine = Duration::from_nanos(fine);
        // Ticks are sampled: allow two ticks of disagreement before distrusting the threads.
        if coarse > fine + 2 * TICK {
            coarse
        } else {
            fine
        }
    }

    /// Process ticks (for the run-wide cross-check in the report).
    pub fn coarse(&self) -> Duration {
        TICK * u32::try_from(self.ticks).unwrap_or(u32::MAX)
    }
}

fn process_ticks() -> Option<u64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start at field 3: `state`.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime is field 14, stime field 15 (1-based over the whole line) = 11 and 12 here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The machine's load average over 1, 5 and 15 minutes (`/proc/loadavg`): how busy the shared
/// cores were around a run, which explains much of its run-to-run noise.
pub fn load_average() -> Option<String> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    (fields.len() == 3).then(|| fields.join(" "))
}

/// Peak resident set size since start or since the last [`reset_peak_rss`] (`VmHWM`), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    status_kib("VmHWM:")
}

/// Resident set size now (`VmRSS`), in KiB.
pub fn rss_kib() -> Option<u64> {
    status_kib("VmRSS:")
}

fn status_kib(field: &str) -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// Resets the peak to the current RSS (`echo 5 > /proc/self/clear_refs`, Linux ≥ 4.0), so a
/// phase's own peak can be read. Returns whether the kernel accepted it.
pub fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_when_this_process_works() {
        // Busy until the counters show 10 ms of CPU (a loaded machine may take a while to give
        // them); they must get there.
        let before = CpuSnapshot::now();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let mut used = Duration::ZERO;
        while used < Duration::from_millis(10) && start.elapsed() < Duration::from_secs(10) {
            for _ in 0..100_000 {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            used = CpuSnapshot::now().since(&before);
        }
        assert!(x != 1);
        assert!(used >= Duration::from_millis(10), "{used:?}");
    }

    #[test]
    fn peak_memory_is_readable_and_resettable() {
        assert!(peak_rss_kib().is_some_and(|k| k > 0));
        assert!(rss_kib().is_some_and(|k| k > 0));
        reset_peak_rss();
        assert!(peak_rss_kib() >= rss_kib().map(|r| r / 2));
    }
}
