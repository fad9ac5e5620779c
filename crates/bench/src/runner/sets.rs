//! The table sets of a run: one seeded set per (system, contention), created before anything
//! is measured, reused by every cell of that system, dropped at the end; and the audit that
//! reads a set back after each cell and lists what does not add up.

use std::time::Instant;

use twopc_core::ports::{Clock, SystemClock, TxLog};

use super::Bench;
use crate::config::BenchConfig;
use crate::systems::{Driver, System};
use crate::tables::{Audit, Tables};
use crate::workload::Contention;
use crate::{BenchError, Tally};

/// One seeded set of tables and what an audit of it must find. Each (system, contention) has
/// its own set, reused by that system's cells of every concurrency and participant count (as a
/// deployment would carry its state from one load to the next); the unit cost shares the native
/// uniform set.
pub(super) struct Set {
    tables: Tables,
    /// Balance sum the audit must find.
    expected_sum: i128,
    /// Committed item writes (`txVersion` sum) the audit must find.
    expected_writes: u64,
    /// Whether the exclusive workload wrote here: its writes leave an idle escrow stale (the
    /// protocol's reading; the next reservation resets it), so the audit accepts stale ones.
    exclusive: bool,
}

/// The set a system's cells of a workload run on: the unit cost on native's uniform set, the
/// exclusive workload on the hot set (the same keys, seeded once).
fn set_of(system: System, contention: Contention) -> (System, Contention) {
    match (system, contention) {
        (System::Unit, _) => (System::Native, Contention::Uniform),
        // The staged commit writes what the five-round path writes: one table set for both.
        (System::Staged | System::StagedApplied | System::Auto, c) => {
            set_of(System::Coordinator, c)
        }
        (other, Contention::Exclusive) => (other, Contention::Hot),
        (other, contention) => (other, contention),
    }
}

/// Every set the run's cells need: native's and the coordinator's uniform sets (the engine's
/// warm-up), each transfer system's for each workload and the bursts, and the injected
/// systems'.
fn needed_sets(config: &BenchConfig) -> Vec<(System, Contention)> {
    let mut needed = vec![
        (System::Native, Contention::Uniform),
        (System::Coordinator, Contention::Uniform),
    ];
    let regular = !config.only_injected;
    for w in config.workloads.iter().filter(|_| regular) {
        for s in config.transfer_systems() {
            needed.push((s, w.contention));
        }
    }
    if config.burst.is_some() && regular {
        for s in config.transfer_systems() {
            needed.push((s, Contention::Uniform));
        }
    }
    for w in config.injection.iter().flat_map(|i| &i.workloads) {
        for &s in System::INJECTED {
            if config.systems.contains(&s) {
                needed.push((s, w.contention));
            }
        }
    }
    needed
}

