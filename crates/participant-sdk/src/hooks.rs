//! What a service implements: its business hooks, and what each is given and may answer.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;

use serde::de::DeserializeOwned;
use twopc_core::ids::TxId;
use twopc_core::record::VoteReason;

/// One hook call: the transaction, the payload its prepare carried (read as the service's
/// [`Hooks::Payload`]), and when the call must be done by (epoch ms).
pub struct Call<'a, P> {
    /// The transaction's id.
    pub tx_id: &'a TxId,
    /// When the transaction began (epoch ms, its record's `createdAt`). A transaction is its
    /// id and this: an idempotency key used again after its 7-day window names a new
    /// transaction under the same id, with a later `began`.
    pub began: u64,
    /// The participant's payload, as the coordinator sent it, read as the service's type.
    pub payload: &'a P,
    /// Finish by then: for `reserve`, the transaction's deadline; for `confirm` and `cancel`,
    /// the end of the call's claim (past it, the call counts as interrupted and may be made
    /// again).
    pub deadline: u64,
}

// By hand: derived, they would ask `P: Clone`/`Copy`, and a call only holds a reference to it.
impl<P> Clone for Call<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Call<'_, P> {}

impl<P: fmt::Debug> fmt::Debug for Call<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("tx_id", self.tx_id)
            .field("began", &self.began)
            .field("payload", self.payload)
            .field("deadline", &self.deadline)
            .finish()
    }
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
/// hooks must be idempotent per transaction for that case: per its id *and* its `began`
/// ([`Call::began`]: a key used again after its window reuses the id), e.g. both in the
/// gateway's idempotency key.
///
/// The payload a transaction gives this service is read as [`Hooks::Payload`] before
/// `reserve`: one that does not read is refused with the `invalid` vote, its reason serde's
/// (which field, what was expected), and no hook is called.
///
/// ```no_run
/// use twopc_participant_sdk::{Call, Decimal, HookError, Hooks, Reservation};
///
/// #[derive(serde::Deserialize)]
/// #[serde(deny_unknown_fields)]
/// struct Order {
///     sku: String,
///     amount: Decimal, // exact: read from the JSON number's text
/// }
///
/// struct Stock;
///
/// impl Hooks for Stock {
///     type Payload = Order;
///
///     async fn reserve(&self, call: Call<'_, Order>) -> Result<Reservation, HookError> {
///         if call.payload.amount.is_negative() {
///             return Ok(Reservation::invalid("\"amount\" must not be negative"));
///         }
///         // Hold call.payload.sku for (call.tx_id, call.began): idempotent per transaction ...
///         Ok(Reservation::Held)
///     }
///
///     async fn confirm(&self, call: Call<'_, Order>) -> Result<(), HookError> {
///         // Make the hold for (call.tx_id, call.began) permanent ...
///         Ok(())
///     }
///
///     async fn cancel(&self, call: Call<'_, Order>) -> Result<(), HookError> {
///         // Release the hold for call.tx_id, if there is one ...
///         Ok(())
///     }
/// }
/// ```
pub trait Hooks: Send + Sync {
    /// What a transaction asks of this service: its prepare's `payload`, deserialized by the
    /// library (`serde_json::Value` takes any JSON as it came).
    type Payload: DeserializeOwned + Send + Sync;

    /// Hold what the payload asks for, or refuse (nothing held).
    fn reserve(
        &self,
        call: Call<'_, Self::Payload>,
    ) -> impl Future<Output = Result<Reservation, HookError>> + Send;

    /// Make the held reservation permanent. Must succeed eventually: the decision is taken.
    fn confirm(
        &self,
        call: Call<'_, Self::Payload>,
    ) -> impl Future<Output = Result<(), HookError>> + Send;

    /// Release the held reservation, or do nothing if `reserve` never held it (it failed or
    /// was interrupted).
    fn cancel(
        &self,
        call: Call<'_, Self::Payload>,
    ) -> impl Future<Output = Result<(), HookError>> + Send;
}
