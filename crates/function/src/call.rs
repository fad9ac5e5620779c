//! A participant function's invocation, whatever answers it (the generic participant, or a
//! service on `twopc-participant-sdk`): the event read as a [`ParticipantCall`], the answer run
//! in the transaction's span, and a failure reported as a function error whose `errorType` is
//! an [`ErrorKind`] name (what the `lambda` transport may assume), never a panic.

use std::future::Future;

use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::Value;
use tracing::{Instrument, error, info};
use twopc_core::message::ParticipantCall;

use crate::errors::ErrorKind;
use crate::logs::tx_span;

/// A call that was not answered, classified.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CallError {
    /// What the caller may assume.
    pub kind: ErrorKind,
    /// What happened, with its causes.
    pub message: String,
}

impl CallError {
    /// `e` as a function error of `kind`, its cause chain in the message, each text once (SDK
    /// errors repeat their source's text in their own).
    pub fn new(kind: ErrorKind, e: &(dyn std::error::Error + 'static)) -> CallError {
        let mut message = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            let text = c.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            cause = c.source();
        }
        CallError { kind, message }
    }
}

impl From<CallError> for Diagnostic {
    fn from(e: CallError) -> Diagnostic {
        Diagnostic {
            error_type: e.kind.name().to_owned(),
            error_message: e.message,
        }
    }
}

/// Answers one invocation: `answer` is given the call and gives the reply as JSON, or an error
/// that `kind` classifies. A malformed event is `Invalid`; a reply that cannot be encoded is
/// `Fatal` (the call may have acted).
pub async fn answer_call<F, Fut, E>(
    event: LambdaEvent<Value>,
    answer: F,
    kind: impl Fn(&E) -> ErrorKind,
) -> Result<Value, CallError>
where
    F: FnOnce(ParticipantCall) -> Fut,
    Fut: Future<Output = Result<Result<Value, serde_json::Error>, E>>,
    E: std::error::Error + 'static,
{
    let (payload, ctx) = event.into_parts();
    let call = ParticipantCall::from_json(payload).map_err(|m| {
        error!(request_id = %ctx.request_id, problem = %m, "not a participant call");
        CallError {
            kind: ErrorKind::Invalid,
            message: format!(
                "the event is not a participant call ({m}); expected {{\"action\": \"prepare\"|\"commit\"|\"abort\"|\"inquire\", \"request\": {{...}}}}"
            ),
        }
    })?;
    let tx = match &call {
        ParticipantCall::Prepare(r) => r.tx_id.clone(),
        ParticipantCall::Commit(r) | ParticipantCall::Abort(r) => r.tx_id.clone(),
        ParticipantCall::Inquire(r) => r.tx_id.clone(),
    };
    let action = call.action();
    async {
        // Boxed: the answer's future is deep (the SDK's, DynamoDB's), and the function's own
        // future would otherwise hold its whole layout (rustc's query depth limit).
        match Box::pin(answer(call)).await {
            Ok(Ok(v)) => {
                info!(action, reply = %v, "answered");
                Ok(v)
            }
            Ok(Err(e)) => Err(CallError {
                kind: ErrorKind::Fatal,
                message: format!("the {action} reply could not be encoded: {e}"),
            }),
            Err(e) => {
                error!(action, error = ?e, "call failed");
                Err(CallError::new(kind(&e), &e))
            }
        }
    }
    .instrument(tx_span(Some(&tx), &ctx.request_id))
    .await
}
