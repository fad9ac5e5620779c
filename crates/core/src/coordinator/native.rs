//! Committing a transaction as one native `TransactWriteItems`, when [`rules::native`] admits
//! it: the record put `COMMITTED` with every item's write, or nothing.

use std::ops::ControlFlow;

use tracing::{debug, warn};

use crate::codes;
use crate::item::Lock;
use crate::op::Mode;
use crate::participant::{Refusal, classify_native_refusal};
use crate::ports::{
    Clock, Created, NativeItem, NativeOutcome, NativeStore, NativeWrite, PortError, Transport,
    TxLog,
};
use crate::record::{Target, TxRecord, Vote};
use crate::request::RequestError;
use crate::rules::{self};
use crate::service::ServiceKind;
use crate::status::TxStatus;

use super::{CommitMode, Coordinator, SubmitError, Submitted, unavailable};

impl<L: TxLog, T: Transport, C: Clock> Coordinator<L, T, C> {
    /// The native store, if `record` is to be committed natively: [`CommitMode::Auto`], a
    /// store, and [`rules::native`] admits its participants.
    pub(super) fn natively(&self, record: &TxRecord) -> Option<&dyn NativeStore> {
        let native = self.native.as_deref()?;
        if self.config.mode != CommitMode::Auto {
            return None;
        }
        let facts = record.participants.iter().map(|p| {
            let service = self.config.services.get(&p.participant);
            rules::NativeFacts {
                table: service.is_some_and(|s| s.kind == ServiceKind::Table),
                direct: matches!(p.target, Target::Direct { .. }),
                hot: service.is_some_and(|s| s.hot),
                deletes: p.op.delete,
            }
        });
        // The record carries every operation, and the writes each one again: twice the
        // record's size bounds the request.
        let bytes = serde_json::to_vec(record).map_or(usize::MAX, |b| b.len().saturating_mul(2));
        match rules::native(facts, bytes) {
            Ok(()) => Some(native),
            Err(why) => {
                debug!(tx_id = %record.tx_id, why = why.as_str(), "not native");
                None
            }
        }
    }

    /// Commits `record`'s transaction as one native write (`docs/protocol.md`, "Native
    /// transactions"): the record put `COMMITTED` with every item's write, or nothing. A
    /// cancelled one is answered from what cancelled it: a record already there is a replay; an
    /// item's own refusal aborts the transaction (the record is put `ABORTED` with the votes a
    /// prepare would have had); where the protocol holds an item, or another request was
    /// writing one, `None`: the transaction takes the protocol path.
    pub(super) async fn commit_natively(
        &self,
        native: &dyn NativeStore,
        record: &TxRecord,
        keyed: bool,
    ) -> Result<Option<Submitted>, SubmitError> {
        let Some(writes) = native_writes(record) else {
            return Ok(None); // `natively` admitted only direct tables
        };
        let committed = TxRecord {
            status: TxStatus::Committed,
            votes: writes.iter().map(|_| Vote::yes(Mode::Exclusive)).collect(),
            ..record.clone()
        };
        let items = match self.write_natively(native, &committed, &writes).await? {
            ControlFlow::Break(answer) => return Ok(Some(answer)),
            ControlFlow::Continue(NativeOutcome::Committed) => {
                return Ok(Some(Submitted::of(committed)));
            }
            ControlFlow::Continue(NativeOutcome::Cancelled {
                record: Some(existing),
                ..
            }) => return Ok(Some(self.found(existing, record, keyed).await?)),
            ControlFlow::Continue(NativeOutcome::Cancelled { items, .. }) => items,
        };
        let now = self.clock.now_ms();
        let Some(votes) = self.native_votes(record, &items, &writes, now) else {
            return Ok(None);
        };
        if votes.iter().all(Vote::is_yes) {
            // Cancelled, yet nothing refused: a write DynamoDB itself refused. The protocol
            // path reports it properly.
            return Ok(None);
        }
        let aborted = TxRecord {
            status: TxStatus::Aborted,
            votes,
            updated_at: now,
            ..record.clone()
        };
        match self
            .log
            .create(&aborted)
            .await
            .map_err(unavailable(&record.tx_id))?
        {
            Created::New => Ok(Some(Submitted::of(aborted))),
            Created::Exists(existing) => Ok(Some(self.found(existing, record, keyed).await?)),
        }
    }

