//! The driver: prepare (`prepare.rs`), commit and abort (`finish.rs`) as the coordinator sends
//! them, and its inquiries (here). Each reads the transaction's state, asks a rule (the core's
//! `twopc_core::rules` for the protocol's answers), claims the hook call with a conditional
//! write, calls the hook, and records its result with another. The resolution of states whose
//! coordinator went silent is in `resolve.rs`.

mod finish;
mod prepare;
mod resolve;

pub use resolve::{Resolved, SWEEP_LIMIT};

use std::time::Duration;

use tracing::info;
use twopc_core::decimal::canonical_json;
use twopc_core::ids::TxId;
use twopc_core::message::{InquireReply, InquireRequest};
use twopc_core::ports::{Clock, PortError, TxLog};
use twopc_core::rules::Inquiry;

use crate::hooks::{HookError, Hooks};
use crate::state::{InquiryPlan, Phase, TxState};
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

/// The state under a transaction's id as the transaction that began at `began` reads it. A
/// transaction is its id and its `began`: a state of another `began` is a former
/// transaction's under the same id (an idempotency key used again after its record expired),
/// none of this one's; its first write replaces it ([`SdkParticipant::create_over`]).
pub(crate) struct Found {
    /// The transaction's own state.
    pub(crate) own: Option<TxState>,
    /// A former transaction's.
    pub(crate) former: Option<TxState>,
}

impl Found {
    /// `found` as the transaction that began at `began` reads it (`None`: the sweep, which
    /// reads the state as it is).
    pub(crate) fn of(found: Option<TxState>, began: Option<u64>) -> Found {
        match (found, began) {
            (Some(s), Some(b)) if s.began != b => Found {
                own: None,
                former: Some(s),
            },
            (own, _) => Found { own, former: None },
        }
    }
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

    /// Inquiry (the staged commit's recovery, `rules::inquire` over the phases,
    /// [`Phase::inquire`]): `held` once `reserve` said yes and it was recorded, `committed`
    /// once committed, `prevented` once refused or aborted; otherwise `open`, or, with
    /// `prevent`, prevented first by one conditional write: no state is recorded `Aborted`
    /// (its prepare is then refused), a `reserve` still deciding has its claim ended (its
    /// result can then never land, and what it holds is cancelled). Calls no hook.
    pub async fn inquire(&self, req: &InquireRequest) -> Result<InquireReply, Error> {
        let tx = &req.tx_id;
        let mut found = Found::of(self.store.get(tx).await?, Some(req.began));
        for _ in 0..6 {
            let now = self.clock.now_ms();
            let own = found.own.as_ref();
            let other_part = own.is_some_and(|s| holds_another_payload(s, req));
            let written = match Phase::inquire(own.map(|s| s.phase), req.prevent, other_part) {
                InquiryPlan::Answer(inquiry) => return Ok(InquireReply { inquiry }),
                InquiryPlan::RecordAborted => {
                    let mut aborted =
                        TxState::first(tx, Phase::Aborted, req.deadline, req.began, now);
                    self.create_over(&mut aborted, found.former.as_ref())
                        .await?
                }
                InquiryPlan::EndClaim => match own {
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
                Written::Lost(s) => found = Found::of(s.map(|b| *b), Some(req.began)),
            }
        }
        Err(Error::Store(PortError::Retryable {
            context: format!("inquiry about transaction {tx}"),
            source: "its state kept changing under the inquiry".into(),
        }))
    }

    /// Writes `state`, a transaction's first: created where its id holds none, or written over
    /// `former`, a former transaction's under the same id, once that one is finished (its
    /// revision then follows the former's). An unfinished former state, which the protocol
    /// never leaves behind (its record ended only once this participant acknowledged), is
    /// left for the sweep to report: the step fails, to be retried. A former state that began
    /// later is a successor's: the message is refused, nothing written.
    pub(crate) async fn create_over(
        &self,
        state: &mut TxState,
        former: Option<&TxState>,
    ) -> Result<Written, Error> {
        let Some(former) = former else {
            return Ok(self.store.create(state).await?);
        };
        if former.began > state.began {
            // A successor's state: this message is a late one of a transaction long ended.
            return Err(Error::Store(PortError::Invalid {
                context: format!("transaction {}", state.tx_id),
                message: format!(
                    "a later transaction under this id (began {}) replaced this one's state (began {})",
                    former.began, state.began
                ),
            }));
        }
        if !former.phase.is_terminal() {
            return Err(Error::Store(PortError::Retryable {
                context: format!("transaction {}", state.tx_id),
                source: format!(
                    "an unfinished state ({:?}) of a former transaction under this id (began {}) stands here",
                    former.phase, former.began
                )
                .into(),
            }));
        }
        info!(tx_id = %state.tx_id, former_began = former.began,
            "state of a former transaction under this id (its idempotency key used again after its record expired): replaced");
        state.revision = former.revision + 1;
        Ok(self.store.replace(state).await?)
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

/// Whether `state` holds another payload than the one `req` asks about (by value: numbers as
/// DynamoDB reads them). Not compared where either has none (an older coordinator sends none).
fn holds_another_payload(state: &TxState, req: &InquireRequest) -> bool {
    match (state.payload.as_ref(), req.payload.as_ref()) {
        (Some(held), Some(asked)) => canonical_json(held) != canonical_json(asked),
        _ => false,
    }
}
