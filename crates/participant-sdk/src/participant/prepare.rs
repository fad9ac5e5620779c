//! Prepare: the transaction's state read, the rule asked, the `reserve` call claimed with a
//! conditional write, the hook called once, and its vote recorded with another write.

use serde_json::Value;
use tracing::warn;
use twopc_core::decimal::canonical_json;
use twopc_core::message::{CompleteReply, PrepareReply, PrepareRequest};
use twopc_core::op::Mode;
use twopc_core::ports::{Clock, TxLog};
use twopc_core::record::{Vote, VoteReason};
use twopc_core::rules::{self, PrepareRefusal, PrepareStep, Seen};
use twopc_core::status::Decision;

use super::{Error, Found, SdkParticipant};
use crate::hooks::{Call, HookError, Hooks, Reservation};
use crate::state::{Phase, ReserveRefusal, TxState};
use crate::store::{StateStore, Written};

impl<H: Hooks, S: StateStore, L: TxLog, C: Clock> SdkParticipant<H, S, L, C> {
    /// Prepare: `reserve` once, yes or no; a duplicate gets the same answer without a call; a
    /// prepare after the transaction ended here (or was aborted before it arrived) is refused.
    pub async fn prepare(&self, req: &PrepareRequest) -> Result<PrepareReply, Error> {
        let now = self.clock.now_ms();
        let payload = match admissible(req, now) {
            Ok(payload) => payload,
            Err(refused) => return Ok(refused),
        };
        let claim = match self.claim_reserve(req, payload, now).await? {
            Ok(claim) => claim,
            Err(answer) => return Ok(answer),
        };
        let outcome = self.reserve(req, payload).await;
        let (next, vote) = self.vote_of(&claim, outcome).await?;
        self.record_vote(req, &claim, &next, vote).await
    }

    /// Claims the `reserve` call with a conditional write, or answers from the state found
    /// (`Err`: the answer, no call to make).
    async fn claim_reserve(
        &self,
        req: &PrepareRequest,
        payload: &Value,
        now: u64,
    ) -> Result<Result<TxState, PrepareReply>, Error> {
        let tx = &req.tx_id;
        let mut found = Found::of(self.store.get(tx).await?, Some(req.began));
        loop {
            if let Some(answer) = answer_found(found.own.as_ref(), payload, now) {
                return Ok(Err(answer));
            }
            let mut claim = TxState::first(tx, Phase::Reserving, req.deadline, req.began, now);
            claim.payload = Some(payload.clone());
            claim.claimed_until = Some(req.deadline);
            match self.create_over(&mut claim, found.former.as_ref()).await? {
                Written::Done => return Ok(Ok(claim)),
                Written::Lost(s) => found = Found::of(s.map(|b| *b), Some(req.began)),
            }
        }
    }

    /// Calls `reserve` within the transaction's deadline. A payload the service's type does not
    /// read is refused like a `reserve` that said `invalid`, and recorded so: no hook is
    /// called, a duplicate gets the same answer.
    async fn reserve(
        &self,
        req: &PrepareRequest,
        payload: &Value,
    ) -> Result<Reservation, HookError> {
        match serde_json::from_value::<H::Payload>(payload.clone()) {
            Err(e) => Ok(Reservation::invalid(format!(
                "the payload is not one this participant reads: {e}"
            ))),
            Ok(payload) => {
                let call = Call {
                    tx_id: &req.tx_id,
                    began: req.began,
                    payload: &payload,
                    deadline: req.deadline,
                };
                self.within(req.deadline, "reserve", self.hooks.reserve(call))
                    .await
            }
        }
    }

    /// The state to record after `reserve` and the vote it gives; a failed call ends the claim
    /// at once (its outcome unknown, the abort then cancels without waiting) and is the error.
    async fn vote_of(
        &self,
        claim: &TxState,
        outcome: Result<Reservation, HookError>,
    ) -> Result<(TxState, PrepareReply), Error> {
        let now = self.clock.now_ms();
        match outcome {
            Ok(Reservation::Held) => Ok((claim.moved(Phase::Reserved, None, now), yes())),
            Ok(Reservation::Refused { reason, message }) => {
                let mut next = claim.moved(Phase::Refused, None, now);
                next.refusal = Some(ReserveRefusal {
                    reason,
                    message: message.clone(),
                });
                Ok((next, PrepareReply::no(reason, message)))
            }
            Err(source) => {
                let tx = &claim.tx_id;
                let ended = claim.moved(Phase::Reserving, Some(now), now);
                if let Written::Lost(s) = self.store.replace(&ended).await? {
                    warn!(tx_id = %tx, state = ?s, "the failed reserve's state moved meanwhile");
                }
                Err(Error::Hook {
                    hook: "reserve",
                    tx_id: tx.clone(),
                    source,
                })
            }
        }
    }

