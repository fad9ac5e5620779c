//! What the bench asks for: transfers between accounts kept in two tables (`accounts` is debited,
//! `wallets` credited), so the sum of all balances is conserved by every system.
//!
//! An N-participant transfer debits N/2 distinct accounts and credits N/2 distinct wallets the
//! same amount each; every debit requires `balance >= amount`. Keys are drawn uniformly from all
//! accounts (low contention); in the hot workload a transfer draws all its keys, with probability
//! [`KeyGen::hot_fraction`], from [`KeyGen::hot`] consecutive accounts of each table (or as many
//! as it has legs of a kind, if more), and otherwise uniformly. The hot accounts are the first
//! ones, or, in the moving workload, a block that moves every [`KeyGen::hot_period_ms`] to
//! another place no mark set in advance could name.

use std::fmt;

use rand::Rng;
use serde_json::{Value, json};

/// How keys are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Contention {
    /// Uniform over every account.
    Uniform,
    /// Most keys from a few hot accounts.
    Hot,
    /// Most keys from a few hot accounts that change every few seconds.
    Moving,
}

impl fmt::Display for Contention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Contention::Uniform => "uniform",
            Contention::Hot => "hot",
            Contention::Moving => "moving",
        })
    }
}

/// A workload: key distribution and participants per transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Workload {
    /// Key distribution.
    pub contention: Contention,
    /// Items per transaction (even: half debits, half credits; 1 for the unit cost).
    pub participants: usize,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}P", self.contention, self.participants)
    }
}

/// One transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Accounts debited (indexes into the `accounts` table).
    pub debits: Vec<u32>,
    /// Wallets credited (indexes into the `wallets` table).
    pub credits: Vec<u32>,
    /// Moved per leg.
    pub amount: u64,
}

/// The key of account `i` (same in both tables).
pub fn account_id(i: u32) -> String {
    format!("acct-{i:05}")
}

/// Draws transfers.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyGen {
    /// Accounts per table.
    pub accounts: u32,
    /// Hot accounts per table (the first ones).
    pub hot: u32,
    /// Chance that a key of the hot workload is hot.
    pub hot_fraction: f64,
    /// How long (model time) the moving workload's hot accounts stay where they are.
    pub hot_period_ms: u64,
}

/// Hot blocks start at a multiple of this (so a block never straddles a partition's range).
const HOT_ALIGN: u32 = 16;

impl KeyGen {
    fn distinct(rng: &mut impl Rng, among: u32, n: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let k = rng.random_range(0..among);
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }

    /// The first hot account of the moving workload in period `epoch` (salted per run).
    pub fn hot_base(&self, epoch: u64) -> u32 {
        // splitmix64's finaliser: neighbouring periods land far apart.
        let mut z = epoch.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let blocks = (self.accounts / HOT_ALIGN).max(1);
        (z % u64::from(blocks)) as u32 * HOT_ALIGN
    }

    /// A transfer for `workload` in the moving workload's period `epoch`.
    pub fn transfer(&self, rng: &mut impl Rng, workload: Workload, epoch: u64) -> Transfer {
        let half = workload.participants / 2;
        let credits = workload.participants - half;
        let hot = workload.contention != Contention::Uniform && rng.random_bool(self.hot_fraction);
        let (base, among) = match (hot, workload.contention) {
            (false, _) => (0, self.accounts),
            (true, c) => (
                if c == Contention::Moving {
                    self.hot_base(epoch)
                } else {
                    0
                },
                self.hot.max(u32::try_from(credits).unwrap_or(u32::MAX)),
            ),
        };
        let keys = |rng: &mut _, n| -> Vec<u32> {
            Self::distinct(rng, among, n)
                .into_iter()
                .map(|k| base + k)
                .collect()
        };
        Transfer {
            debits: keys(rng, half),
            credits: keys(rng, credits),
            amount: rng.random_range(1..=100),
        }
    }
}

impl Transfer {
    /// Items written.
    pub fn participants(&self) -> usize {
        self.debits.len() + self.credits.len()
    }

    /// Net change of the sum of all balances (zero for a balanced transfer).
    pub fn net(&self) -> i128 {
        (self.credits.len() as i128 - self.debits.len() as i128) * i128::from(self.amount)
    }

    /// The coordinator's request (`POST /transactions` body) for this transfer.
    pub fn request(&self, timeout_ms: u64) -> Value {
        let a = self.amount;
        let debits = self.debits.iter().map(|k| {
            json!({"participant": "accounts", "key": {"id": account_id(*k)},
                   "op": {"add": {"balance": -(a as i64)}, "require": {"balance": {"gte": a}}}})
        });
        let credits = self.credits.iter().map(|k| {
            json!({"participant": "wallets", "key": {"id": account_id(*k)},
                   "op": {"add": {"balance": a}}})
        });
        let participants: Vec<Value> = debits.chain(credits).collect();
        json!({"participants": participants, "timeoutMs": timeout_ms})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    const GEN: KeyGen = KeyGen {
        accounts: 10_000,
        hot: 10,
        hot_fraction: 0.9,
        hot_period_ms: 1000,
    };

    #[test]
    fn transfers_balance_and_use_distinct_keys() {
        let mut rng = SmallRng::seed_from_u64(1);
        for n in [2, 8] {
            for c in [Contention::Uniform, Contention::Hot, Contention::Moving] {
                let t = GEN.transfer(
                    &mut rng,
                    Workload {
                        contention: c,
                        participants: n,
                    },
                    3,
                );
                assert_eq!(t.participants(), n);
                assert_eq!(t.net(), 0);
                let mut d = t.debits.clone();
                d.dedup();
                assert_eq!(d.len(), n / 2);
                assert_eq!(
                    t.request(5000)["participants"].as_array().map(Vec::len),
                    Some(n)
                );
            }
        }
    }

    #[test]
    fn ninety_percent_of_hot_transfers_touch_only_the_first_ten() {
        let mut rng = SmallRng::seed_from_u64(2);
        let w = Workload {
            contention: Contention::Hot,
            participants: 8,
        };
        let hot = (0..1000)
            .map(|_| GEN.transfer(&mut rng, w, 0))
            .filter(|t| t.debits.iter().chain(&t.credits).all(|k| *k < 10))
            .count();
        assert!((870..=930).contains(&hot), "{hot}");
    }

    #[test]
    fn the_moving_hot_block_changes_place_every_period_and_stays_aligned() {
        let mut rng = SmallRng::seed_from_u64(3);
        let w = Workload {
            contention: Contention::Moving,
            participants: 2,
        };
        let bases: Vec<u32> = (0..20).map(|e| GEN.hot_base(e)).collect();
        assert!(
            bases
                .iter()
                .all(|b| b % HOT_ALIGN == 0 && *b < GEN.accounts)
        );
        assert!(bases.windows(2).all(|p| p[0] != p[1]), "{bases:?}");
        // In a period, 90% of transfers stay inside that period's block of ten.
        let inside = (0..1000)
            .map(|_| GEN.transfer(&mut rng, w, 7))
            .filter(|t| {
                t.debits
                    .iter()
                    .chain(&t.credits)
                    .all(|k| (bases[7]..bases[7] + 10).contains(k))
            })
            .count();
        assert!((870..=930).contains(&inside), "{inside}");
    }
}
