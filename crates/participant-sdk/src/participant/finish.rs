//! Commit and abort (and the sweep's resolutions): the transaction's state read, the rule
//! asked, the `confirm` or `cancel` call claimed with a conditional write, the hook called, and
//! its end recorded with another write.

use serde_json::Value;
use tracing::{error, warn};
use twopc_core::ids::TxId;
use twopc_core::message::{CompleteReply, CompleteRequest};
use twopc_core::ports::{Clock, TxLog};
use twopc_core::rules::{self, AbortStep, CommitStep, Reply};
use twopc_core::status::Decision;

use super::{Error, Found, SdkParticipant};
use crate::hooks::{Call, HookError, Hooks};
use crate::state::{Phase, TxState};
use crate::store::{StateStore, Written};

/// Where one attempt at finishing left the transaction.
enum Step {
    /// Answered.
    Answer(CompleteReply),
    /// A write lost to another: try again from the state it found.
    Again(Option<TxState>),
}

impl<H: Hooks, S: StateStore, L: TxLog, C: Clock> SdkParticipant<H, S, L, C> {
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
    pub(super) async fn finish(
        &self,
        tx: &TxId,
        decision: Decision,
        req: Option<&CompleteRequest>,
    ) -> Result<CompleteReply, Error> {
        let began = req.map(|r| r.began);
        let mut found = self.store.get(tx).await?;
        loop {
            let now = self.clock.now_ms();
            let Found { own, former } = Found::of(found, began);
            let step = match own {
                None => {
                    self.finish_unseen(tx, decision, req, former.as_ref(), now)
                        .await?
                }
                Some(state) => match answer_found(tx, &state, decision, now)? {
                    Some(answer) => Step::Answer(answer),
                    None => self.call_and_record(&state, decision, now).await?,
                },
            };
            match step {
                Step::Answer(reply) => return Ok(reply),
                Step::Again(state) => found = state,
            }
        }
    }

    /// No state of its own (`former`: a former transaction's under its id): the rules say fence
    /// out (an abort, recorded so its prepare is refused) or violation (a commit).
    async fn finish_unseen(
        &self,
        tx: &TxId,
        decision: Decision,
        req: Option<&CompleteRequest>,
        former: Option<&TxState>,
        now: u64,
    ) -> Result<Step, Error> {
        let seen = Phase::seen(None);
        let Some(req) = req.filter(|_| decision == Decision::Abort) else {
            if let CommitStep::Answer(r) = rules::commit(seen, false) {
                return Ok(Step::Answer(reply(tx, r)));
            }
            return Ok(Step::Answer(violation(tx, "no state")));
        };
        if rules::abort(seen) != AbortStep::FenceOut {
            return Ok(Step::Answer(violation(tx, "abort with no state")));
        }
        let mut aborted = TxState::first(tx, Phase::Aborted, req.deadline, req.began, now);
        Ok(match self.create_over(&mut aborted, former).await? {
            Written::Done => Step::Answer(CompleteReply::Done),
            Written::Lost(s) => Step::Again(s.map(|b| *b)),
        })
    }

    /// Claims the call (or takes over an interrupted one), calls the hook, records its end.
    async fn call_and_record(
        &self,
        state: &TxState,
        decision: Decision,
        now: u64,
    ) -> Result<Step, Error> {
        let (calling, done, hook) = match decision {
            Decision::Commit => (Phase::Confirming, Phase::Confirmed, "confirm"),
            Decision::Abort => (Phase::Cancelling, Phase::Cancelled, "cancel"),
        };
        let until = now + self.claim_ms;
        let claim = state.moved(calling, Some(until), now);
        if let Written::Lost(s) = self.store.replace(&claim).await? {
            return Ok(Step::Again(s.map(|b| *b)));
        }
        self.call_hook(hook, &claim, until).await?;
        let now = self.clock.now_ms();
        Ok(
            match self.store.replace(&claim.moved(done, None, now)).await? {
                Written::Done => Step::Answer(CompleteReply::Done),
                Written::Lost(s) => {
                    // Our claim was taken over after it expired: the hook ran twice. Answer as the
                    // state now says.
                    warn!(tx_id = %state.tx_id, state = ?s, hook, "the call outlived its claim");
                    Step::Again(s.map(|b| *b))
                }
            },
        )
    }

    /// Calls `confirm` or `cancel` for the claimed `state`, within its claim.
    pub(super) async fn call_hook(
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
                    began: state.began,
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
}

/// What the state found answers `decision` (`None`: claim the call); a live claim of the same
/// call is busy.
fn answer_found(
    tx: &TxId,
    state: &TxState,
    decision: Decision,
    now: u64,
) -> Result<Option<CompleteReply>, Error> {
    let claimed = match (state.phase, decision) {
        (Phase::Confirming, Decision::Commit)
        | (Phase::Cancelling, Decision::Abort)
        | (Phase::Reserving, Decision::Abort) => true,
        (Phase::Reserving, Decision::Commit) => {
            let what = "commit of a transaction that never voted yes";
            return Ok(Some(violation(tx, what)));
        }
        (Phase::Confirming, Decision::Abort) => {
            let what = "abort of a transaction being confirmed";
            return Ok(Some(violation(tx, what)));
        }
        (Phase::Cancelling, Decision::Commit) => {
            let what = "commit of a transaction being cancelled";
            return Ok(Some(violation(tx, what)));
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
    if claimed {
        return Ok(None);
    }
    let seen = Phase::seen(Some(state.phase));
    Ok(match decision {
        // A state is one transaction's (a former one's is `Found::former`): never `Retire`.
        Decision::Commit => match rules::commit(seen, false) {
            CommitStep::Apply | CommitStep::Retire => None,
            CommitStep::Answer(r) => Some(reply(tx, r)),
        },
        Decision::Abort => match rules::abort(seen) {
            AbortStep::Release | AbortStep::Retire => None,
            AbortStep::Answer(r) => Some(reply(tx, r)),
            AbortStep::FenceOut => Some(violation(tx, "abort that would fence out a state")),
        },
    })
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
