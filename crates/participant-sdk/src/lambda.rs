//! The Lambda adapter (feature `lambda`): an [`SdkParticipant`] as a function the coordinator's
//! `lambda` transport invokes, taking the payload the generic participant's function takes
//! (`{"action": "prepare"|"commit"|"abort"|"inquire", "request": {...}}`) and answering its
//! reply.
//!
//! A failure is a function error whose `errorType` is one of [`ErrorKind`]'s names, as the
//! generic participant's are, so the transport reads both alike:
//!
//! | error | `errorType` | the coordinator may assume |
//! | --- | --- | --- |
//! | a copy's hook call is under way ([`Error::Busy`]) | `Retryable` | nothing done: send it again later |
//! | the state store failed ([`Error::Store`]) | that failure's kind | as the generic participant's store |
//! | a hook failed ([`Error::Hook`]) | `Undetermined` | it may have acted: the next message calls it again |
//! | not a participant call ([`Error::Invalid`]) | `Invalid` | nothing done; repeating will not help |
//! | the reply could not be encoded | `Fatal` | it may have acted |
//!
//! Any function error leaves a commit or abort unacknowledged, so the sweeper sends it again;
//! a prepare that failed counts as a `no` vote.
//!
//! A service's `main` wires its hooks, state table and the transactions table once, then hands
//! the participant over (its sweep runs elsewhere, e.g. a scheduled function calling
//! [`SdkParticipant::sweep`]):
//!
//! ```no_run
//! # async fn wire(hooks: impl twopc_participant_sdk::Hooks + 'static)
//! #     -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use twopc_participant_sdk::SdkParticipant;
//!
//! twopc_participant_sdk::init_tracing();
//! let participant = SdkParticipant::builder(hooks).dynamodb_from_env().await?.build();
//! twopc_participant_sdk::lambda::run(participant).await
//! # }
//! ```

use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;
use twopc_core::message::ParticipantCall;
use twopc_core::ports::{Clock, TxLog};
pub use twopc_function::call::CallError;
use twopc_function::call::answer_call;
pub use twopc_function::errors::ErrorKind;

use crate::hooks::Hooks;
use crate::participant::{Error, SdkParticipant};
use crate::store::StateStore;

/// What the caller of a call that failed with `e` may assume.
pub fn kind(e: &Error) -> ErrorKind {
    match e {
        Error::Busy { .. } => ErrorKind::Retryable,
        Error::Store(e) => ErrorKind::of(e),
        Error::Hook { .. } => ErrorKind::Undetermined,
        Error::Invalid(_) => ErrorKind::Invalid,
    }
}

/// Answers one invocation.
pub async fn handle<H, S, L, C>(
    participant: &SdkParticipant<H, S, L, C>,
    event: LambdaEvent<Value>,
) -> Result<Value, CallError>
where
    H: Hooks,
    S: StateStore,
    L: TxLog,
    C: Clock,
{
    let answer = |call: ParticipantCall| async move {
        match &call {
            ParticipantCall::Prepare(r) => participant.prepare(r).await.map(serde_json::to_value),
            ParticipantCall::Commit(r) => participant.commit(r).await.map(serde_json::to_value),
            ParticipantCall::Abort(r) => participant.abort(r).await.map(serde_json::to_value),
            ParticipantCall::Inquire(r) => participant.inquire(r).await.map(serde_json::to_value),
        }
    };
    answer_call(event, answer, kind).await
}

/// Serves invocations with `participant` until the runtime stops.
pub async fn run<H, S, L, C>(
    participant: SdkParticipant<H, S, L, C>,
) -> Result<(), lambda_runtime::Error>
where
    H: Hooks,
    S: StateStore,
    L: TxLog,
    C: Clock,
{
    let participant = &participant;
    lambda_runtime::run(service_fn(move |event| handle(participant, event))).await
}
