//! Committing a transaction as one native `TransactWriteItems`, when [`rules::route`] sends
//! it there: the record put `COMMITTED` with every item's write, or nothing; what a cancelled
//! one teaches of the items' heat.

use std::ops::ControlFlow;

use tracing::warn;

use crate::item::Lock;
use crate::op::Mode;
use crate::participant::{Refusal, classify_native_refusal};
use crate::ports::{
    Clock, Created, NativeItem, NativeOutcome, NativeStore, NativeWrite, PortError, Transport,
    TxLog,
};
use crate::record::{Target, TxRecord, Vote};
use crate::rules::{self, NativeFinding, Seen};
use crate::status::TxStatus;

use super::{Coordinator, SubmitError, Submitted, unavailable};

/// How a native attempt ended: answered, or given way to the protocol.
pub(super) enum NativeAnswer {
    /// Committed, aborted by an item's own refusal, or a replay's record found.
    Answered(Box<Submitted>),
    /// The protocol holds an item, another request was writing one, or one is marked hot: the
    /// transaction takes the protocol path, each item's prepare writing the heat mark that
    /// `marks` holds for it (the contention this attempt saw).
    GaveWay {
        /// Per participant, the heat mark its prepare writes.
        marks: Vec<Option<u64>>,
    },
}

impl<L: TxLog, T: Transport, C: Clock> Coordinator<L, T, C> {
    /// Commits `record`'s transaction as one native write (`docs/protocol.md`, "Native
    /// transactions"): the record put `COMMITTED` with every item's write, or nothing. A
    /// cancelled one is answered from what cancelled it: a record already there is a replay; an
    /// item's own refusal aborts the transaction (the record is put `ABORTED` with the votes a
    /// prepare would have had); where the protocol holds an item, another request was writing
    /// one, or one is marked hot, it gives way to the protocol, having learned which items are
    /// contended ([`rules::heat`]).
    pub(super) async fn commit_natively(
        &self,
        native: &dyn NativeStore,
        record: &TxRecord,
        keyed: bool,
    ) -> Result<NativeAnswer, SubmitError> {
        let answered = |s| Ok(NativeAnswer::Answered(Box::new(s)));
        let Some(writes) = native_writes(record) else {
            // `rules::native` admits only direct tables.
            return Ok(NativeAnswer::GaveWay { marks: vec![] });
        };
        let committed = TxRecord {
            status: TxStatus::Committed,
            votes: writes.iter().map(|_| Vote::yes(Mode::Exclusive)).collect(),
            decided_at: Some(record.created_at),
            ..record.clone()
        };
        let items = match self.write_natively(native, &committed, &writes).await? {
            ControlFlow::Break(answer) => return answered(answer),
            ControlFlow::Continue(NativeOutcome::Committed) => {
                return answered(Submitted::of(committed));
            }
            ControlFlow::Continue(NativeOutcome::Cancelled {
                record: Some(existing),
                ..
            }) => return answered(self.found(existing, record, keyed).await?),
            ControlFlow::Continue(NativeOutcome::Cancelled { items, .. }) => items,
        };
        let votes = match self.native_votes(record, &items, &writes) {
            Ok(votes) => votes,
            Err(marks) => return Ok(NativeAnswer::GaveWay { marks }),
        };
        if votes.iter().all(Vote::is_yes) {
            // Cancelled, yet nothing refused: a write DynamoDB itself refused. The protocol
            // path reports it properly.
            return Ok(NativeAnswer::GaveWay { marks: vec![] });
        }
        let now = self.clock.now_ms();
        let aborted = TxRecord {
            status: TxStatus::Aborted,
            votes,
            updated_at: now,
            decided_at: Some(now),
            ..record.clone()
        };
        match self
            .log
            .create(&aborted)
            .await
            .map_err(unavailable(&record.tx_id))?
        {
            Created::New => answered(Submitted::of(aborted)),
            Created::Exists(existing) => answered(self.found(existing, record, keyed).await?),
        }
    }

    /// The one native write, its outcome. Undetermined, the record says what happened (all or
    /// nothing, and retried with the same token): the answer, breaking. Not done (throttled):
    /// cancelled with nothing refused, so the protocol's path takes it. Invalid to DynamoDB
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
                Err(super::invalid_for_store(&message))
            }
            // Not done (DynamoDB cancelled it for throttling, which its SDK does not resend):
            // nothing was written, record included, so the protocol's path takes the
            // transaction, its single writes retried by the SDK, rather than the client hearing
            // "unavailable" for a transfer nothing stood in the way of. Throttling is the
            // partition's rate, not contention: nothing about heat is learned.
            Err(e @ PortError::Retryable { .. }) => {
                warn!(tx_id = %committed.tx_id, error = %e, "native commit not done: taking the protocol's path");
                Ok(ControlFlow::Continue(NativeOutcome::Cancelled {
                    record: None,
                    items: vec![NativeItem::Held; writes.len()],
                }))
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The vote each item's prepare would have had, from what cancelled the native write there
    /// (a write that would have applied: yes); or, where the protocol holds an item, another
    /// request was writing one or one is marked hot, the heat marks of a transaction giving way
    /// (each contended item learned here, [`rules::heat`]). Each item is read as the write's
    /// condition read it: at the record's `createdAt`.
    fn native_votes(
        &self,
        record: &TxRecord,
        items: &[NativeItem],
        writes: &[NativeWrite<'_>],
    ) -> Result<Vec<Vote>, Vec<Option<u64>>> {
        let (now, at) = (self.clock.now_ms(), record.created_at);
        let mut findings = Vec::with_capacity(items.len());
        let mut votes = Vec::with_capacity(items.len());
        for (found, w) in items.iter().zip(writes) {
            let lock = Lock {
                part: None,
                tx_id: record.tx_id.clone(),
                expires_at: record.deadline,
                began: record.created_at,
                op: w.op.clone(),
                coordinator: self.config.id.clone(),
            };
            let (finding, vote) = match found {
                NativeItem::Held => (NativeFinding::Passed, Some(Vote::yes(Mode::Exclusive))),
                NativeItem::Busy => (NativeFinding::Busy, None),
                NativeItem::Refused(item) => {
                    let seen = Seen::preparing(item.as_deref(), &lock, at);
                    let step = rules::native_write(seen, lock.op.creates());
                    let vote = match classify_native_refusal(item.as_deref(), &lock, at) {
                        Refusal::Vote(reason, message) => Some(Vote::no(reason, message)),
                        Refusal::Held { .. } | Refusal::Stale(_) => None,
                    };
                    let hot_until = item.as_ref().map_or(0, |i| i.hot_until);
                    (NativeFinding::Refused { step, hot_until }, vote)
                }
            };
            findings.push(finding);
            votes.push(vote);
        }
        let marks = self.learn_heat(&findings, writes, now);
        votes.into_iter().collect::<Option<Vec<_>>>().ok_or(marks)
    }

    /// Remembers what `findings` teach of each item's heat ([`rules::heats`]), and answers the
    /// marks the staged prepares write (`None` where nothing new was seen).
    fn learn_heat(
        &self,
        findings: &[NativeFinding],
        writes: &[NativeWrite<'_>],
        now: u64,
    ) -> Vec<Option<u64>> {
        rules::heats(findings, now, self.config.heat_window_ms)
            .into_iter()
            .zip(writes)
            .map(|(heat, w)| {
                let heat = heat?;
                self.heat.learn(w.table, w.key, heat.until(), now);
                heat.mark()
            })
            .collect()
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
            Ok(Submitted::of(self.replay(existing, record).await?))
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
