//! What an operator asks for one transaction ([`Coordinator::operate`]): the sweeper's recovery
//! ([`Coordinator::recover`]) run now, where [`operator::verdict`] lets it; and what each
//! participant holds for it ([`Coordinator::holds`]); [`Coordinator::act`] runs an action and
//! notes it on the record with who asked (the audit trail the stream turns into a lake row).

use futures::future::join_all;

use crate::codes::Code;
use crate::ids::TxId;
use crate::operator::{self, ActionNote, Hold, OperatorAction, Verdict};
use crate::ports::{Clock, OperatorLog, ParticipantStore, PortError, Transport, TxLog};
use crate::record::{ParticipantEntry, Target, TxRecord};
use crate::status::TxStatus;

use super::Coordinator;

/// What an operator's action did.
#[derive(Debug)]
pub enum Acted {
    /// No such transaction.
    NotFound,
    /// Refused by [`operator::verdict`]: nothing was written.
    Refused {
        /// Why.
        code: Code,
        /// The record as it is.
        record: Box<TxRecord>,
    },
    /// The recovery ran.
    Ran {
        /// The status it found.
        before: TxStatus,
        /// The record as the recovery left it (not ended if a participant did not answer).
        record: Box<TxRecord>,
    },
}

impl<L: TxLog, T: Transport, C: Clock> Coordinator<L, T, C> {
    /// Runs `action` on `tx` now: reads its record and, where [`operator::verdict`] lets it,
    /// recovers it as the sweeper does, whatever its backoff says.
    pub async fn operate(&self, tx: &TxId, action: OperatorAction) -> Result<Acted, PortError> {
        let Some(record) = self.log.get(tx).await? else {
            return Ok(Acted::NotFound);
        };
        let past = self.clock.now_ms() > record.deadline;
        match operator::verdict(action, record.status, past) {
            Verdict::Refuse(code) => Ok(Acted::Refused {
                code,
                record: Box::new(record),
            }),
            Verdict::Run => {
                let before = record.status;
                let record = Box::pin(self.recover(record)).await?;
                Ok(Acted::Ran {
                    before,
                    record: Box::new(record),
                })
            }
        }
    }

    /// What each participant holds for `record`'s transaction now, in participant order: an item
    /// of a table read here (`direct`) is read from `store`; a participant behind its own
    /// function or URL is asked a read-only inquiry while the transaction is unfinished (it
    /// writes nothing: [`crate::rules::inquire`] without `prevent`).
    pub async fn holds<S: ParticipantStore>(&self, record: &TxRecord, store: &S) -> Vec<Hold> {
        let reads = record
            .participants
            .iter()
            .map(|p| self.hold_of(record, p, store));
        join_all(reads).await
    }

    async fn hold_of<S: ParticipantStore>(
        &self,
        record: &TxRecord,
        p: &ParticipantEntry,
        store: &S,
    ) -> Hold {
        let unknown = |why: String| Hold::Unknown { why };
        match &p.target {
            Target::Direct { table } => match store.read(table, &p.key).await {
                Ok(state) => operator::hold(state.as_ref(), &record.tx_id, record.created_at),
                Err(e) => unknown(format!("the item could not be read: {e}")),
            },
            _ if record.status.is_terminal() => {
                unknown("the transaction ended; its participant keeps its own state".into())
            }
            target => {
                let req = super::recover::inquiry(record, p, false);
                match self.transport.inquire(target, &req).await {
                    Ok(reply) => Hold::Inquired {
                        inquiry: reply.inquiry,
                    },
                    Err(e) => unknown(format!("its participant did not answer: {e}")),
                }
            }
        }
    }
}

impl<L: TxLog + OperatorLog, T: Transport, C: Clock> Coordinator<L, T, C> {
    /// [`Coordinator::operate`], then the note of it on the record (`operatorActions`): who
    /// asked (`by`), when, and `done` or the refusal's code. A recovery that fails part-way is
    /// noted `unavailable` (best effort: the store may be what failed) and its error returned.
    pub async fn act(
        &self,
        tx: &TxId,
        action: OperatorAction,
        by: &str,
    ) -> Result<(Acted, Option<ActionNote>), PortError> {
        let acted = match self.operate(tx, action).await {
            Ok(acted) => acted,
            Err(e) => {
                if let Ok(Some(r)) = self.log.get(tx).await {
                    let note = self.note(action, by, crate::codes::UNAVAILABLE.name, r.status);
                    let _ = self.log.note_action(tx, &note).await;
                }
                return Err(e);
            }
        };
        let note = match &acted {
            Acted::NotFound => return Ok((acted, None)),
            Acted::Refused { code, record } => self.note(action, by, code.name, record.status),
            Acted::Ran { record, .. } => self.note(action, by, operator::DONE, record.status),
        };
        self.log.note_action(tx, &note).await?;
        Ok((acted, Some(note)))
    }

    fn note(&self, action: OperatorAction, by: &str, result: &str, status: TxStatus) -> ActionNote {
        ActionNote {
            action,
            by: by.to_owned(),
            at: self.clock.now_ms(),
            result: result.to_owned(),
            status,
        }
    }
}
