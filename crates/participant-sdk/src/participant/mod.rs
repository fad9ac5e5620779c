//! The driver: prepare, commit and abort as the coordinator sends them (and its inquiries). Each
//! reads the transaction's state, asks a rule (the core's [`rules`] for the protocol's answers),
//! claims the hook call with a conditional write, calls the hook, and records its result with
//! another. The resolution of states whose coordinator went silent is in `resolve`.

mod resolve;

pub use resolve::{Resolved, SWEEP_LIMIT};

use std::time::Duration;

use serde_json::Value;
use tracing::{error, info, warn};
use twopc_core::decimal::canonical_json;
use twopc_core::ids::TxId;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::op::Mode;
use twopc_core::ports::{Clock, PortError, TxLog};
use twopc_core::record::{Vote, VoteReason};
use twopc_core::rules::{
    self, AbortStep, CommitStep, Inquiry, PrepareRefusal, PrepareStep, Reply, Seen,
};
use twopc_core::status::Decision;

use crate::hooks::{Call, HookError, Hooks, Reservation};
use crate::state::{InquiryPlan, Phase, ReserveRefusal, TxState};
use crate::store::{StateStore, Written};

/// How long a `confirm` or `cancel` call may take by default (ms): [`Builder::claim`].
pub const DEFAULT_CLAIM_MS: u64 = 30_000;

/// Why a call could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] PortError),
    /// A hook failed or did not finish in time; it will be called again (or, for `reserve`, the
    /// transaction cancelled) by the next message or the sweep.
    #[error("{hook} of transaction {tx_id} failed")]
    Hook {
        /// `reserve`, `confirm` or `cancel`.
        hook: &'static str,
        /// The transaction.
        tx_id: TxId,
        /// Why.
        #[source]
        source: HookError,
    },
    /// Another call of the same hook for the transaction is under way: retry after `until`.
    #[error("transaction {tx_id}: a {phase:?} call is under way until {until}")]
    Busy {
        /// The transaction.
        tx_id: TxId,
        /// The claimed phase.
        phase: Phase,
        /// When the claim ends (epoch ms).
        until: u64,
    },
    /// A message that is not a participant call.
    #[error("not a participant call: {0}")]
    Invalid(String),
}

/// A participant made of a service's hooks and the protocol around them; built with
/// [`SdkParticipant::builder`]. Clones share the store and the log (the hooks as their own
/// `Clone` does).
#[derive(Clone, Debug)]
pub struct SdkParticipant<H, S, L, C> {
    hooks: H,
    store: S,
    log: L,
    clock: C,
    /// How long a `confirm` or `cancel` call may take (ms): past it the call counts as
    /// interrupted, and the next commit, abort or sweep calls the hook again. `reserve` has
    /// the transaction's deadline instead.
    claim_ms: u64,
}

fn violation(tx: &TxId, what: &str) -> CompleteReply {
    error!(tx_id = %tx, what, "protocol violation");
    CompleteReply::Violation {
        message: format!("transaction {tx}: {what}"),
    }
}

fn reply(tx: &TxId, r: Reply) -> CompleteReply {
    match r {
        Reply::Done => CompleteReply::Done,
        Reply::AlreadyDone => CompleteReply::AlreadyDone,
        Reply::Violation(v) => violation(tx, &format!("{v:?}")),
    }
}

impl<H: Hooks, S: StateStore, L: TxLog, C: Clock> SdkParticipant<H, S, L, C> {
    /// Wires the participant ([`Builder::build`]).
    pub(crate) fn new(hooks: H, store: S, log: L, clock: C, claim_ms: u64) -> Self {
        SdkParticipant {
            hooks,
            store,
            log,
            clock,
            claim_ms,
        }
    }

    /// How long a `confirm` or `cancel` call may take (ms).
    pub fn claim_ms(&self) -> u64 {
        self.claim_ms
    }

    /// The service's hooks.
    pub fn hooks(&self) -> &H {
        &self.hooks
    }

