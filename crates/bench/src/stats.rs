//! Latency summaries from the sorted samples themselves (nearest-rank percentiles; no
//! histogram approximation, no crate).

use std::time::Duration;

use crate::results::Percentiles;

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
