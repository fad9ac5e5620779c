//! What a service implements: its business hooks, and what each is given and may answer.

use std::error::Error as StdError;
use std::future::Future;

use serde_json::Value;
use twopc_core::ids::TxId;
use twopc_core::record::VoteReason;

/// One hook call: the transaction, the payload its prepare carried, and when the call must be
/// done by (epoch ms).
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The transaction.
    pub tx_id: &'a TxId,
    /// The participant's payload, as the coordinator sent it (opaque to the library).
    pub payload: &'a Value,
    /// Finish by then: for `reserve`, the transaction's deadline; for `confirm` and `cancel`,
    /// the end of the call's claim (past it, the call counts as interrupted and may be made
    /// again).
    pub deadline: u64,
}

/// What `reserve` decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// The service holds what the payload asks for until `confirm` or `cancel`.
    Held,
    /// Refused, nothing held: a `no` vote with this reason.
    Refused {
        /// Why (`invalid` for a payload the service cannot read, `condition` for a business
        /// rule, `conflict` for something held by someone else, `notFound`).
        reason: VoteReason,
        /// For people.
        message: String,
    },
}

impl Reservation {
    /// Refused: the payload is not one the service understands.
    pub fn invalid(message: impl Into<String>) -> Reservation {
        Reservation::Refused {
            reason: VoteReason::Invalid,
            message: message.into(),
        }
    }

    /// Refused: a business rule does not hold (a card declined, stock short).
    pub fn condition(message: impl Into<String>) -> Reservation {
        Reservation::Refused {
            reason: VoteReason::Condition,
            message: message.into(),
        }
    }
}

/// A hook failed without deciding anything: whether it acted is unknown. The library treats it
/// like an interrupted call: `reserve`'s transaction is refused and later cancelled (so
/// `cancel` must accept a reservation that never happened); `confirm` and `cancel` are called
/// again by the next commit or abort.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct HookError {
    /// What failed.
    pub message: String,
    /// Why.
    #[source]
    pub source: Option<Box<dyn StdError + Send + Sync>>,
}

impl HookError {
    /// A failure with a message only.
    pub fn new(message: impl Into<String>) -> HookError {
        HookError {
            message: message.into(),
            source: None,
        }
    }
}

/// A service's business logic, called by the library, never by the protocol directly.
///
/// The library calls each hook at most once per transaction and outcome: duplicated and late
/// messages never reach a hook. A hook is called again only when an earlier call of it failed
/// or was interrupted (a crash, a call past its claim) before its result was recorded, so the
/// hooks must be idempotent per transaction id for that case (e.g. the transaction id as the
/// gateway's idempotency key).
pub trait Hooks: Send + Sync {
    /// Validate the payload and hold what it asks for, or refuse (nothing held).
    fn reserve(
        &self,
        call: Call<'_>,
    ) -> impl Future<Output = Result<Reservation, HookError>> + Send;

    /// Make the held reservation permanent. Must succeed eventually: the decision is taken.
    fn confirm(&self, call: Call<'_>) -> impl Future<Output = Result<(), HookError>> + Send;

    /// Release the held reservation, or do nothing if `reserve` never held it (it failed or
    /// was interrupted).
    fn cancel(&self, call: Call<'_>) -> impl Future<Output = Result<(), HookError>> + Send;
}
