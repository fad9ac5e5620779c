//! The coordinator: begin, concurrent prepare, decide by compare-and-swap, concurrent
//! commit/abort, finalize — and `recover`, which drives any record to its end from the record
//! alone (used by replays and by the sweeper).
//!
//! Two ways to commit ([`CommitMode`]). *Classic*: begin (`PREPARING`), prepare, decide, then
//! answer after completing (five rounds). *Staged*: the record is written `STAGING` together
//! with the prepares; once the put is acknowledged and every vote is yes the transaction is
//! committed (implicitly) and the client is answered, and the commit is made explicit,
//! completed and finalized after the answer ([`Coordinator::stage`], then
//! [`Coordinator::finish`]). `docs/protocol.md`, "The staged commit".

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::join_all;
use serde_json::Value;
use tracing::{debug, error, info, warn};

use crate::codes;
use crate::fault::{FaultPoint, Faults, NoFaults};
use crate::ids::TxId;
use crate::item::Lock;
use crate::message::{
    CompleteReply, CompleteRequest, InquireRequest, PrepareReply, PrepareRequest, Prune,
};
use crate::op::Mode;
use crate::participant::{Refusal, classify_native_refusal};
use crate::ports::{
    Clock, Created, NativeItem, NativeOutcome, NativeStore, NativeWrite, PortError, Swapped,
    Transport, TxLog,
};
use crate::record::{Target, TxRecord, Vote, VoteReason};
use crate::request::{
    Limits, RequestError, ServiceConfig, ServiceKind, TxRequest, Wait, check_idempotency_key,
};
use crate::rules::{self, AfterLostSwap, Recovery, StagedDecision};
use crate::status::{Decision, TxStatus};

/// The coordinator's configuration.
#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    /// Who this coordinator is (logged, written into locks).
    pub id: String,
    /// Services by name.
    pub services: BTreeMap<String, ServiceConfig>,
    /// Limits and defaults.
    pub limits: Limits,
    /// How transactions are committed.
    pub mode: CommitMode,
}

/// How the coordinator commits a transaction (`TWOPC_COMMIT_MODE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CommitMode {
    /// Begin, prepare, decide, complete, finalize; answered at the end (five rounds).
    Classic,
    /// The record written `STAGING` with the prepares; answered once every vote is yes and the
    /// put is acknowledged (one round; an abort two), finished after the answer.
    Staged,
    /// The default. A transaction the store can commit alone ([`rules::native`]) is one native
    /// `TransactWriteItems`; any other, or one the protocol holds an item of, is staged.
    #[default]
    Auto,
}

impl CommitMode {
    /// Every mode.
    pub const ALL: [CommitMode; 3] = [CommitMode::Classic, CommitMode::Staged, CommitMode::Auto];

    /// The configured name.
    pub fn as_str(self) -> &'static str {
        match self {
            CommitMode::Classic => "classic",
            CommitMode::Staged => "staged",
            CommitMode::Auto => "auto",
        }
    }

    /// Whether the protocol path stages (`STAGING`, answered after one round).
    pub fn stages(self) -> bool {
        self != CommitMode::Classic
    }

    /// Parses a configured name.
    pub fn parse(s: &str) -> Option<CommitMode> {
        CommitMode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// What the client is told about a transaction: its outcome as far as the answering
/// coordinator may tell. A 200 means *decided*; whether every participant applied it is
/// [`Submitted::applied`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Committed: decided (`COMMITTING`, `COMMITTED`), or implicitly committed and answered by
    /// its stager.
    Committed,
    /// Aborted.
    Aborted,
    /// Not decided yet (its coordinator may still be at work, or recovery will end it).
    Pending,
}

impl Outcome {
    /// What a record alone says (anyone but the stager).
    pub fn of(record: &TxRecord) -> Outcome {
        Outcome::of_status(record.status)
    }

    /// What a status alone says.
    pub fn of_status(status: TxStatus) -> Outcome {
        match status.decision() {
            Some(Decision::Commit) => Outcome::Committed,
            Some(Decision::Abort) => Outcome::Aborted,
            None => Outcome::Pending,
        }
    }

    /// The name in the API's `outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Committed => "committed",
            Outcome::Aborted => "aborted",
            Outcome::Pending => "pending",
        }
    }
}

/// A transaction as answered: the record as it stood, and the outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The record as the answer saw it (the stager's with its votes, before it is written).
    pub record: TxRecord,
    /// What the client is told.
    pub outcome: Outcome,
}

impl Submitted {
    /// From a record, by what it says.
    pub fn of(record: TxRecord) -> Submitted {
        Submitted {
            outcome: Outcome::of(&record),
            record,
        }
    }

    /// Whether every participant applied the outcome (the record is terminal).
    pub fn applied(&self) -> bool {
        self.record.status.is_terminal()
    }
}

