//! Committing a transaction as one native `TransactWriteItems`, when [`rules::native`] admits
//! it: the record put `COMMITTED` with every item's write, or nothing.

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
use crate::service::ServiceKind;
use crate::rules::{self};
use crate::status::TxStatus;

use super::{CommitMode, Coordinator, SubmitError, Submitted};

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
        let unavailable = |source| SubmitError::Unavailable {
            tx_id: Some(record.tx_id.clone()),
            source,
        };
        let mut writes = Vec::with_capacity(record.participants.len());
        for p in &record.participants {
            let Target::Direct { table } = &p.target else {
                return Ok(None); // `natively` admitted only direct tables
            };
            writes.push(NativeWrite {
                table,
                key: &p.key,
                op: &p.op,
            });
        }
        let yes = || Vote::yes(Mode::Exclusive);
        let committed = TxRecord {
            status: TxStatus::Committed,
            votes: writes.iter().map(|_| yes()).collect(),
            ..record.clone()
        };
        let outcome = match native.commit_at_once(&committed, &writes).await {
            Ok(outcome) => outcome,
            Err(e @ PortError::Undetermined { .. }) => {
                // All or nothing, and retried with the same token: the record says which.
                warn!(tx_id = %record.tx_id, error = %e, "native commit undetermined: reading the record");
                return match self.log.get(&record.tx_id).await.map_err(unavailable)? {
                    Some(found) => Ok(Some(Submitted::of(found))),
                    None => Err(unavailable(e)),
                };
            }
            // DynamoDB called the request invalid (a sum past its range, an item past 400 KB):
            // nothing was written, and sending it again cannot help. A 4xx saying so, never
            // "retry".
            Err(PortError::Invalid { message, .. }) => {
                warn!(tx_id = %record.tx_id, message, "native commit refused as invalid");
                return Err(SubmitError::Request(RequestError::new(
                    codes::INVALID_FOR_STORE,
                    format!(
                        "DynamoDB refused the transaction as invalid, and nothing was written ({message}): change the request"
                    ),
                )));
            }
            Err(e) => return Err(unavailable(e)),
        };
        let items = match outcome {
            NativeOutcome::Committed => return Ok(Some(Submitted::of(committed))),
            NativeOutcome::Cancelled {
                record: Some(existing),
                ..
            } => {
                return if keyed {
                    Ok(Some(Submitted::of(
                        self.replay(existing, &record.request_hash).await?,
                    )))
                } else {
                    Ok(Some(Submitted::of(*existing)))
                };
            }
            NativeOutcome::Cancelled { items, .. } => items,
        };
        let now = self.clock.now_ms();
        let mut votes = Vec::with_capacity(items.len());
        for (found, w) in items.iter().zip(&writes) {
            let lock = Lock {
                tx_id: record.tx_id.clone(),
                expires_at: record.deadline,
                began: record.created_at,
                op: w.op.clone(),
                coordinator: self.config.id.clone(),
            };
            votes.push(match found {
                NativeItem::Held => yes(),
                NativeItem::Busy => return Ok(None),
                NativeItem::Refused(item) => {
                    match classify_native_refusal(item.as_deref(), &lock, now) {
                        Refusal::Vote(reason, message) => Vote::no(reason, message),
                        Refusal::Held { .. } | Refusal::Stale(_) => return Ok(None),
                    }
                }
            });
        }
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
        match self.log.create(&aborted).await.map_err(unavailable)? {
            Created::New => Ok(Some(Submitted::of(aborted))),
            Created::Exists(existing) if keyed => Ok(Some(Submitted::of(
                self.replay(existing, &record.request_hash).await?,
            ))),
            Created::Exists(existing) => Ok(Some(Submitted::of(*existing))),
        }
    }
}
