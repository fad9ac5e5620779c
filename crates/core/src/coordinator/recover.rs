//! Reading a record, and driving one to its end from the record alone: [`Coordinator::recover`]
//! (replays and the sweeper), [`Coordinator::recover_asked`] (the completer),
//! [`Coordinator::recover_staged`] (a `STAGING` record, from what its participants say) and
//! [`Coordinator::status_helping`].

use futures::future::join_all;
use tracing::{info, warn};

use crate::ids::TxId;
use crate::message::InquireRequest;
use crate::ports::{Clock, PortError, Swapped, Transport, TxLog};
use crate::record::{ParticipantEntry, TxRecord, Vote};
use crate::rules::{self, Recovery, StagedDecision};
use crate::status::{Decision, TxStatus};

use super::{Coordinator, missing};

impl<L: TxLog, T: Transport, C: Clock> Coordinator<L, T, C> {
    /// Reads a record.
    pub async fn status(&self, tx: &TxId) -> Result<Option<TxRecord>, PortError> {
        self.log.get(tx).await
    }

    /// How long a `STAGING` record is left to its stager before a status read helps it.
    pub(crate) const HELP_AFTER_MS: u64 = 1_000;

    /// Reads a record, helping a `STAGING` one its stager seems to have left (older than
    /// [`Self::HELP_AFTER_MS`]): before its deadline, read-only inquiries and, if every
    /// participant holds it, the commit made explicit and finished; past it, its recovery. So a
    /// client that was answered "committed" does not keep reading `STAGING`.
    pub async fn status_helping(&self, tx: &TxId) -> Result<Option<TxRecord>, PortError> {
        let Some(record) = self.log.get(tx).await? else {
            return Ok(None);
        };
        let now = self.clock.now_ms();
        if record.status != TxStatus::Staging
            || now < record.created_at.saturating_add(Self::HELP_AFTER_MS)
        {
            return Ok(Some(record));
        }
        let helped = if now <= record.deadline {
            self.recover_staged(record, false).await?
        } else {
            self.recover(record).await?
        };
        Ok(Some(helped))
    }

    /// Drives a record toward its end from the record alone: an undecided one past its
    /// deadline is aborted; a decided one is completed and finalized. A live undecided one is
    /// left alone.
    pub async fn recover(&self, record: TxRecord) -> Result<TxRecord, PortError> {
        let past = self.clock.now_ms() > record.deadline;
        self.recover_judged(record, past).await
    }

    /// Recovers a record a participant asked for (`recoveryAsked`, the completer): as past its
    /// deadline whatever this clock says. The participant judged it past on its own clock, and
    /// a `STAGING` record's recovery only prevents and decides by what every participant says,
    /// which is safe at any time; a completer whose clock lags must not drop the ask and leave
    /// the holds to the sweeper's schedule.
    pub async fn recover_asked(&self, record: TxRecord) -> Result<TxRecord, PortError> {
        self.recover_judged(record, true).await
    }

    /// [`Self::recover`], the deadline judged `deadline_passed`.
    async fn recover_judged(
        &self,
        record: TxRecord,
        deadline_passed: bool,
    ) -> Result<TxRecord, PortError> {
        let now = self.clock.now_ms();
        match rules::recovery(record.status, deadline_passed) {
            Recovery::Leave | Recovery::Ended => Ok(record),
            Recovery::Complete(_) => self.complete(record, &[]).await,
            Recovery::Inquire => self.recover_staged(record, true).await,
            Recovery::DecideAbort => {
                let decided = match self
                    .log
                    .transition(&record, TxStatus::Aborting, None, now)
                    .await?
                {
                    // Lost: someone decided first; completing follows whatever they decided.
                    Swapped::Done(r) | Swapped::Lost(Some(r)) => *r,
                    Swapped::Lost(None) => return Err(missing(&record.tx_id)),
                };
                self.complete(decided, &[]).await
            }
        }
    }

    /// Ends a `STAGING` record from what its participants say (`rules::staged_decision`): a
    /// recoverer (`prevent`, past the deadline) prevents the transaction wherever it holds
    /// nothing, then commits if every participant holds it and aborts if any is prevented; a
    /// helper (a replay, before the deadline) only reads, and only ever commits. Either makes
    /// its decision by compare-and-swap, then completes. Left as it is when undecidable yet (a
    /// participant unreachable, or open).
    pub(crate) async fn recover_staged(
        &self,
        record: TxRecord,
        prevent: bool,
    ) -> Result<TxRecord, PortError> {
        let calls = record.participants.iter().map(|p| {
            let req = inquiry(&record, p, prevent);
            let record = &record;
            async move {
                match self.transport.inquire(&p.target, &req).await {
                    Ok(reply) => Some(reply.inquiry),
                    Err(e) => {
                        warn!(tx_id = %record.tx_id, participant = %p.participant, error = %e, "inquiry not answered");
                        None
                    }
                }
            }
        });
        let answers = join_all(calls).await;
        let decision = match rules::staged_decision(answers.iter().copied()) {
            StagedDecision::Commit => Decision::Commit,
            StagedDecision::Abort if prevent => Decision::Abort,
            StagedDecision::Abort | StagedDecision::Wait => {
                info!(tx_id = %record.tx_id, ?answers, "staged transaction not decidable yet");
                return Ok(record);
            }
        };
        info!(tx_id = %record.tx_id, ?decision, prevent, "recovering a STAGING record");
        let votes: Vec<Vote> = match decision {
            Decision::Commit => record
                .participants
                .iter()
                .map(|p| Vote::yes(p.op.mode()))
                .collect(),
            Decision::Abort => vec![],
        };
        let votes = (!votes.is_empty()).then_some(votes.as_slice());
        let now = self.clock.now_ms();
        let decided = match self
            .log
            .transition(&record, TxStatus::deciding(decision), votes, now)
            .await?
        {
            // Lost: someone decided first; completing follows whatever they decided.
            Swapped::Done(r) | Swapped::Lost(Some(r)) => *r,
            Swapped::Lost(None) => return Err(missing(&record.tx_id)),
        };
        self.complete(decided, &[]).await
    }
}

/// The inquiry recovery (and the operator's story of a transaction) sends about `p`: the
/// transaction, its part (its operation or payload, which a participant compares with what it
/// holds), and whether to prevent.
pub(crate) fn inquiry(record: &TxRecord, p: &ParticipantEntry, prevent: bool) -> InquireRequest {
    InquireRequest {
        tx_id: record.tx_id.clone(),
        deadline: record.deadline,
        began: record.created_at,
        key: p.key.clone(),
        op: (!p.op.is_empty()).then(|| p.op.clone()),
        payload: p.payload.clone(),
        prevent,
    }
}
