//! The sweeper: drives transactions stuck past their deadline to an end, and clears locks whose
//! owner is already over (orphans), with bounded work and concurrency per run.
//!
//! Every step it takes is the same compare-and-swap code the coordinator and the participants
//! use (`Coordinator::recover`, `Participant::resolve`), so it is safe beside live coordinators
//! and other sweepers. A transaction it cannot finish is counted, logged with its id, and backed
//! off on its record (`attempts`, `retryAfter`) so later runs retry it without spinning.

use futures::stream::{self, StreamExt};
use serde::Serialize;
use tracing::{debug, info, warn};

use crate::coordinator::Coordinator;
use crate::ids::TxId;
use crate::participant::{Participant, Resolved};
use crate::ports::{Clock, ParticipantStore, PortError, Transport, TxLog};
use crate::service::KeySchema;
use crate::status::TxStatus;

/// Bounds of one run.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// Most overdue transactions handled per run.
    pub max_transactions: usize,
    /// Most expired locks examined per participant table per run.
    pub max_locks_per_table: usize,
    /// How many transactions are driven at once.
    pub concurrency: usize,
    /// First retry delay after a failed attempt (doubles each time).
    pub backoff_base_ms: u64,
    /// Longest retry delay.
    pub backoff_max_ms: u64,
}

impl Default for SweepConfig {
    fn default() -> Self {
        SweepConfig {
            max_transactions: 200,
            max_locks_per_table: 200,
            concurrency: 8,
            backoff_base_ms: 2_000,
            backoff_max_ms: 300_000,
        }
    }
}

/// A participant table whose expired locks the sweeper examines directly.
#[derive(Clone, Debug)]
pub struct LockTable {
    /// Table name.
    pub table: String,
    /// Its key schema (to read keys off index entries).
    pub key: KeySchema,
}

/// What one run did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    /// Overdue non-terminal transactions found.
    pub found: usize,
    /// Driven to ABORTED.
    pub aborted: usize,
    /// Driven to COMMITTED (rolled forward).
    pub rolled_forward: usize,
    /// Could not be finished this run (retried later with backoff).
    pub failed: usize,
    /// The ids of those.
    pub failed_tx_ids: Vec<TxId>,
    /// Of those, `STAGING` records: recovery needs every participant's answer, so one that does
    /// not answer keeps the transaction, and the items it holds elsewhere, undecided (the
    /// `StagingUnfinished` metric and its alarm).
    pub staging_unfinished: usize,
    /// Expired locks found through the lock indexes.
    pub expired_locks: usize,
    /// Of those, settled here (owner aborted, rolled forward or stale lock dropped).
    pub locks_resolved: usize,
    /// Of those, left: owner still live, or resolution failed.
    pub locks_left: usize,
    /// How long the oldest transaction still pending after this run has been past its
    /// deadline, in ms: 0 when none is overdue, `None` when it could not be read. Backing-off
    /// records count: this is the age of what is stuck.
    pub oldest_overdue_ms: Option<u64>,
}

/// Recovery over a coordinator (for records) and the participant logic (for orphan locks).
pub struct Sweeper<L, T, C, S> {
    coordinator: Coordinator<L, T, C>,
    participant: Participant<S, L, C>,
    lock_tables: Vec<LockTable>,
    clock: C,
    config: SweepConfig,
}

enum Driven {
    Aborted,
    RolledForward,
    Unfinished,
}

impl<L: TxLog, T: Transport, C: Clock + Clone, S: ParticipantStore> Sweeper<L, T, C, S> {
    /// Wires a sweeper.
    pub fn new(
        coordinator: Coordinator<L, T, C>,
        participant: Participant<S, L, C>,
        clock: C,
        lock_tables: Vec<LockTable>,
        config: SweepConfig,
    ) -> Self {
        Sweeper {
            coordinator,
            participant,
            lock_tables,
            clock,
            config,
        }
    }

    /// The coordinator it recovers records with (the completer's too).
    pub fn coordinator(&self) -> &Coordinator<L, T, C> {
        &self.coordinator
    }

