//! Latency summaries from the sorted samples themselves (nearest-rank percentiles; no
//! histogram approximation, no crate).

use std::time::Duration;

/// A latency distribution's summary (in JSON: milliseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Samples.
    pub n: usize,
    /// Mean.
    #[serde(rename = "meanMs", serialize_with = "as_ms")]
    pub mean: Duration,
    /// Median.
    #[serde(rename = "p50Ms", serialize_with = "as_ms")]
    pub p50: Duration,
    /// 95th percentile.
    #[serde(rename = "p95Ms", serialize_with = "as_ms")]
    pub p95: Duration,
    /// 99th percentile.
    #[serde(rename = "p99Ms", serialize_with = "as_ms")]
    pub p99: Duration,
    /// Largest.
    #[serde(rename = "maxMs", serialize_with = "as_ms")]
    pub max: Duration,
}

impl Latency {
    /// Summarises `samples` (sorted in place).
    pub fn of(samples: &mut [Duration]) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        samples.sort_unstable();
        let total: Duration = samples.iter().sum();
        Latency {
            n: samples.len(),
            mean: total / u32::try_from(samples.len()).unwrap_or(u32::MAX),
            p50: percentile(samples, 0.50),
            p95: percentile(samples, 0.95),
            p99: percentile(samples, 0.99),
            max: samples[samples.len() - 1],
        }
    }
}

/// Nearest-rank percentile of sorted samples: the smallest sample with at least `q` of all
/// samples at or below it.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A duration as milliseconds, for JSON.
pub fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(ms(*d))
}

/// An optional duration as milliseconds, for JSON.
pub fn as_ms_opt<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(ms(*d)),
        None => s.serialize_none(),
    }
}

/// Milliseconds as a float, for reports.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<Duration> = (1..=100).rev().map(d).collect();
        let l = Latency::of(&mut v);
        assert_eq!((l.p50, l.p95, l.p99, l.max), (d(50), d(95), d(99), d(100)));
        assert_eq!(l.mean, Duration::from_micros(50_500));
        assert_eq!(percentile(&[d(7)], 0.99), d(7));
        assert_eq!(Latency::of(&mut []).n, 0);
    }
}