impl Bench<'_> {
    /// Creates and seeds every set the run needs, before anything is measured.
    pub(super) async fn seed_sets(&mut self) -> Result<(), BenchError> {
        let config = self.config;
        let seeding = Instant::now();
        for (s, c) in needed_sets(config) {
            self.ensure_set(s, c).await?;
        }
        (self.progress)(&format!(
            "{} table sets of {} accounts + {} wallets seeded in {:.1} s; engine warm-up ({:.1} s, unmeasured)",
            self.sets.len(),
            config.accounts,
            config.accounts,
            seeding.elapsed().as_secs_f64(),
            config.engine_warmup.as_secs_f64()
        ));
        Ok(())
    }

    /// Creates and seeds the set of `system` for `contention`, unless it exists.
    pub(crate) async fn ensure_set(
        &mut self,
        system: System,
        contention: Contention,
    ) -> Result<(), BenchError> {
        let key = set_of(system, contention);
        if self.sets.contains_key(&key) {
            return Ok(());
        }
        let prefix = format!(
            "bench-{}-{}-{}",
            self.run_id,
            key.0.name().to_lowercase(),
            key.1
        );
        let tables = Tables::create(&self.client, &prefix).await?;
        let set = Set {
            tables,
            expected_sum: 2
                * i128::from(self.config.accounts)
                * i128::from(self.config.initial_balance),
            expected_writes: 0,
            exclusive: false,
        };
        // Registered before seeding, so a failed seed still drops the tables.
        self.sets.insert(key, set);
        if let Some(set) = self.sets.get(&key) {
            set.tables
                .seed(
                    &self.client,
                    self.config.accounts,
                    self.config.initial_balance,
                )
                .await?;
        }
        Ok(())
    }

    /// Drops every set's tables.
    pub(super) async fn drop_sets(&mut self) {
        for (_, set) in self.sets.drain() {
            if let Err(e) = set.tables.drop_all(&self.client).await {
                (self.progress)(&format!(
                    "could not drop the tables of {}: {e}",
                    set.tables.accounts
                ));
            }
        }
    }

    /// The tables of `system`'s set for `contention`.
    pub(crate) fn tables(
        &self,
        system: System,
        contention: Contention,
    ) -> Result<&Tables, BenchError> {
        self.sets
            .get(&set_of(system, contention))
            .map(|set| &set.tables)
            .ok_or_else(|| BenchError::Check("table set missing".into()))
    }

    /// Records what committed transfers did to a set: its next audit must find it.
    pub(crate) fn expect(
        &mut self,
        system: System,
        contention: Contention,
        tally: &Tally,
    ) -> Result<(), BenchError> {
        let set = self
            .sets
            .get_mut(&set_of(system, contention))
            .ok_or_else(|| BenchError::Check("table set missing".into()))?;
        set.expected_sum += tally.net;
        set.expected_writes += tally.writes;
        set.exclusive |= contention == Contention::Exclusive;
        Ok(())
    }

    /// Reads the tables back and lists what does not add up, given what the set has seen
    /// committed so far.
    pub(crate) async fn audit(
        &mut self,
        driver: &Driver,
        contention: Contention,
        tally: &Tally,
    ) -> Result<(Audit, Vec<String>), BenchError> {
        let accounts = self.config.accounts;
        let set = self
            .sets
            .get(&set_of(driver.system(), contention))
            .ok_or_else(|| BenchError::Check("table set missing".into()))?;
        let audit = set.tables.audit(&self.client).await?;
        let mut problems = vec![];
        if audit.balance_sum != set.expected_sum {
            problems.push(format!(
                "balance sum {} (expected {})",
                audit.balance_sum, set.expected_sum
            ));
        }
        if audit.version_sum != set.expected_writes {
            problems.push(format!(
                "{} committed item writes found (expected {})",
                audit.version_sum, set.expected_writes
            ));
        }
        if audit.items != 2 * u64::from(accounts) {
            problems.push(format!("{} items (expected {})", audit.items, 2 * accounts));
        }
        if audit.locks > 0 || audit.placeholders > 0 {
            problems.push(format!(
                "{} locks and {} placeholders left",
                audit.locks, audit.placeholders
            ));
        }
        if audit.reservations > 0 || audit.escrows > 0 {
            problems.push(format!(
                "{} items with reservations and {} with an escrow not idle left",
                audit.reservations, audit.escrows
            ));
        }
        if audit.stale_escrows > 0 && !set.exclusive {
            problems.push(format!(
                "{} items with an idle escrow away from the value, and no exclusive write here",
                audit.stale_escrows
            ));
        }
        if tally.failed > 0 {
            problems.push(format!(
                "{} transfers failed: {}",
                tally.failed,
                tally.failures.join(" | ")
            ));
        }
        if driver.system().keeps_records() {
            let open = driver
                .log()
                .overdue(SystemClock.now_ms() + 3_600_000, 10)
                .await?;
            if !open.is_empty() {
                problems.push(format!("{}+ records not terminal", open.len()));
            }
        }
        Ok((audit, problems))
    }
}