    /// The state store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Prepare: `reserve` once, yes or no; a duplicate gets the same answer without a call; a
    /// prepare after the transaction ended here (or was aborted before it arrived) is refused.
    pub async fn prepare(&self, req: &PrepareRequest) -> Result<PrepareReply, Error> {
        let tx = &req.tx_id;
        let now = self.clock.now_ms();
        if now >= req.deadline {
            let late = now - req.deadline;
            let message = format!("the transaction's deadline passed {late} ms ago");
            return Ok(PrepareReply::no(VoteReason::Expired, message));
        }
        let Some(payload) = &req.payload else {
            let message = "no payload: this participant takes a payload, not an operation";
            return Ok(PrepareReply::no(VoteReason::Invalid, message));
        };
        let mut found = self.store.get(tx).await?;
        let claim = loop {
            match &found {
                Some(s) if s.phase == Phase::Refused => {
                    let r = s.refusal.clone().unwrap_or(ReserveRefusal {
                        reason: VoteReason::Invalid,
                        message: String::new(),
                    });
                    return Ok(PrepareReply::no(r.reason, r.message));
                }
                Some(s) if s.phase == Phase::Reserving => {
                    let message = if s.claim_live(now) {
                        "a prepare of this transaction is under way"
                    } else {
                        "a prepare of this transaction was interrupted"
                    };
                    return Ok(PrepareReply::no(VoteReason::Conflict, message));
                }
                _ => {}
            }
            // A duplicate of the prepare that holds is a retry; one with another payload is
            // not (its numbers compared by value: the state store gives them back so).
            let other_op = found
                .as_ref()
                .and_then(|s| s.payload.as_ref())
                .is_some_and(|held| canonical_json(held) != canonical_json(payload));
            let seen = Seen {
                other_op,
                ..Phase::seen(found.as_ref().map(|s| s.phase))
            };
            match rules::prepare(seen, false) {
                PrepareStep::Lock if found.is_some() => return Ok(yes()),
                PrepareStep::Lock => {}
                PrepareStep::Refuse(PrepareRefusal::Fenced(outcome)) => {
                    let message = format!("this transaction already ended here ({outcome:?})");
                    return Ok(PrepareReply::no(VoteReason::Fenced, message));
                }
                PrepareStep::Refuse(PrepareRefusal::OtherOperation) => {
                    let message = "this transaction holds this participant already with another payload: refused, what it holds keeps its payload";
                    return Ok(PrepareReply::no(VoteReason::Invalid, message));
                }
                PrepareStep::Refuse(other) => {
                    let message = format!("refused: {other:?}");
                    return Ok(PrepareReply::no(VoteReason::Conflict, message));
                }
            }
            let mut claim = TxState::first(tx, Phase::Reserving, req.deadline, req.began, now);
            claim.payload = Some(payload.clone());
            claim.claimed_until = Some(req.deadline);
            match self.store.create(&claim).await? {
                Written::Done => break claim,
                Written::Lost(s) => found = s.map(|b| *b),
            }
        };
        // A payload the service's type does not read is refused like a `reserve` that said
        // `invalid`, and recorded so: no hook is called, a duplicate gets the same answer.
        let outcome = match serde_json::from_value::<H::Payload>(payload.clone()) {
            Err(e) => Ok(Reservation::invalid(format!(
                "the payload is not one this participant reads: {e}"
            ))),
            Ok(payload) => {
                let call = Call {
                    tx_id: tx,
                    payload: &payload,
                    deadline: req.deadline,
                };
                self.within(req.deadline, "reserve", self.hooks.reserve(call))
                    .await
            }
        };
        let now = self.clock.now_ms();
        let (next, vote) = match outcome {
            Ok(Reservation::Held) => (claim.moved(Phase::Reserved, None, now), yes()),
            Ok(Reservation::Refused { reason, message }) => {
                let mut next = claim.moved(Phase::Refused, None, now);
                next.refusal = Some(ReserveRefusal {
                    reason,
                    message: message.clone(),
                });
                (next, PrepareReply::no(reason, message))
            }
            Err(source) => {
                // Outcome unknown: end the claim now, so the abort cancels at once.
                let ended = claim.moved(Phase::Reserving, Some(now), now);
                if let Written::Lost(s) = self.store.replace(&ended).await? {
                    warn!(tx_id = %tx, state = ?s, "the failed reserve's state moved meanwhile");
                }
                return Err(Error::Hook {
                    hook: "reserve",
                    tx_id: tx.clone(),
                    source,
                });
            }
        };
        match self.store.replace(&next).await? {
            Written::Done => Ok(vote),
            Written::Lost(s) => {
                // The claim was ended under the call: by an inquiry's prevent (the staged
                // commit's recovery), or by an abort that found it expired. Either way the
                // transaction is being cancelled, and what the call held must go too.
                warn!(tx_id = %tx, state = ?s, "reserve finished after its claim was ended");
                if vote.vote.is_yes() {
                    self.cancel_late_hold(&claim, s.map(|b| *b)).await?;
                }
                if self.clock.now_ms() < req.deadline {
                    let message = "this transaction was prevented here while its reserve ran";
                    return Ok(PrepareReply::no(VoteReason::Fenced, message));
                }
                let message = "the reserve finished after the transaction's deadline";
                Ok(PrepareReply::no(VoteReason::Expired, message))
            }
        }
    }

