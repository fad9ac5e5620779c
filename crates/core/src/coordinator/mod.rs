//! The coordinator: begin, concurrent prepare, decide by compare-and-swap, concurrent
//! commit/abort, finalize — and `recover`, which drives any record to its end from the record
//! alone (used by replays and by the sweeper).
//!
//! Three ways to commit ([`CommitMode`]), one way in ([`Coordinator::submit`], then
//! [`Coordinator::finish`] after the answer). *Native*: one `TransactWriteItems`. *Classic*:
//! begin (`PREPARING`), prepare, decide, then answer after completing (five rounds).
//! *Staged*: the record is written `STAGING` together with the prepares; once the put is
//! acknowledged and every vote is yes the transaction is committed (implicitly) and the client
//! is answered, and the commit is made explicit, completed and finalized after the answer.
//! `docs/protocol.md`, "The staged commit".

mod heat;
mod native;
mod operator;
mod path;
mod recover;
mod types;

use native::NativeAnswer;
pub use operator::Acted;
pub use types::{Answered, CommitMode, CoordinatorConfig, Finish, Outcome, SubmitError, Submitted};

use std::ops::ControlFlow;
use std::sync::Arc;

use futures::future::join_all;
use serde_json::Value;
use tracing::{error, info, warn};

use crate::codes;
use crate::fault::{FaultPoint, Faults, NoFaults};
use crate::ids::TxId;
use crate::message::{CompleteReply, CompleteRequest, PrepareReply, PrepareRequest, Prune};
use crate::ports::{Clock, Created, NativeStore, PortError, Swapped, Transport, TxLog};
use crate::record::{TxRecord, Vote, VoteReason};
use crate::request::{RequestError, TxRequest, Wait, check_idempotency_key, spelled_hash};
use crate::rules::{self, AfterLostSwap, Path};
use crate::status::{Decision, TxStatus};

/// The coordinator over a transaction log, a transport and a clock (and, to commit natively,
/// the store's own transactions).
pub struct Coordinator<L, T, C> {
    log: L,
    transport: T,
    clock: C,
    config: Arc<CoordinatorConfig>,
    faults: Arc<dyn Faults>,
    native: Option<Arc<dyn NativeStore>>,
    heat: heat::HeatCache,
}

impl<L: TxLog, T: Transport, C: Clock> Coordinator<L, T, C> {
    /// Wires a coordinator.
    pub fn new(log: L, transport: T, clock: C, config: CoordinatorConfig) -> Self {
        Coordinator {
            log,
            transport,
            clock,
            config: Arc::new(config),
            faults: Arc::new(NoFaults),
            native: None,
            heat: heat::HeatCache::default(),
        }
    }

    /// Commits eligible transactions natively in [`CommitMode::Auto`] (without one, every
    /// transaction takes the protocol path).
    pub fn with_native(mut self, native: Arc<dyn NativeStore>) -> Self {
        self.native = Some(native);
        self
    }

