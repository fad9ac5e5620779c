//! How one figure is written in `latest.md`: verdicts, counts by operation and reason, sizes,
//! checks, the date and the machine.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::ratio;
use crate::counter::OPERATIONS;
use crate::systems::Reason;
use crate::{BurstResult, CellResult};

/// A target's verdict.
pub(super) fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "not measured",
    }
}

/// Requests per committed transfer by operation (`5 UpdateItem + 1 Put`, shortened names).
pub(super) fn by_op(c: &CellResult) -> String {
    let n = c.tally.committed.max(1) as f64;
    OPERATIONS
        .iter()
        .filter_map(|op| {
            let k = c.costs.requests.of(op);
            (k > 0).then(|| {
                let per = k as f64 / n;
                let short = op.trim_end_matches("Item").trim_end_matches("Items");
                if (per - per.round()).abs() < 0.005 {
                    format!("{per:.0} {short}")
                } else {
                    format!("{per:.2} {short}")
                }
            })
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Counts by [`Reason`], `conflict / condition / fenced / other`.
pub(super) fn by_reason(counts: &[u64; Reason::ALL.len()]) -> String {
    counts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Request and response bodies per committed transfer, KB.
pub(super) fn kb_per_commit(c: &CellResult) -> f64 {
    let bytes = c.costs.requests.bytes_sent + c.costs.requests.bytes_received;
    ratio(bytes as f64 / 1000.0, c.tally.committed as f64).unwrap_or(f64::NAN)
}

/// KiB as MiB, `–` when unknown.
pub(super) fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(|| "–".into(), |k| format!("{:.0}", k as f64 / 1024.0))
}

/// A cell's checks: `ok`, or what failed.
pub(super) fn check(problems: &[String]) -> String {
    if problems.is_empty() {
        "ok".into()
    } else {
        format!("**FAILED**: {}", problems.join("; "))
    }
}

/// `YYYY-MM-DD HH:MM UTC` of a time.
pub(crate) fn utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// The machine: its cores, CPU model and memory.
pub(super) fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_owned();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or_else(String::new, |k| {
            format!(", {:.0} GiB RAM", k as f64 / 1_048_576.0)
        });
    format!("{cores} cores ({model}){mem}")
}

/// Committed transfers per second of an open-loop run, first arrival to last end.
pub(super) fn burst_throughput(x: &BurstResult) -> f64 {
    ratio(x.tally.committed as f64, x.runtime.as_secs_f64()).unwrap_or(f64::NAN)
}

/// CPU time of this process per committed transfer of an open-loop run.
pub(super) fn burst_cpu(x: &BurstResult) -> Duration {
    match u32::try_from(x.tally.committed) {
        Ok(n) if n > 0 => x.costs.cpu / n,
        _ => Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01 00:00 UTC");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_251_200 + 3_660); // 2024-03-01 01:01
        assert_eq!(utc(t), "2024-03-01 01:01 UTC");
    }
}