    /// Records `next` over the claim and answers `vote`; if the claim was ended under the call,
    /// releases what it held and refuses.
    async fn record_vote(
        &self,
        req: &PrepareRequest,
        claim: &TxState,
        next: &TxState,
        vote: PrepareReply,
    ) -> Result<PrepareReply, Error> {
        let Written::Lost(s) = self.store.replace(next).await? else {
            return Ok(vote);
        };
        // The claim was ended under the call: by an inquiry's prevent (the staged commit's
        // recovery), or by an abort that found it expired. Either way the transaction is being
        // cancelled, and what the call held must go too.
        warn!(tx_id = %req.tx_id, state = ?s, "reserve finished after its claim was ended");
        if vote.vote.is_yes() {
            self.cancel_late_hold(claim, s.map(|b| *b)).await?;
        }
        if self.clock.now_ms() < req.deadline {
            let message = "this transaction was prevented here while its reserve ran";
            return Ok(PrepareReply::no(VoteReason::Fenced, message));
        }
        let message = "the reserve finished after the transaction's deadline";
        Ok(PrepareReply::no(VoteReason::Expired, message))
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
}

/// The payload of a prepare that may be held: refused past its deadline, or without one.
fn admissible(req: &PrepareRequest, now: u64) -> Result<&Value, PrepareReply> {
    if now >= req.deadline {
        let late = now - req.deadline;
        let message = format!("the transaction's deadline passed {late} ms ago");
        return Err(PrepareReply::no(VoteReason::Expired, message));
    }
    req.payload.as_ref().ok_or_else(|| {
        let message = "no payload: this participant takes a payload, not an operation";
        PrepareReply::no(VoteReason::Invalid, message)
    })
}

/// What the state `found` answers a prepare of `payload` (`None`: no state, claim the call).
fn answer_found(found: Option<&TxState>, payload: &Value, now: u64) -> Option<PrepareReply> {
    match found {
        Some(s) if s.phase == Phase::Refused => {
            let r = s.refusal.clone().unwrap_or(ReserveRefusal {
                reason: VoteReason::Invalid,
                message: String::new(),
            });
            return Some(PrepareReply::no(r.reason, r.message));
        }
        Some(s) if s.phase == Phase::Reserving => {
            let message = if s.claim_live(now) {
                "a prepare of this transaction is under way"
            } else {
                "a prepare of this transaction was interrupted"
            };
            return Some(PrepareReply::no(VoteReason::Conflict, message));
        }
        _ => {}
    }
    // A duplicate of the prepare that holds is a retry; one with another payload is not (its
    // numbers compared by value: the state store gives them back so).
    let other_op = found
        .and_then(|s| s.payload.as_ref())
        .is_some_and(|held| canonical_json(held) != canonical_json(payload));
    let seen = Seen {
        other_op,
        ..Phase::seen(found.map(|s| s.phase))
    };
    match rules::prepare(seen, false) {
        PrepareStep::Lock if found.is_some() => Some(yes()),
        PrepareStep::Lock => None,
        PrepareStep::Refuse(PrepareRefusal::Fenced(outcome)) => {
            let message = format!("this transaction already ended here ({outcome:?})");
            Some(PrepareReply::no(VoteReason::Fenced, message))
        }
        PrepareStep::Refuse(PrepareRefusal::OtherOperation) => {
            let message = "this transaction holds this participant already with another payload: refused, what it holds keeps its payload";
            Some(PrepareReply::no(VoteReason::Invalid, message))
        }
        PrepareStep::Refuse(other) => {
            let message = format!("refused: {other:?}");
            Some(PrepareReply::no(VoteReason::Conflict, message))
        }
    }
}

fn yes() -> PrepareReply {
    PrepareReply {
        vote: Vote::yes(Mode::Exclusive),
        prune: None,
    }
}
