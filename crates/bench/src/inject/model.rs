//! What DynamoDB's latency is taken to be when the bench injects it: one lognormal per
//! operation, fitted to figures measured from AWS Lambda, and a fixed Lambda-invoke hop per
//! participant call.

use std::time::Duration;

use crate::inject::lognormal::{Lognormal, quantile_of_slowest};

/// Where the figures come from (printed in the report).
pub const SOURCE: &str = "A. DeBrie, \"DynamoDB Transactions Performance Testing\" (2020), \
                          measured from AWS Lambda in one region";

/// The operations delayed as one single-item request.
pub const SINGLE: [&str; 5] = ["PutItem", "UpdateItem", "GetItem", "DeleteItem", "Query"];

/// Published figures (ms) and the fits derived from them.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyModel {
    /// A single-item write or read: (p50, p99).
    pub single: (f64, f64),
    /// `TransactWriteItems` of [`LatencyModel::transact_items`] items: (p50, p99).
    pub transact: (f64, f64),
    /// Items of the `transact` figures.
    pub transact_items: usize,
    /// `TransactWriteItems` of [`LatencyModel::transact_large_items`] items: p50.
    pub transact_large: f64,
    /// Items of the `transact_large` figure.
    pub transact_large_items: usize,
    /// Added to every participant call of the coordinator (prepare, commit, abort), as a
    /// Lambda invoke of the `lambda` transport would be; zero is the `direct` transport.
    pub lambda_hop: Duration,
    /// Seed of the delays.
    pub seed: u64,
}

impl Default for LatencyModel {
    fn default() -> Self {
        LatencyModel {
            single: (7.55, 16.2),
            transact: (25.3, 92.5),
            transact_items: 5,
            transact_large: 32.1,
            transact_large_items: 25,
            lambda_hop: Duration::ZERO,
            seed: 7,
        }
    }
}

impl LatencyModel {
    /// A single-item request's distribution.
    pub fn single(&self) -> Lognormal {
        Lognormal::from_p50_p99(self.single.0, self.single.1)
    }

    /// A `TransactWriteItems` of `items` items: its median interpolated (or extrapolated)
    /// linearly in the item count between the two published medians, its spread that of the
    /// smaller transaction's fit (the only one with a published p99).
    pub fn transact(&self, items: usize) -> Lognormal {
        let (n0, n1) = (self.transact_items as f64, self.transact_large_items as f64);
        let slope = (self.transact_large - self.transact.0) / (n1 - n0);
        let p50 = self.transact.0 + slope * (items.max(1) as f64 - n0);
        Lognormal::from_p50_p99(self.transact.0, self.transact.1).with_median(p50)
    }

    /// The distribution of a request of `operation` (`X-Amz-Target`'s suffix) writing `items`
    /// items (`TransactWriteItems` only); `None`: not delayed (table administration, scans,
    /// batches: none is on a transaction's path).
    pub fn of(&self, operation: &str, items: usize) -> Option<Lognormal> {
        if operation == "TransactWriteItems" {
            Some(self.transact(items))
        } else if SINGLE.contains(&operation) {
            Some(self.single())
        } else {
            None
        }
    }

    /// The hop in milliseconds.
    pub fn hop_ms(&self) -> f64 {
        self.lambda_hop.as_secs_f64() * 1e3
    }

    /// The floor of an `n`-participant transaction: one round of its slowest write, the record's
    /// put beside `n` participant writes (each behind the hop), all from the single-item
    /// distribution; its q-quantile in ms.
    pub fn floor(&self, n: usize, q: f64) -> f64 {
        let single = self.single();
        let mut parts = vec![(single, 0.0)];
        parts.extend(std::iter::repeat_n((single, self.hop_ms()), n));
        quantile_of_slowest(&parts, q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_interpolate_the_median_and_keep_the_spread() {
        let m = LatencyModel::default();
        let five = m.transact(5);
        assert!((five.median() - 25.3).abs() < 1e-9);
        assert!((five.quantile(0.99) - 92.5).abs() < 1e-9);
        assert!((m.transact(25).median() - 32.1).abs() < 1e-9);
        // (32.1 - 25.3) / 20 = 0.34 ms per item
        assert!((m.transact(15).median() - 28.7).abs() < 1e-9);
        assert!((m.transact(2).median() - 24.28).abs() < 1e-9);
        assert!((m.transact(8).median() - 26.32).abs() < 1e-9);
        assert_eq!(m.transact(8).sigma, five.sigma);
    }

    #[test]
    fn operations_off_a_transaction_path_are_not_delayed() {
        let m = LatencyModel::default();
        for op in SINGLE {
            assert_eq!(m.of(op, 0), Some(m.single()), "{op}");
        }
        assert_eq!(m.of("TransactWriteItems", 8), Some(m.transact(8)));
        for op in ["CreateTable", "BatchWriteItem", "Scan", "DescribeTable"] {
            assert_eq!(m.of(op, 0), None, "{op}");
        }
    }

    #[test]
    fn the_floor_is_the_median_of_the_slowest_of_n_plus_one_writes() {
        let m = LatencyModel::default();
        let single = m.single();
        let three = single.quantile(0.5_f64.powf(1.0 / 3.0));
        assert!((m.floor(2, 0.5) - three).abs() < 1e-9);
        assert!(m.floor(8, 0.5) > m.floor(2, 0.5));
        // With a hop, the participants' writes are later; the record's put is not.
        let hopped = LatencyModel {
            lambda_hop: Duration::from_millis(20),
            ..LatencyModel::default()
        };
        let f = hopped.floor(2, 0.5);
        assert!(f > 20.0 + single.median() && f < 20.0 + three, "{f}");
    }
}