/// What is left to do after a staged answer: make the commit explicit (or complete the abort),
/// complete every participant, finalize. Run by [`Coordinator::finish`].
#[derive(Debug)]
#[must_use = "a staged transaction is finished by Coordinator::finish (or, if dropped, by recovery)"]
pub struct Finish {
    record: TxRecord,
    votes: Vec<Vote>,
    prunes: Vec<Option<Prune>>,
    planned: Decision,
}

impl Finish {
    /// The transaction.
    pub fn tx_id(&self) -> &TxId {
        &self.record.tx_id
    }
}

/// A staged answer and the work left after it.
#[derive(Debug)]
pub struct Staged {
    /// What to answer now.
    pub answer: Submitted,
    /// What to run after answering (`None`: nothing left, or left to recovery).
    pub finish: Option<Finish>,
    /// When the client asked to be answered: with [`Wait::Applied`], run `finish` first.
    pub wait: Wait,
}

/// Why `submit` did not produce an outcome.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The request is wrong; nothing was written.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A store could not be reached; the transaction (if `tx_id` is set) is left for recovery.
    #[error("transaction store unavailable")]
    Unavailable {
        /// The transaction, if its record may exist.
        tx_id: Option<TxId>,
        /// Cause.
        #[source]
        source: PortError,
    },
}

impl From<PortError> for SubmitError {
    fn from(source: PortError) -> Self {
        SubmitError::Unavailable {
            tx_id: None,
            source,
        }
    }
}

/// The coordinator over a transaction log, a transport and a clock (and, to commit natively,
/// the store's own transactions).
pub struct Coordinator<L, T, C> {
    log: L,
    transport: T,
    clock: C,
    config: Arc<CoordinatorConfig>,
    faults: Arc<dyn Faults>,
    native: Option<Arc<dyn NativeStore>>,
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