    /// The one native write, its outcome. Undetermined, the record says what happened (all or
    /// nothing, and retried with the same token): the answer, breaking. Invalid to DynamoDB
    /// (a sum past its range, an item past 400 KB): nothing was written, and sending it again
    /// cannot help; a 4xx saying so, never "retry".
    async fn write_natively(
        &self,
        native: &dyn NativeStore,
        committed: &TxRecord,
        writes: &[NativeWrite<'_>],
    ) -> Result<ControlFlow<Submitted, NativeOutcome>, SubmitError> {
        let unavailable = unavailable(&committed.tx_id);
        match native.commit_at_once(committed, writes).await {
            Ok(outcome) => Ok(ControlFlow::Continue(outcome)),
            Err(e @ PortError::Undetermined { .. }) => {
                warn!(tx_id = %committed.tx_id, error = %e, "native commit undetermined: reading the record");
                match self.log.get(&committed.tx_id).await.map_err(&unavailable)? {
                    Some(found) => Ok(ControlFlow::Break(Submitted::of(found))),
                    None => Err(unavailable(e)),
                }
            }
            Err(PortError::Invalid { message, .. }) => {
                warn!(tx_id = %committed.tx_id, message, "native commit refused as invalid");
                Err(SubmitError::Request(RequestError::new(
                    codes::INVALID_FOR_STORE,
                    format!(
                        "DynamoDB refused the transaction as invalid, and nothing was written ({message}): change the request"
                    ),
                )))
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The vote each item's prepare would have had, from what cancelled the native write there
    /// (a write that would have applied: yes). `None` where the protocol holds an item or
    /// another request was writing one: the transaction takes the protocol path.
    fn native_votes(
        &self,
        record: &TxRecord,
        items: &[NativeItem],
        writes: &[NativeWrite<'_>],
        now: u64,
    ) -> Option<Vec<Vote>> {
        let mut votes = Vec::with_capacity(items.len());
        for (found, w) in items.iter().zip(writes) {
            let lock = Lock {
                tx_id: record.tx_id.clone(),
                expires_at: record.deadline,
                began: record.created_at,
                op: w.op.clone(),
                coordinator: self.config.id.clone(),
            };
            votes.push(match found {
                NativeItem::Held => Vote::yes(Mode::Exclusive),
                NativeItem::Busy => return None,
                NativeItem::Refused(item) => {
                    match classify_native_refusal(item.as_deref(), &lock, now) {
                        Refusal::Vote(reason, message) => Vote::no(reason, message),
                        Refusal::Held { .. } | Refusal::Stale(_) => return None,
                    }
                }
            });
        }
        Some(votes)
    }

    /// The answer from a record found already there: a replay for a request with an
    /// idempotency key; without one (a fresh id), what the record says.
    async fn found(
        &self,
        existing: Box<TxRecord>,
        record: &TxRecord,
        keyed: bool,
    ) -> Result<Submitted, SubmitError> {
        if keyed {
            Ok(Submitted::of(
                self.replay(existing, &record.request_hash).await?,
            ))
        } else {
            Ok(Submitted::of(*existing))
        }
    }
}

/// Each participant's native write, if every one is a direct table's.
fn native_writes(record: &TxRecord) -> Option<Vec<NativeWrite<'_>>> {
    record
        .participants
        .iter()
        .map(|p| match &p.target {
            Target::Direct { table } => Some(NativeWrite {
                table,
                key: &p.key,
                op: &p.op,
            }),
            _ => None,
        })
        .collect()
}