    /// One pass: overdue records first, then orphan locks.
    pub async fn run(&self) -> Result<SweepReport, PortError> {
        let mut report = SweepReport::default();
        self.recover_overdue(&mut report).await?;
        for lt in &self.lock_tables {
            self.settle_expired_locks(lt, &mut report).await?;
        }
        report.oldest_overdue_ms = match self.coordinator.log().oldest_pending_deadline().await {
            Ok(deadline) => Some(deadline.map_or(0, |d| self.clock.now_ms().saturating_sub(d))),
            Err(e) => {
                warn!(error = %e, "could not read the oldest pending transaction");
                None
            }
        };
        if report.found > 0 || report.expired_locks > 0 {
            info!(
                found = report.found,
                aborted = report.aborted,
                rolled_forward = report.rolled_forward,
                failed = report.failed,
                expired_locks = report.expired_locks,
                locks_resolved = report.locks_resolved,
                "sweep done"
            );
        } else {
            debug!("sweep done: nothing overdue");
        }
        Ok(report)
    }

    /// Drives every overdue record (up to the bound) by `Coordinator::recover`, a few at once;
    /// one left unfinished is backed off ([`Self::back_off`]).
    async fn recover_overdue(&self, report: &mut SweepReport) -> Result<(), PortError> {
        let now = self.clock.now_ms();
        let overdue = self
            .coordinator
            .log()
            .overdue(now, self.config.max_transactions)
            .await?;
        report.found = overdue.len();
        let results: Vec<(TxId, u32, bool, Result<Driven, PortError>)> = stream::iter(overdue)
            .map(|record| async move {
                let (id, attempts) = (record.tx_id.clone(), record.attempts);
                let staging = record.status == TxStatus::Staging;
                let result = self
                    .coordinator
                    .recover(record)
                    .await
                    .map(|r| match r.status {
                        TxStatus::Aborted => Driven::Aborted,
                        TxStatus::Committed => Driven::RolledForward,
                        _ => Driven::Unfinished,
                    });
                (id, attempts, staging, result)
            })
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        for (id, attempts, staging, result) in results {
            match result {
                Ok(Driven::Aborted) => report.aborted += 1,
                Ok(Driven::RolledForward) => report.rolled_forward += 1,
                Ok(Driven::Unfinished) | Err(_) => {
                    if let Err(e) = &result {
                        warn!(tx_id = %id, error = %e, "sweeper could not drive the transaction");
                    }
                    self.back_off(&id, attempts).await;
                    if staging {
                        warn!(tx_id = %id, "STAGING past its deadline, not ended: a participant did not answer its inquiry; its other items stay held until it does");
                        report.staging_unfinished += 1;
                    }
                    report.failed += 1;
                    report.failed_tx_ids.push(id);
                }
            }
        }
        Ok(())
    }

    /// Notes a failed attempt on the record, so that later runs retry it after a delay that
    /// doubles with each attempt (`attempts`, `retryAfter`) instead of spinning on it.
    async fn back_off(&self, id: &TxId, attempts: u32) {
        let delay = self
            .config
            .backoff_base_ms
            .saturating_mul(1u64 << attempts.min(20))
            .min(self.config.backoff_max_ms);
        let now = self.clock.now_ms();
        warn!(tx_id = %id, attempts = attempts + 1, retry_in_ms = delay, "transaction left unfinished; retrying later");
        if let Err(e) = self
            .coordinator
            .log()
            .note_failed_attempt(id, now + delay, now)
            .await
        {
            warn!(tx_id = %id, error = %e, "could not record the failed attempt");
        }
    }

    /// Settles the expired locks of one table found through its lock index, by the lock rule
    /// (`Participant::resolve`), a few at once.
    async fn settle_expired_locks(
        &self,
        lt: &LockTable,
        report: &mut SweepReport,
    ) -> Result<(), PortError> {
        let now = self.clock.now_ms();
        let locks = self
            .participant
            .store()
            .expired_locks(&lt.table, &lt.key, now, self.config.max_locks_per_table)
            .await?;
        report.expired_locks += locks.len();
        let settled: Vec<bool> = stream::iter(locks)
            .map(|(key, lock)| async move {
                match self.participant.resolve(&lt.table, &key, &lock).await {
                    Ok(Resolved::OwnerLive | Resolved::NeedsRecovery) => false,
                    Ok(_) => true,
                    Err(e) => {
                        warn!(tx_id = %lock.tx_id, table = %lt.table, error = %e, "could not resolve an expired lock");
                        false
                    }
                }
            })
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        report.locks_resolved += settled.iter().filter(|s| **s).count();
        report.locks_left += settled.iter().filter(|s| !**s).count();
        Ok(())
    }
}