    /// Releases what a `reserve` held after its claim was ended (`found`: the state then).
    /// A claim ended by a prevent and not yet taken over is cancelled as an abort would, once:
    /// the abort that follows finds it done. Otherwise an abort took it over and its `cancel`
    /// may have run before the hold: call `cancel` again (hooks are idempotent per
    /// transaction).
    async fn cancel_late_hold(&self, claim: &TxState, found: Option<TxState>) -> Result<(), Error> {
        let now = self.clock.now_ms();
        if found.is_some_and(|s| s.phase == Phase::Cancelling && !s.claim_live(now)) {
            match self.finish(&claim.tx_id, Decision::Abort, None).await {
                Ok(CompleteReply::Done) => return Ok(()),
                Ok(other) => warn!(tx_id = %claim.tx_id, reply = ?other, "the late hold's cancel"),
                Err(Error::Busy { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.call_hook("cancel", claim, now + self.claim_ms).await
    }

    /// Inquiry (the staged commit's recovery, `rules::inquire` over the phases,
    /// [`Phase::inquire`]): `held` once `reserve` said yes and it was recorded, `committed`
    /// once committed, `prevented` once refused or aborted; otherwise `open`, or, with
    /// `prevent`, prevented first by one conditional write: no state is recorded `Aborted`
    /// (its prepare is then refused), a `reserve` still deciding has its claim ended (its
    /// result can then never land, and what it holds is cancelled). Calls no hook.
    pub async fn inquire(&self, req: &InquireRequest) -> Result<InquireReply, Error> {
        let tx = &req.tx_id;
        let mut found = self.store.get(tx).await?;
        for _ in 0..6 {
            let now = self.clock.now_ms();
            let written = match Phase::inquire(found.as_ref().map(|s| s.phase), req.prevent) {
                InquiryPlan::Answer(inquiry) => return Ok(InquireReply { inquiry }),
                InquiryPlan::RecordAborted => {
                    let aborted = TxState::first(tx, Phase::Aborted, req.deadline, req.began, now);
                    self.store.create(&aborted).await?
                }
                InquiryPlan::EndClaim => match &found {
                    Some(claim) => {
                        let ended = claim.moved(Phase::Cancelling, Some(now), now);
                        self.store.replace(&ended).await?
                    }
                    None => Written::Lost(None),
                },
            };
            match written {
                Written::Done => {
                    info!(tx_id = %tx, "staged transaction prevented here");
                    return Ok(InquireReply {
                        inquiry: Inquiry::Prevented,
                    });
                }
                Written::Lost(s) => found = s.map(|b| *b),
            }
        }
        Err(Error::Store(PortError::Retryable {
            context: format!("inquiry about transaction {tx}"),
            source: "its state kept changing under the inquiry".into(),
        }))
    }

    /// Commit: `confirm` once; a duplicate answers `alreadyDone`; a commit of a transaction
    /// this participant did not vote yes for is a violation.
    pub async fn commit(&self, req: &CompleteRequest) -> Result<CompleteReply, Error> {
        self.finish(&req.tx_id, Decision::Commit, Some(req)).await
    }

    /// Abort: `cancel` once if held; an abort before (or instead of) the prepare records the
    /// transaction as aborted, so its prepare is refused, and calls nothing.
    pub async fn abort(&self, req: &CompleteRequest) -> Result<CompleteReply, Error> {
        self.finish(&req.tx_id, Decision::Abort, Some(req)).await
    }

    /// Carries out `decision` on the transaction's state. `req` is the message, when there is
    /// one (an abort with no state records it; the sweep never writes a state that is not there).
    async fn finish(
        &self,
        tx: &TxId,
        decision: Decision,
        req: Option<&CompleteRequest>,
    ) -> Result<CompleteReply, Error> {
        let mut found = self.store.get(tx).await?;
        loop {
            let now = self.clock.now_ms();
            let Some(state) = found else {
                // No state: the rules say fence out (abort) or violation (commit).
                let seen = Phase::seen(None);
                let Some(req) = req.filter(|_| decision == Decision::Abort) else {
                    if let CommitStep::Answer(r) = rules::commit(seen, false) {
                        return Ok(reply(tx, r));
                    }
                    return Ok(violation(tx, "no state"));
                };
                if rules::abort(seen) != AbortStep::FenceOut {
                    return Ok(violation(tx, "abort with no state"));
                }
                let aborted = TxState::first(tx, Phase::Aborted, req.deadline, req.began, now);
                match self.store.create(&aborted).await? {
                    Written::Done => return Ok(CompleteReply::Done),
                    Written::Lost(s) => {
                        found = s.map(|b| *b);
                        continue;
                    }
                }
            };
            let claimed = match (state.phase, decision) {
                (Phase::Confirming, Decision::Commit) | (Phase::Cancelling, Decision::Abort) => {
                    true
                }
                (Phase::Reserving, Decision::Abort) => true,
                (Phase::Reserving, Decision::Commit) => {
                    return Ok(violation(
                        tx,
                        "commit of a transaction that never voted yes",
                    ));
                }
                (Phase::Confirming, Decision::Abort) => {
                    return Ok(violation(tx, "abort of a transaction being confirmed"));
                }
                (Phase::Cancelling, Decision::Commit) => {
                    return Ok(violation(tx, "commit of a transaction being cancelled"));
                }
                _ => false,
            };
            if claimed && state.claim_live(now) {
                return Err(Error::Busy {
                    tx_id: tx.clone(),
                    phase: state.phase,
                    until: state.claimed_until.unwrap_or(now),
                });
            }
            if !claimed {
                let seen = Phase::seen(Some(state.phase));
                let apply = match decision {
                    Decision::Commit => match rules::commit(seen, false) {
                        CommitStep::Apply => true,
                        CommitStep::Answer(r) => return Ok(reply(tx, r)),
                    },
                    Decision::Abort => match rules::abort(seen) {
                        AbortStep::Release => true,
                        AbortStep::Answer(r) => return Ok(reply(tx, r)),
                        AbortStep::FenceOut => {
                            return Ok(violation(tx, "abort that would fence out a state"));
                        }
                    },
                };
                debug_assert!(apply);
            }
            // Claim the call (or take over an interrupted one), call the hook, record.
            let (calling, done, hook) = match decision {
                Decision::Commit => (Phase::Confirming, Phase::Confirmed, "confirm"),
                Decision::Abort => (Phase::Cancelling, Phase::Cancelled, "cancel"),
            };
            let until = now + self.claim_ms;
            let claim = state.moved(calling, Some(until), now);
            match self.store.replace(&claim).await? {
                Written::Done => {}
                Written::Lost(s) => {
                    found = s.map(|b| *b);
                    continue;
                }
            }
            self.call_hook(hook, &claim, until).await?;
            let now = self.clock.now_ms();
            return match self.store.replace(&claim.moved(done, None, now)).await? {
                Written::Done => Ok(CompleteReply::Done),
                Written::Lost(s) => {
                    // Our claim was taken over after it expired: the hook ran twice. Answer
                    // as the state now says.
                    warn!(tx_id = %tx, state = ?s, hook, "the call outlived its claim");
                    found = s.map(|b| *b);
                    continue;
                }
            };
        }
    }

    /// Calls `confirm` or `cancel` for the claimed `state`, within its claim.
    async fn call_hook(
        &self,
        hook: &'static str,
        state: &TxState,
        until: u64,
    ) -> Result<(), Error> {
        let stored = state.payload.clone().unwrap_or(Value::Null);
        let result = match (serde_json::from_value::<H::Payload>(stored), hook) {
            (Ok(payload), _) => {
                let call = Call {
                    tx_id: &state.tx_id,
                    payload: &payload,
                    deadline: until,
                };
                match hook {
                    "confirm" => self.within(until, hook, self.hooks.confirm(call)).await,
                    _ => self.within(until, hook, self.hooks.cancel(call)).await,
                }
            }
            // `reserve` never runs on a payload that does not read: nothing can be held.
            (Err(_), "cancel") => Ok(()),
            // Only if the service's payload type changed under a held reservation: the
            // decision stands, so the commit is retried until a version that reads it runs.
            (Err(e), _) => Err(HookError::new(format!(
                "the recorded payload no longer reads as this participant's payload: {e}"
            ))),
        };
        if let Err(source) = result {
            // End the claim now, so the next message calls it again at once.
            let now = self.clock.now_ms();
            let _ = self
                .store
                .replace(&state.moved(state.phase, Some(now), now))
                .await;
            return Err(Error::Hook {
                hook,
                tx_id: state.tx_id.clone(),
                source,
            });
        }
        Ok(())
    }

    /// Runs a hook until `until` (epoch ms, by the injected clock's reading now).
    async fn within<T>(
        &self,
        until: u64,
        hook: &'static str,
        call: impl Future<Output = Result<T, HookError>>,
    ) -> Result<T, HookError> {
        let left = until.saturating_sub(self.clock.now_ms());
        match tokio::time::timeout(Duration::from_millis(left), call).await {
            Ok(r) => r,
            Err(_) => Err(HookError::new(format!(
                "{hook} did not finish within {left} ms"
            ))),
        }
    }
}

fn yes() -> PrepareReply {
    PrepareReply {
        vote: Vote::yes(Mode::Exclusive),
        prune: None,
    }
}
