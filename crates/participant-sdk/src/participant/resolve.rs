//! The resolution of states whose coordinator went silent: one state by its transaction's
//! record ([`SdkParticipant::resolve`], the core's lock rule), a pass over the overdue ones
//! ([`SdkParticipant::sweep`]), and that pass on a timer for a long-running service.

use std::time::Duration;

use tracing::{error, info, warn};
use twopc_core::ids::TxId;
use twopc_core::message::CompleteReply;
use twopc_core::ports::{Clock, Created, Swapped, TxLog};
use twopc_core::rules::{self, OwnerRecord, Resolution};
use twopc_core::status::{Decision, TxStatus};

use super::{Error, SdkParticipant};
use crate::hooks::Hooks;
use crate::state::Phase;
use crate::store::StateStore;

/// What resolving an overdue state did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resolved {
    /// Nothing to do yet: the coordinator may still decide (its deadline has not passed), or
    /// the state is finished.
    Left,
    /// Confirmed, as the record decided.
    Confirmed,
    /// Cancelled (or nothing held), as the record decided or after the record was aborted.
    Cancelled,
    /// The state contradicts the record (reported, nothing done).
    Violation,
}

impl<H: Hooks, S: StateStore, L: TxLog, C: Clock> SdkParticipant<H, S, L, C> {
    /// Resolves one state whose coordinator may have gone silent, by the transaction's record
    /// (the lock rule, [`rules::resolve`]): never decided here.
    pub async fn resolve(&self, tx: &TxId) -> Result<Resolved, Error> {
        let Some(state) = self.store.get(tx).await? else {
            return Ok(Resolved::Left);
        };
        let now = self.clock.now_ms();
        let decision = match state.phase {
            Phase::Confirming => Decision::Commit,
            Phase::Cancelling => Decision::Abort,
            Phase::Reserved | Phase::Reserving => {
                let deadline_passed = now >= state.deadline;
                let record = self.log.get(tx).await?;
                let owner = OwnerRecord::of(record.as_ref(), state.began);
                match rules::resolve(owner, deadline_passed) {
                    // A STAGING owner past its deadline is recovered as a whole (every
                    // participant inquired) by whoever recovers its record, never from here.
                    Resolution::OwnerLive | Resolution::Recover => return Ok(Resolved::Left),
                    Resolution::RollForward if state.phase == Phase::Reserved => Decision::Commit,
                    // Its record `COMMITTED`, or another transaction's under its id (its own
                    // ended and expired): every participant acknowledged before, so a state
                    // still holding contradicts it.
                    Resolution::RollForward | Resolution::DropStale => {
                        error!(tx_id = %tx, phase = ?state.phase, ?owner,
                            "the record's decision contradicts this participant's state");
                        return Ok(Resolved::Violation);
                    }
                    Resolution::AbortHere => Decision::Abort,
                    Resolution::RecordAborted => {
                        match self.log.create_aborted(tx, state.began, now).await? {
                            Created::New => Decision::Abort,
                            Created::Exists(r) => match OwnerRecord::of(Some(&r), state.began) {
                                OwnerRecord::Found(status) => match status.decision() {
                                    Some(d) => d,
                                    None => return Ok(Resolved::Left),
                                },
                                _ => return Ok(Resolved::Violation),
                            },
                        }
                    }
                    Resolution::DecideAbort => {
                        let Some(record) = record else {
                            return Ok(Resolved::Left);
                        };
                        match self
                            .log
                            .transition(&record, TxStatus::Aborting, None, now)
                            .await?
                        {
                            Swapped::Done(_) => Decision::Abort,
                            Swapped::Lost(r) => match r.and_then(|r| r.status.decision()) {
                                Some(d) => d,
                                None => return Ok(Resolved::Left),
                            },
                        }
                    }
                }
            }
            _ => return Ok(Resolved::Left),
        };
        match self.finish(tx, decision, None).await? {
            CompleteReply::Violation { .. } => Ok(Resolved::Violation),
            _ if decision == Decision::Commit => Ok(Resolved::Confirmed),
            _ => Ok(Resolved::Cancelled),
        }
    }

    /// One pass over the unfinished states past their deadline (at most `limit`): each is
    /// resolved by its record. A state still claimed by a live call is left to it.
    pub async fn sweep(&self, limit: usize) -> Result<Vec<(TxId, Resolved)>, Error> {
        let now = self.clock.now_ms();
        let mut out = vec![];
        for state in self.store.overdue(now, limit).await? {
            let resolved = match self.resolve(&state.tx_id).await {
                Err(Error::Busy { .. }) => Resolved::Left,
                other => other?,
            };
            out.push((state.tx_id, resolved));
        }
        Ok(out)
    }
}

/// Most states one pass of [`SdkParticipant::spawn_sweeper`] resolves.
pub const SWEEP_LIMIT: usize = 100;

impl<H, S, L, C> SdkParticipant<H, S, L, C>
where
    H: Hooks + Clone + 'static,
    S: StateStore + Clone + 'static,
    L: TxLog + Clone + 'static,
    C: Clock + Clone + 'static,
{
    /// Sweeps every `every` on a task of its own (up to [`SWEEP_LIMIT`] states a pass) while
    /// the process runs: what a long-running service needs beside its router. A failed pass is
    /// logged and the next one retries. A participant on Lambda schedules
    /// [`SdkParticipant::sweep`] instead (instances do not live on between invocations).
    ///
    /// ```no_run
    /// # async fn wire<H, S, L, C>(participant: twopc_participant_sdk::SdkParticipant<H, S, L, C>)
    /// # where H: twopc_participant_sdk::Hooks + Clone + 'static,
    /// #       S: twopc_participant_sdk::StateStore + Clone + 'static,
    /// #       L: twopc_participant_sdk::TxLog + Clone + 'static,
    /// #       C: twopc_participant_sdk::Clock + Clone + 'static {
    /// let sweeper = participant.spawn_sweeper(std::time::Duration::from_secs(5));
    /// // ... serve; on shutdown:
    /// sweeper.abort();
    /// # }
    /// ```
    pub fn spawn_sweeper(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let participant = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await; // the first tick is immediate: start one period in
            loop {
                ticks.tick().await;
                match participant.sweep(SWEEP_LIMIT).await {
                    Ok(done) if !done.is_empty() => info!(resolved = done.len(), "swept"),
                    Ok(_) => {}
                    Err(e) => warn!(error = %e, "sweep failed; the next one retries"),
                }
            }
        })
    }
}