    /// Arms fault points (tests).
    pub fn with_faults(mut self, faults: Arc<dyn Faults>) -> Self {
        self.faults = faults;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// The transaction log.
    pub fn log(&self) -> &L {
        &self.log
    }

    /// Stops dead here if a test armed this point: the future never resumes, as a killed
    /// process would not, and whoever runs it drops it (`twopc_tests::CrashAt`). Production
    /// runs [`NoFaults`].
    async fn checkpoint(&self, point: FaultPoint) {
        if self.faults.fire(point) {
            std::future::pending::<()>().await;
        }
    }

    /// Validates a request (nothing written).
    pub fn validate(&self, body: &Value) -> Result<TxRequest, RequestError> {
        TxRequest::parse(body, &self.config.services, &self.config.limits)
    }

    /// Runs a transaction up to its answer, the one way in (`docs/protocol.md`, "Which path"):
    /// natively where the store can commit it alone; else staged (the record put `STAGING`
    /// with the prepares, answered "committed" from the acknowledged put and every yes vote,
    /// or "aborted" after winning `STAGING → ABORTING`); else classic, to its end. What is
    /// left after the answer is [`Answered::finish`], for [`Self::finish`] once the client has
    /// it, unless the request asked to `"wait": "applied"`: then it is run here first.
    pub async fn submit(
        &self,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Answered, SubmitError> {
        if let Some(k) = idempotency_key {
            check_idempotency_key(k)?;
        }
        let request = self.validate(body)?;
        let record = self.begin_record(&request, idempotency_key);
        // Boxed: the protocol's state machines nest deep, and a caller that holds this future
        // on its stack (a current-thread runtime's `block_on`, a debug build) must not carry them.
        let answered = Box::pin(self.answer(record, idempotency_key)).await?;
        Ok(match (answered.finish, request.wait) {
            (Some(finish), Wait::Applied) => Box::pin(self.applied(answered.answer, finish)).await,
            (finish, _) => Answered {
                answer: answered.answer,
                finish,
            },
        })
    }

    /// The record that begins `request`'s transaction, now: its id from the idempotency key
    /// (or fresh), and who begins it (this coordinator, once: a retried put of ours is ours).
    fn begin_record(&self, request: &TxRequest, idempotency_key: Option<&str>) -> TxRecord {
        let tx_id = idempotency_key.map_or_else(TxId::random, TxId::for_idempotency_key);
        let begun_by = format!("{}/{}", self.config.id, TxId::random());
        request.begin(tx_id, idempotency_key, begun_by, self.clock.now_ms())
    }

    /// The answer: native where [`rules::route`] sends the transaction and nothing is in the
    /// way, else the protocol's round (with the heat marks a native attempt that gave way saw).
    async fn answer(
        &self,
        record: TxRecord,
        idempotency_key: Option<&str>,
    ) -> Result<Answered, SubmitError> {
        let (path, marks) = match (self.path(&record), self.native.as_deref()) {
            (Path::Native, Some(native)) => match self
                .commit_natively(native, &record, idempotency_key.is_some())
                .await?
            {
                NativeAnswer::Answered(answer) => return Ok(Answered::done(*answer)),
                NativeAnswer::GaveWay { marks } => {
                    info!(tx_id = %record.tx_id, "an item is held, busy or hot: the protocol path instead");
                    (self.protocol_path(&record), marks)
                }
            },
            (path, _) => (path, vec![]),
        };
        let staged = path == Path::Staged;
        self.round(record, idempotency_key, staged, &marks).await
    }

    /// The protocol's round: begin and prepare, then the answer. Staged only where every
    /// participant answers the inquiries a `STAGING` record's recovery needs from a highly
    /// available log: one that never answers would keep the transaction, and its other items,
    /// undecided (`rules::stages`). Staged, a commit is answered once every vote is yes (it is
    /// implicit), an abort after its decision; classic, after the transaction ended.
    async fn round(
        &self,
        mut record: TxRecord,
        idempotency_key: Option<&str>,
        staged: bool,
        marks: &[Option<u64>],
    ) -> Result<Answered, SubmitError> {
        if staged {
            record.status = TxStatus::Staging;
        }
        let parallel = staged && idempotency_key.is_none();
        let replies = match self.begin_and_prepare(&record, parallel, marks).await? {
            ControlFlow::Continue(replies) => replies,
            ControlFlow::Break(answer) => return Ok(Answered::done(answer)),
        };
        self.checkpoint(FaultPoint::BeforeDecide).await;
        let decision = rules::decision(replies.iter().map(|r| r.vote.is_yes()));
        let votes: Vec<Vote> = replies.iter().map(|r| r.vote.clone()).collect();
        // What each prepare's reply planned for its item (the prune), carried by the
        // completion of the decision it was planned for.
        let prunes: Vec<Option<Prune>> = replies.into_iter().map(|r| r.prune).collect();
        let finish = Finish {
            record,
            votes,
            prunes,
            planned: decision,
        };
        if staged && decision == Decision::Commit {
            return Ok(self.implicitly_committed(finish).await);
        }
        // The write of COMMITTING (or ABORTING) is the decision point. A staged abort is
        // answered after it too: a retried copy of a refused prepare could still make every
        // participant hold the transaction, and a helper then commit it.
        let unavailable = unavailable(&finish.record.tx_id);
        let decided = self
            .decide(&finish.record, decision, &finish.votes)
            .await
            .map_err(&unavailable)?;
        self.checkpoint(FaultPoint::AfterDecide).await;
        let finish = Finish {
            record: decided,
            ..finish
        };
        if staged {
            return Ok(Answered {
                answer: Submitted::of(finish.record.clone()),
                finish: Some(finish),
            });
        }
        // Classic: complete everywhere, then finalize, before answering.
        let done = self.finish(finish).await.map_err(&unavailable)?;
        Ok(Answered::done(Submitted::of(done)))
    }

    /// Begins (the record put) and prepares every participant: both at once if `parallel`
    /// (staged without an idempotency key), else the prepares after the put, so that a
    /// replay, whose put is refused, never sends a prepare. Breaks with the answer when the
    /// put found a record there already.
    async fn begin_and_prepare(
        &self,
        record: &TxRecord,
        parallel: bool,
        marks: &[Option<u64>],
    ) -> Result<ControlFlow<Submitted, Vec<PrepareReply>>, SubmitError> {
        let (begun, early) = if parallel {
            let (begun, replies) =
                futures::join!(self.begin(record), self.prepare_all(record, marks));
            (begun, Some(replies))
        } else {
            (self.begin(record).await, None)
        };
        let begun = match begun {
            Ok(begun) => begun,
            // The prepares went out with the put: they may hold items for a record that
            // does not exist.
            Err(cause) if parallel => self.abandon(record, cause).await?,
            Err(cause) => return Err(put_failed(&record.tx_id)(cause)),
        };
        match begun {
            Begun::Ours => {}
            // Staged without a key, the id is fresh: a record already there was written by a
            // resolver that found our locks expired before our put landed (ABORTED). Not a
            // replay.
            Begun::Existing(existing) if parallel => {
                warn!(tx_id = %existing.tx_id, status = %existing.status, "staged put refused: a resolver recorded the transaction first");
                // Past our deadline, it recorded us `ABORTED` and aborted its own item: what
                // our prepares hold elsewhere is aborted now rather than at the next sweep.
                if existing.status.decision() == Some(Decision::Abort) {
                    self.abort_everywhere(record).await;
                }
                return Ok(ControlFlow::Break(Submitted::of(*existing)));
            }
            Begun::Existing(existing) => {
                let replayed = self.replay(existing, record).await?;
                return Ok(ControlFlow::Break(Submitted::of(replayed)));
            }
        }
        self.checkpoint(FaultPoint::AfterBegin).await;
        Ok(ControlFlow::Continue(match early {
            Some(replies) => replies,
            None => self.prepare_all(record, marks).await,
        }))
    }

    /// A staged put that failed after its prepares went out: they may hold items for a
    /// transaction with no record, which nobody would end before its deadline. The stager
    /// records it `ABORTING` itself, conditional on no record (as the lock rule records a
    /// missing owner: a late landing of its own put is then refused), aborts every participant
    /// and answers the failure; the client's retry is a new transaction (no key: a fresh id).
    /// If its own put landed after all, it goes on as the stager; if a resolver recorded the
    /// transaction first, that record answers. If even this write fails, the holds stand until
    /// the deadline, when the sweeper's pass over expired locks (or a newcomer's prepare)
    /// resolves them by the lock rule.
    async fn abandon(&self, record: &TxRecord, cause: PortError) -> Result<Begun, SubmitError> {
        warn!(tx_id = %record.tx_id, error = %cause, "staged put failed after the prepares went out: aborting them");
        let now = self.clock.now_ms();
        let aborting = TxRecord {
            status: TxStatus::Aborting,
            updated_at: now,
            decided_at: Some(now),
            ..record.clone()
        };
        let failed = put_failed(&record.tx_id);
        match self.log.create(&aborting).await {
            Ok(Created::New) => {
                if let Err(e) = self.complete(aborting, &[]).await {
                    warn!(tx_id = %record.tx_id, error = %e, "aborting an abandoned staged transaction; the sweeper finishes it");
                }
                Err(failed(cause))
            }
            Ok(Created::Exists(r)) if r.begun_by != record.begun_by => Ok(Begun::Existing(r)),
            Ok(Created::Exists(_)) => Ok(Begun::Ours),
            Err(e) => {
                warn!(tx_id = %record.tx_id, error = %e, "could not record the abandoned transaction; its holds are resolved past its deadline");
                Err(failed(cause))
            }
        }
    }

    /// Committed implicitly: our put is acknowledged and every participant holds the
    /// transaction, which nobody but this coordinator may act on before it is explicit
    /// (`docs/protocol.md`, "The staged commit"). Answered "committed" with the votes; the
    /// explicit commit is left for [`Self::finish`].
    async fn implicitly_committed(&self, finish: Finish) -> Answered {
        let answer = Submitted {
            record: TxRecord {
                votes: finish.votes.clone(),
                ..finish.record.clone()
            },
            outcome: Outcome::Committed,
        };
        self.checkpoint(FaultPoint::AfterAnswer).await;
        Answered {
            answer,
            finish: Some(finish),
        }
    }

    /// Read-your-writes (`"wait": "applied"`): the work after the answer, run before it. The
    /// outcome stands whatever finishing does; if it fails, the stream's completer and the
    /// sweeper finish the transaction, and the answer carries the record as it was.
    async fn applied(&self, answer: Submitted, finish: Finish) -> Answered {
        let record = match self.finish(finish).await {
            Ok(record) => record,
            Err(e) => {
                warn!(error = %e, "finishing failed; the stream's completer and the sweeper finish it");
                answer.record
            }
        };
        Answered::done(Submitted {
            record,
            outcome: answer.outcome,
        })
    }

    /// The work after a staged answer (or a classic decision): make an implicit commit explicit
    /// (`STAGING → COMMITTING`, with the votes), complete every participant (with the prunes
    /// their prepares planned, if the decision is the planned one), finalize.
    pub async fn finish(&self, finish: Finish) -> Result<TxRecord, PortError> {
        let Finish {
            record,
            votes,
            prunes,
            planned,
        } = finish;
        let decided = if record.status == TxStatus::Staging {
            let decided = self.decide(&record, planned, &votes).await?;
            self.checkpoint(FaultPoint::AfterDecide).await;
            decided
        } else {
            record
        };
        let prunes = if decided.status.decision() == Some(planned) {
            prunes
        } else {
            vec![]
        };
        self.complete(decided, &prunes).await
    }

    async fn begin(&self, record: &TxRecord) -> Result<Begun, PortError> {
        let created = match self.log.create(record).await {
            Ok(c) => c,
            Err(PortError::Undetermined { .. }) => match self.log.get(&record.tx_id).await? {
                // Our write may or may not have landed: the record tells.
                Some(r) => Created::Exists(Box::new(r)),
                None => self.log.create(record).await?,
            },
            Err(e) => return Err(e),
        };
        Ok(match created {
            Created::New => Begun::Ours,
            // A retried write of our own (the SDK retries) is ours, not a replay.
            Created::Exists(r) if r.begun_by == record.begun_by => Begun::Ours,
            Created::Exists(r) => Begun::Existing(r),
        })
    }

    /// A record with the request's id was there: a replay of `record`'s request if the hashes
    /// match (by value, or as spelled by a coordinator from before, [`spelled_hash`]).
    async fn replay(
        &self,
        existing: Box<TxRecord>,
        record: &TxRecord,
    ) -> Result<TxRecord, SubmitError> {
        let stored = existing.request_hash.as_str();
        if stored != record.request_hash && stored != spelled_hash(record) {
            return Err(RequestError::new(
                codes::IDEMPOTENCY_KEY_REUSED,
                format!(
                    "the Idempotency-Key was used for transaction {} with a different body; use a new key for a new transaction",
                    existing.tx_id
                ),
            )
            .into());
        }
        info!(tx_id = %existing.tx_id, status = %existing.status, "idempotent replay");
        // A replay of a decided but unfinished transaction helps finish it; of a STAGING one
        // before its deadline, helps make it explicit if every participant holds it.
        let now = self.clock.now_ms();
        if existing.status == TxStatus::Staging && now <= existing.deadline {
            return Ok(self.recover_staged(*existing, false).await?);
        }
        Ok(self.recover(*existing).await?)
    }

    /// Prepares every participant at once, participant `i`'s prepare writing the heat mark
    /// `marks[i]` (if any) on its item.
    async fn prepare_all(&self, record: &TxRecord, marks: &[Option<u64>]) -> Vec<PrepareReply> {
        let calls = record.participants.iter().enumerate().map(|(i, p)| async move {
            let req = PrepareRequest {
                tx_id: record.tx_id.clone(),
                deadline: record.deadline,
                began: record.created_at,
                key: p.key.clone(),
                op: p.op.clone(),
                coordinator: self.config.id.clone(),
                payload: p.payload.clone(),
                hot_until: marks.get(i).copied().flatten(),
            };
            let reply = match self.transport.prepare(&p.target, &req).await {
                Ok(r) => r,
                Err(e) => {
                    warn!(tx_id = %record.tx_id, participant = %p.participant, error = %e, "prepare failed: counting it as a no");
                    PrepareReply::no(VoteReason::Unreachable, e.to_string())
                }
            };
            self.checkpoint(FaultPoint::AfterPrepare(i)).await;
            reply
        });
        join_all(calls).await
    }

    async fn decide(
        &self,
        record: &TxRecord,
        decision: Decision,
        votes: &[Vote],
    ) -> Result<TxRecord, PortError> {
        let to = TxStatus::deciding(decision);
        for _ in 0..3 {
            let now = self.clock.now_ms();
            match self.log.transition(record, to, Some(votes), now).await {
                Ok(Swapped::Done(r)) => return Ok(*r),
                Ok(Swapped::Lost(found)) => {
                    return match (
                        rules::after_lost_decide(found.as_ref().map(|r| r.status)),
                        found,
                    ) {
                        (AfterLostSwap::Follow(recorded), Some(r)) => {
                            if recorded != decision {
                                info!(tx_id = %record.tx_id, recorded = %r.status, "lost the decision race: following the recorded decision");
                            }
                            Ok(*r)
                        }
                        (_, found) => Err(broken(&record.tx_id, "deciding", found.as_deref())),
                    };
                }
                // Outcome unknown: read back and follow what the record says.
                Err(PortError::Undetermined { .. }) => {
                    if let Some(r) = self.log.get(&record.tx_id).await?
                        && r.status.decision().is_some()
                    {
                        return Ok(r);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(PortError::Retryable {
            context: format!("deciding {}", record.tx_id),
            source: "decision write kept failing".into(),
        })
    }

    /// Sends the decision to every participant (with the prune each one's prepare planned, if
    /// known), then finalizes once every one acknowledged.
    async fn complete(
        &self,
        record: TxRecord,
        prunes: &[Option<Prune>],
    ) -> Result<TxRecord, PortError> {
        let Some(decision) = record.status.decision() else {
            return Ok(record);
        };
        if record.status.is_terminal() {
            return Ok(record);
        }
        let calls = (0..record.participants.len())
            .map(|i| self.complete_one(&record, i, prunes.get(i).cloned().flatten(), decision));
        let acks = join_all(calls).await;
        if !acks.iter().all(|a| *a) {
            return Ok(record);
        }
        self.checkpoint(FaultPoint::BeforeFinalize).await;
        let done = TxStatus::finishing(decision);
        let now = self.clock.now_ms();
        match self.log.transition(&record, done, None, now).await? {
            Swapped::Done(r) => Ok(*r),
            Swapped::Lost(found) => {
                match (
                    rules::after_lost_finalize(found.as_ref().map(|r| r.status), decision),
                    found,
                ) {
                    // The sweeper finalized it first, the same way.
                    (AfterLostSwap::Follow(_), Some(r)) => Ok(*r),
                    (_, found) => Err(broken(&record.tx_id, "finalizing", found.as_deref())),
                }
            }
        }
    }

    /// Sends the decision to participant `i`: whether it acknowledged (a violation it reports
    /// is logged, and not an acknowledgement).
    async fn complete_one(
        &self,
        record: &TxRecord,
        i: usize,
        prune: Option<Prune>,
        decision: Decision,
    ) -> bool {
        let p = &record.participants[i];
        let req = CompleteRequest {
            tx_id: record.tx_id.clone(),
            deadline: record.deadline,
            began: record.created_at,
            key: p.key.clone(),
            op: p.op.clone(),
            prune,
            refused: record.votes.get(i).is_some_and(Vote::refused),
        };
        let reply = match decision {
            Decision::Commit => self.transport.commit(&p.target, &req).await,
            Decision::Abort => self.transport.abort(&p.target, &req).await,
        };
        self.checkpoint(FaultPoint::AfterComplete(i)).await;
        match reply {
            Ok(CompleteReply::Violation { message }) => {
                error!(tx_id = %record.tx_id, participant = %p.participant, %message, "participant reported a protocol violation");
                false
            }
            Ok(_) => true,
            Err(e) => {
                warn!(tx_id = %record.tx_id, participant = %p.participant, error = %e, "completion not acknowledged; the sweeper will retry");
                false
            }
        }
    }
}

impl<L: TxLog, T: Transport, C: Clock> Coordinator<L, T, C> {
    /// Sends an abort to every participant of `record`, whose transaction a record elsewhere
    /// says aborted (its acknowledgements are not waited for by anyone: the record is terminal,
    /// and a hold left over is resolved by the lock rule).
    async fn abort_everywhere(&self, record: &TxRecord) {
        let calls = (0..record.participants.len())
            .map(|i| self.complete_one(record, i, None, Decision::Abort));
        join_all(calls).await;
    }
}

enum Begun {
    Ours,
    Existing(Box<TxRecord>),
}

/// A lost swap whose record is missing, or says something no legal move explains.
fn broken(tx: &TxId, doing: &str, found: Option<&TxRecord>) -> PortError {
    match found {
        None => missing(tx),
        Some(r) => PortError::Fatal {
            context: format!("{doing} {tx}"),
            source: format!("the record is {} after a failed swap", r.status).into(),
        },
    }
}

/// A store's failure while `tx`'s record may exist: the transaction is left for recovery.
fn unavailable(tx: &TxId) -> impl Fn(PortError) -> SubmitError + '_ {
    move |source| SubmitError::Unavailable {
        tx_id: Some(tx.clone()),
        source,
    }
}

/// A failed put of `tx`'s record. Refused as invalid (DynamoDB's `ValidationException`: the
/// record past 400 KB), it was not written and sending it again cannot help: the request's
/// refusal `invalid_for_store`, never 503 "retry". Otherwise [`unavailable`].
fn put_failed(tx: &TxId) -> impl Fn(PortError) -> SubmitError + '_ {
    move |source| match source {
        PortError::Invalid { message, .. } => invalid_for_store(&message),
        source => unavailable(tx)(source),
    }
}

/// The refusal of a transaction DynamoDB called invalid (`message`, its words): nothing of it
/// was applied, and it never can be as it is.
fn invalid_for_store(message: &str) -> SubmitError {
    SubmitError::Request(RequestError::new(
        codes::INVALID_FOR_STORE,
        format!(
            "DynamoDB refused the transaction as invalid, and nothing was applied ({message}): change the request"
        ),
    ))
}

fn missing(tx: &TxId) -> PortError {
    PortError::Fatal {
        context: format!("transaction {tx}"),
        source: "the record vanished".into(),
    }
}
