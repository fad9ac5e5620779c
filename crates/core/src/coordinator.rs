//! The coordinator: begin, concurrent prepare, decide by compare-and-swap, concurrent
//! commit/abort, finalize — and `recover`, which drives any record to its end from the record
//! alone (used by replays and by the sweeper).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::join_all;
use serde_json::Value;
use tracing::{error, info, warn};

use crate::api::codes;
use crate::fault::{FaultPoint, Faults, NoFaults};
use crate::ids::TxId;
use crate::message::{CompleteReply, CompleteRequest, PrepareReply, PrepareRequest, Prune};
use crate::ports::{Clock, Created, PortError, Swapped, Transport, TxLog};
use crate::record::{TxRecord, Vote, VoteReason};
use crate::request::{Limits, RequestError, ServiceConfig, TxRequest, check_idempotency_key};
use crate::rules::{self, AfterLostSwap, Recovery};
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

/// The coordinator over a transaction log, a transport and a clock.
pub struct Coordinator<L, T, C> {
    log: L,
    transport: T,
    clock: C,
    config: Arc<CoordinatorConfig>,
    faults: Arc<dyn Faults>,
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
        }
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
    /// `ABORTING` is finished by the sweeper). Returns the record as it stands.
    pub async fn submit(
        &self,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<TxRecord, SubmitError> {
        if let Some(k) = idempotency_key {
            check_idempotency_key(k)?;
        }
        let request = self.validate(body)?;
        let now = self.clock.now_ms();
        let tx_id = idempotency_key.map_or_else(TxId::random, TxId::for_idempotency_key);
        let begun_by = format!("{}/{}", self.config.id, TxId::random());
        let record = request.begin(tx_id.clone(), idempotency_key, begun_by, now);
        let unavailable = |source| SubmitError::Unavailable {
            tx_id: Some(tx_id.clone()),
            source,
        };

        // 1. Begin.
        match self.begin(&record).await.map_err(unavailable)? {
            Begun::Ours => {}
            Begun::Existing(existing) => return self.replay(existing, &record.request_hash).await,
        }
        self.checkpoint(FaultPoint::AfterBegin).await;

        // 2. Prepare, all participants at once.
        let replies = self.prepare_all(&record).await;
        self.checkpoint(FaultPoint::BeforeDecide).await;

        // 3. Decide: the write of COMMITTING is the commit point.
        let decision = rules::decision(replies.iter().map(|r| r.vote.is_yes()));
        let votes: Vec<Vote> = replies.iter().map(|r| r.vote.clone()).collect();
        let decided = self
            .decide(&record, decision, &votes)
            .await
            .map_err(unavailable)?;
        self.checkpoint(FaultPoint::AfterDecide).await;

        // 4-5. Complete everywhere, then finalize.
        // What each prepare's reply planned for its item (the prune), carried by the completion
        // of the decision it was planned for.
        let prunes: Vec<Option<Prune>> = if decided.status.decision() == Some(decision) {
            replies.into_iter().map(|r| r.prune).collect()
        } else {
            vec![]
        };
        Ok(self.complete(decided, &prunes).await?)
    }

    /// Reads a record.
    pub async fn status(&self, tx: &TxId) -> Result<Option<TxRecord>, PortError> {
        self.log.get(tx).await
    }

    /// Drives a record toward its end from the record alone: an undecided one past its
    /// deadline is aborted; a decided one is completed and finalized. A live undecided one is
    /// left alone.
    pub async fn recover(&self, record: TxRecord) -> Result<TxRecord, PortError> {
        let now = self.clock.now_ms();
        match rules::recovery(record.status, now > record.deadline) {
            Recovery::Leave | Recovery::Ended => Ok(record),
            Recovery::Complete(_) => self.complete(record, &[]).await,
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
        // A replay of a decided but unfinished transaction helps finish it.
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
                        && r.status != TxStatus::Preparing
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
