//! Latency summaries from the sorted samples themselves (nearest-rank percentiles; no
//! histogram approximation, no crate).

use std::time::Duration;

use crate::results::Percentiles;

/// A latency distribution's summary (in JSON: milliseconds), as `twopc-bench-live` reports it.
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
pub fn percentile<T: Copy + Default>(sorted: &[T], q: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// p50, p99 and p99.9 of milliseconds, rounded to hundredths.
pub fn percentiles(mut ms: Vec<f64>) -> Percentiles {
    ms.sort_unstable_by(f64::total_cmp);
    let at = |q| (percentile(&ms, q) * 100.0).round() / 100.0;
    Percentiles {
        p50: at(0.5),
        p99: at(0.99),
        p999: at(0.999),
    }
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
        let v: Vec<Duration> = (1..=100).map(d).collect();
        assert_eq!(
            (
                percentile(&v, 0.5),
                percentile(&v, 0.99),
                percentile(&v, 1.0)
            ),
            (d(50), d(99), d(100))
        );
        assert_eq!(percentile(&[d(7)], 0.99), d(7));
        assert_eq!(percentile::<Duration>(&[], 0.5), Duration::ZERO);
        let p = percentiles((1..=1000).rev().map(f64::from).collect());
        assert_eq!((p.p50, p.p99, p.p999), (500.0, 990.0, 999.0));
    }
}