    /// Runs a transaction to its end (or as far as it can: a record left `COMMITTING` or
    /// `ABORTING` is finished by the sweeper). Returns the record as it stands. In staged mode,
    /// this is [`Self::stage`] then [`Self::finish`]: the answer after the applies.
    pub async fn submit(
        &self,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<TxRecord, SubmitError> {
        let staged = self.stage(body, idempotency_key).await?;
        match staged.finish {
            Some(finish) => Ok(self.finish(finish).await?),
            None => Ok(staged.answer.record),
        }
    }

    /// Runs a transaction up to its answer. Classic: to its end, as [`Self::submit`] did
    /// always. Staged: the record put (`STAGING`) and the prepares (in parallel for a request
    /// without an idempotency key; after the put for one with a key, so that a replay, whose
    /// put is refused, never sends a prepare), then the answer: "committed" from the
    /// acknowledged put and every yes vote; "aborted" after winning `STAGING → ABORTING`. What
    /// is left ([`Staged::finish`]) is for [`Self::finish`], after the answer is sent.
    pub async fn stage(
        &self,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Staged, SubmitError> {
        if let Some(k) = idempotency_key {
            check_idempotency_key(k)?;
        }
        let request = self.validate(body)?;
        let wait = request.wait;
        let now = self.clock.now_ms();
        let tx_id = idempotency_key.map_or_else(TxId::random, TxId::for_idempotency_key);
        let begun_by = format!("{}/{}", self.config.id, TxId::random());
        let mut record = request.begin(tx_id.clone(), idempotency_key, begun_by, now);
        let unavailable = |source| SubmitError::Unavailable {
            tx_id: Some(tx_id.clone()),
            source,
        };
        if let Some(native) = self.natively(&record) {
            match self
                .commit_natively(native, &record, idempotency_key.is_some())
                .await?
            {
                Some(answer) => {
                    return Ok(Staged {
                        answer,
                        finish: None,
                        wait,
                    });
                }
                None => info!(tx_id = %tx_id, "the protocol holds an item: staged instead"),
            }
        }
        // Every participant answers the inquiry a STAGING record's recovery needs: the generic
        // one over its item, the participant SDK over its phases.
        let staged = self.config.mode.stages();
        if staged {
            record.status = TxStatus::Staging;
        }

        // 1. Begin (and, staged without a key, prepare at the same time).
        let parallel = staged && idempotency_key.is_none();
        let (begun, early) = if parallel {
            let (begun, replies) = futures::join!(self.begin(&record), self.prepare_all(&record));
            (begun, Some(replies))
        } else {
            (self.begin(&record).await, None)
        };
        match begun.map_err(unavailable)? {
            Begun::Ours => {}
            // Staged without a key, the id is fresh: a record already there was written by a
            // resolver that found our locks expired before our put landed (ABORTED). Not a
            // replay; the lock rule aborts what our prepares hold.
            Begun::Existing(existing) if parallel => {
                warn!(tx_id = %existing.tx_id, status = %existing.status, "staged put refused: a resolver recorded the transaction first");
                return Ok(Staged {
                    answer: Submitted::of(*existing),
                    finish: None,
                    wait,
                });
            }
            Begun::Existing(existing) => {
                let replayed = self.replay(existing, &record.request_hash).await?;
                return Ok(Staged {
                    answer: Submitted::of(replayed),
                    finish: None,
                    wait,
                });
            }
        }
        self.checkpoint(FaultPoint::AfterBegin).await;

        // 2. Prepare, all participants at once.
        let replies = match early {
            Some(replies) => replies,
            None => self.prepare_all(&record).await,
        };
        self.checkpoint(FaultPoint::BeforeDecide).await;

        let decision = rules::decision(replies.iter().map(|r| r.vote.is_yes()));
        let votes: Vec<Vote> = replies.iter().map(|r| r.vote.clone()).collect();
        // What each prepare's reply planned for its item (the prune), carried by the
        // completion of the decision it was planned for.
        let prunes: Vec<Option<Prune>> = replies.into_iter().map(|r| r.prune).collect();
        if staged && decision == Decision::Commit {
            // Committed implicitly: our put is acknowledged and every participant holds the
            // transaction, which nobody but this coordinator may act on before it is explicit
            // (`docs/protocol.md`, "The staged commit").
            let answer = Submitted {
                record: TxRecord {
                    votes: votes.clone(),
                    ..record.clone()
                },
                outcome: Outcome::Committed,
            };
            self.checkpoint(FaultPoint::AfterAnswer).await;
            return Ok(Staged {
                answer,
                finish: Some(Finish {
                    record,
                    votes,
                    prunes,
                    planned: decision,
                }),
                wait,
            });
        }

        // 3. Decide: the write of COMMITTING (or ABORTING) is the decision point. A staged abort
        // is answered after it too: a retried copy of a refused prepare could still make every
        // participant hold the transaction, and a helper then commit it.
        let decided = self
            .decide(&record, decision, &votes)
            .await
            .map_err(unavailable)?;
        self.checkpoint(FaultPoint::AfterDecide).await;
        let finish = Finish {
            record: decided,
            votes,
            prunes,
            planned: decision,
        };
        if staged {
            return Ok(Staged {
                answer: Submitted::of(finish.record.clone()),
                finish: Some(finish),
                wait,
            });
        }
        // 4-5. Classic: complete everywhere, then finalize, before answering.
        let done = self.finish(finish).await.map_err(unavailable)?;
        Ok(Staged {
            answer: Submitted::of(done),
            finish: None,
            wait,
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

    /// Reads a record.
    pub async fn status(&self, tx: &TxId) -> Result<Option<TxRecord>, PortError> {
        self.log.get(tx).await
    }

    /// How long a `STAGING` record is left to its stager before a status read helps it.
    pub const HELP_AFTER_MS: u64 = 1_000;

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
        let now = self.clock.now_ms();
        match rules::recovery(record.status, now > record.deadline) {
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
    pub async fn recover_staged(
        &self,
        record: TxRecord,
        prevent: bool,
    ) -> Result<TxRecord, PortError> {
        let calls = record.participants.iter().map(|p| {
            let req = InquireRequest {
                tx_id: record.tx_id.clone(),
                deadline: record.deadline,
                began: record.created_at,
                key: p.key.clone(),
                prevent,
            };
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

    /// The native store, if `record` is to be committed natively: [`CommitMode::Auto`], a
    /// store, and [`rules::native`] admits its participants.
    fn natively(&self, record: &TxRecord) -> Option<&dyn NativeStore> {
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
    async fn commit_natively(
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

    async fn replay(&self, existing: Box<TxRecord>, hash: &str) -> Result<TxRecord, SubmitError> {
        if existing.request_hash != hash {
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

    async fn prepare_all(&self, record: &TxRecord) -> Vec<PrepareReply> {
        let calls = record.participants.iter().enumerate().map(|(i, p)| async move {
            let req = PrepareRequest {
                tx_id: record.tx_id.clone(),
                deadline: record.deadline,
                began: record.created_at,
                key: p.key.clone(),
                op: p.op.clone(),
                coordinator: self.config.id.clone(),
                payload: p.payload.clone(),
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
        let calls = record.participants.iter().enumerate().map(|(i, p)| {
            let record = &record;
            async move {
                let req = CompleteRequest {
                    tx_id: record.tx_id.clone(),
                    deadline: record.deadline,
                    began: record.created_at,
                    key: p.key.clone(),
                    op: p.op.clone(),
                    prune: prunes.get(i).cloned().flatten(),
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
        });
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

fn missing(tx: &TxId) -> PortError {
    PortError::Fatal {
        context: format!("transaction {tx}"),
        source: "the record vanished".into(),
    }
}
