//! Lognormal latencies fitted to two published percentiles, in closed form, and the quantiles
//! the report derives from them: a percentile of one request and of the slowest of several sent
//! together (the floor of a one-round protocol).
//!
//! A lognormal `exp(N(mu, sigma²))` has median `exp(mu)` and q-quantile `exp(mu + sigma·z_q)`
//! with `z_q = Φ⁻¹(q)`, so a median and a 99th percentile fix it exactly:
//! `mu = ln p50`, `sigma = ln(p99 / p50) / z_0.99`.

use rand::Rng;

/// `Φ⁻¹(0.99)`, the standard normal's 99th percentile (2.3263...).
pub const Z99: f64 = 2.326_347_874_040_841;

/// The standard normal's distribution function, `Φ(x) = erfc(-x/√2) / 2`.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The standard normal's quantile `Φ⁻¹(q)`, by bisection on [`normal_cdf`] (exact to the last
/// bits that matter here; `q` is clamped into (0, 1)).
pub fn normal_quantile(q: f64) -> f64 {
    bisect(|x| normal_cdf(x) >= q, -40.0, 40.0)
}

/// The smallest `x` in `[lo, hi]` (to f64 precision) for which the monotone `at_least` holds.
fn bisect(at_least: impl Fn(f64) -> bool, mut lo: f64, mut hi: f64) -> f64 {
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if at_least(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// A lognormal distribution of milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lognormal {
    /// Mean of the logarithm (`ln` of the median, in ms).
    pub mu: f64,
    /// Standard deviation of the logarithm.
    pub sigma: f64,
}

impl Lognormal {
    /// The lognormal whose median is `p50` and 99th percentile `p99` (ms; `p99 > p50 > 0`).
    pub fn from_p50_p99(p50: f64, p99: f64) -> Lognormal {
        Lognormal {
            mu: p50.ln(),
            sigma: (p99 / p50).ln() / Z99,
        }
    }

    /// The same spread around another median.
    pub fn with_median(self, p50: f64) -> Lognormal {
        Lognormal {
            mu: p50.ln(),
            ..self
        }
    }

    /// The median (ms).
    pub fn median(&self) -> f64 {
        self.mu.exp()
    }

    /// The q-quantile (ms).
    pub fn quantile(&self, q: f64) -> f64 {
        (self.mu + self.sigma * normal_quantile(q)).exp()
    }

    /// `P(X <= ms)`.
    pub fn cdf(&self, ms: f64) -> f64 {
        if ms <= 0.0 {
            return 0.0;
        }
        normal_cdf((ms.ln() - self.mu) / self.sigma)
    }

    /// One sample (ms): a standard normal by Box-Muller from two uniforms, then `exp(mu + sigma·z)`.
    pub fn sample(&self, rng: &mut impl Rng) -> f64 {
        // `1 - u` lies in (0, 1], so the logarithm is finite.
        let u1 = 1.0 - rng.random::<f64>();
        let u2 = rng.random::<f64>();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        (self.mu + self.sigma * z).exp()
    }
}

/// The q-quantile (ms) of the slowest of several requests sent together, each taking a fixed
/// `offset` (ms, a transport hop) plus an independent sample of its distribution: the `t` at
/// which `∏ F_i(t - offset_i) = q`, by bisection. For `n` requests of one distribution and no
/// offset this is `F⁻¹(q^(1/n))`.
pub fn quantile_of_slowest(parts: &[(Lognormal, f64)], q: f64) -> f64 {
    if parts.is_empty() {
        return 0.0;
    }
    let hi = parts
        .iter()
        .map(|(d, offset)| offset + d.quantile(1.0 - 1e-12))
        .fold(0.0, f64::max);
    bisect(
        |t| parts.iter().map(|(d, o)| d.cdf(t - o)).product::<f64>() >= q,
        0.0,
        hi,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance * b.abs().max(1e-12)
    }

    #[test]
    fn the_normal_quantile_inverts_the_distribution_function() {
        assert!(close(normal_quantile(0.99), Z99, 1e-12));
        assert!(normal_quantile(0.5).abs() < 1e-12);
        assert!(close(normal_quantile(0.975), 1.959_963_984_540_054, 1e-12));
        assert!(close(normal_quantile(0.01), -Z99, 1e-12));
        assert!(close(normal_cdf(1.0), 0.841_344_746_068_542_9, 1e-12));
    }

    #[test]
    fn a_fit_returns_the_percentiles_it_was_given() {
        let single = Lognormal::from_p50_p99(7.55, 16.2);
        assert!(close(single.median(), 7.55, 1e-12));
        assert!(close(single.quantile(0.5), 7.55, 1e-9));
        assert!(close(single.quantile(0.99), 16.2, 1e-9));
        // sigma = ln(16.2 / 7.55) / 2.3263
        assert!(close(single.sigma, 0.328_181_218, 1e-8), "{}", single.sigma);
        let transact = Lognormal::from_p50_p99(25.3, 92.5);
        assert!(close(transact.quantile(0.99), 92.5, 1e-9));
        assert!(
            close(transact.sigma, 0.557_270_159, 1e-8),
            "{}",
            transact.sigma
        );
        // Moving the median keeps the spread: p99 / p50 stays 92.5 / 25.3.
        let moved = transact.with_median(32.1);
        assert!(close(moved.quantile(0.99) / 32.1, 92.5 / 25.3, 1e-9));
    }

    #[test]
    fn samples_follow_the_fit() {
        let d = Lognormal::from_p50_p99(7.55, 16.2);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut xs: Vec<f64> = (0..20_000).map(|_| d.sample(&mut rng)).collect();
        xs.sort_by(f64::total_cmp);
        let at = |q: f64| xs[(q * xs.len() as f64) as usize];
        assert!(close(at(0.5), 7.55, 0.02), "median {}", at(0.5));
        assert!(close(at(0.99), 16.2, 0.05), "p99 {}", at(0.99));
        assert!(xs[0] > 0.0);
    }

    #[test]
    fn the_slowest_of_n_is_the_quantile_at_q_to_the_one_over_n() {
        let d = Lognormal::from_p50_p99(7.55, 16.2);
        for n in [1_i32, 3, 9] {
            let parts = vec![(d, 0.0); n as usize];
            let direct = d.quantile(0.5_f64.powf(1.0 / f64::from(n)));
            assert!(close(quantile_of_slowest(&parts, 0.5), direct, 1e-9), "{n}");
        }
        // One of one is the distribution itself; more requests are slower.
        assert!(close(quantile_of_slowest(&[(d, 0.0)], 0.99), 16.2, 1e-9));
        let three = quantile_of_slowest(&[(d, 0.0); 3], 0.5);
        let nine = quantile_of_slowest(&[(d, 0.0); 9], 0.5);
        assert!(7.55 < three && three < nine, "{three} {nine}");
    }

    #[test]
    fn a_hop_delays_the_requests_that_take_it() {
        let d = Lognormal::from_p50_p99(7.55, 16.2);
        // A hop far longer than any write: the slowest is a hopped request.
        let hopped = quantile_of_slowest(&[(d, 0.0), (d, 100.0)], 0.5);
        assert!(close(hopped, 100.0 + 7.55, 1e-6), "{hopped}");
        // A hop on every request shifts the quantile by the hop.
        let all = quantile_of_slowest(&[(d, 5.0); 3], 0.5);
        let none = quantile_of_slowest(&[(d, 0.0); 3], 0.5);
        assert!(close(all, none + 5.0, 1e-9));
    }

    #[test]
    fn the_slowest_of_n_agrees_with_sampling() {
        // The floor as the brief defines it: the median of the max of N+1 samples.
        let d = Lognormal::from_p50_p99(7.55, 16.2);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut maxes: Vec<f64> = (0..20_000)
            .map(|_| (0..9).map(|_| d.sample(&mut rng)).fold(0.0, f64::max))
            .collect();
        maxes.sort_by(f64::total_cmp);
        let sampled = maxes[maxes.len() / 2];
        let exact = quantile_of_slowest(&[(d, 0.0); 9], 0.5);
        assert!(close(sampled, exact, 0.02), "{sampled} vs {exact}");
    }
}
