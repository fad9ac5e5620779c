//! The `lambda` transport: `Invoke` (`RequestResponse`) of a participant function by name or
//! ARN, with the participant JSON ([`ParticipantCall`]) as payload and its reply as answer,
//! and the caller's X-Ray trace header ([`crate::trace`]), so the participant's invocation is
//! part of the transaction's trace.
//!
//! Failures become [`TransportError`]s with `undetermined` set when the participant may have
//! acted: after a timeout, a response that cannot be read, a 5xx, or a function error that is
//! not one of the participant's own refusals (see `twopc_function::errors`). A request Lambda refused
//! (4xx: throttled, no such function, access denied, payload too large) or that never left
//! (connection refused, bad input) did nothing.

use std::error::Error as StdError;
use std::time::Duration;

use aws_sdk_lambda::Client;
use aws_sdk_lambda::config::timeout::TimeoutConfig;
use aws_sdk_lambda::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_lambda::operation::invoke::{InvokeError, InvokeOutput};
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use serde::de::DeserializeOwned;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, ParticipantCall, PrepareReply,
    PrepareRequest,
};
use twopc_core::ports::{Transport, TransportError};
use twopc_core::record::Target;

use twopc_function::errors::FunctionError;

/// Invokes participant functions.
#[derive(Clone, Debug)]
pub struct LambdaTransport {
    client: Client,
    timeout: Duration,
}

impl LambdaTransport {
    /// Invokes through `client`; each call (retries included) is abandoned after `timeout`.
    pub fn new(client: Client, timeout: Duration) -> Self {
        LambdaTransport { client, timeout }
    }

    /// Sends one call to `function` and reads the reply.
    pub async fn call<R: DeserializeOwned>(
        &self,
        function: &str,
        call: &ParticipantCall,
    ) -> Result<R, TransportError> {
        let target = format!("lambda:{function}");
        let payload = serde_json::to_vec(&call.to_json()).map_err(|e| TransportError {
            target: target.clone(),
            message: format!("cannot encode the {} call: {e}", call.action()),
            undetermined: false,
            source: None,
        })?;
        match self.invoke(function, payload).await {
            Ok(out) => answer(target, call, &out),
            Err(e) => Err(sdk_error(target, call.action(), e)),
        }
    }

    /// One `Invoke` (`RequestResponse`) within the timeout, carrying the trace header.
    async fn invoke(
        &self,
        function: &str,
        payload: Vec<u8>,
    ) -> Result<InvokeOutput, SdkError<InvokeError>> {
        let timeouts = TimeoutConfig::builder()
            .operation_timeout(self.timeout)
            .build();
        let trace = crate::trace::current();
        self.client
            .invoke()
            .function_name(function)
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(payload))
            .customize()
            .config_override(aws_sdk_lambda::config::Builder::default().timeout_config(timeouts))
            .mutate_request(move |request| {
                if let Some(trace) = &trace {
                    // A valid value (trace::current checks); on the odd refusal, no header.
                    let _ = request
                        .headers_mut()
                        .try_insert(crate::trace::HEADER, trace.clone());
                }
            })
            .send()
            .await
    }
}

/// The reply an invocation brought, or why not: a function error (undetermined unless it is
/// one of the participant's own refusals), a status that is not 2xx, or a reply that does not
/// read (the function ran: it may hide a write that happened).
fn answer<R: DeserializeOwned>(
    target: String,
    call: &ParticipantCall,
    out: &InvokeOutput,
) -> Result<R, TransportError> {
    let fail = |message: String, undetermined: bool| TransportError {
        target: target.clone(),
        message,
        undetermined,
        source: None,
    };
    let body = out.payload().map(Blob::as_ref).unwrap_or_default();
    if let Some(kind) = out.function_error() {
        let (message, undetermined) = match FunctionError::parse(body) {
            Some(f) => (
                format!(
                    "{} failed ({kind}): {}: {}",
                    call.action(),
                    f.error_type,
                    f.error_message
                ),
                f.may_have_acted(),
            ),
            None => (
                format!("{} failed ({kind}) with no error payload", call.action()),
                true,
            ),
        };
        return Err(fail(message, undetermined));
    }
    if !(200..300).contains(&out.status_code()) {
        return Err(fail(
            format!(
                "{} answered with status {}",
                call.action(),
                out.status_code()
            ),
            true,
        ));
    }
    serde_json::from_slice(body).map_err(|e| {
        fail(
            format!("{} answered with an unreadable reply: {e}", call.action()),
            true,
        )
    })
}

/// The innermost cause's text: what went wrong, without the SDK's wrapping.
fn root_cause(e: &(dyn StdError + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

fn refused_connection(e: &(dyn StdError + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cur = err.source();
    }
    false
}

fn sdk_error(target: String, action: &str, e: SdkError<InvokeError>) -> TransportError {
    let (message, undetermined) = match &e {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let body = service.raw().body().bytes().unwrap_or_default();
            match (status, service.err().code(), FunctionError::parse(body)) {
                // An emulator (cargo lambda watch) answers a function error with a bare 500 and
                // the function's error payload, where Lambda answers 200 + X-Amz-Function-Error.
                (500.., None, Some(f)) => (
                    format!("{action} failed: {}: {}", f.error_type, f.error_message),
                    f.may_have_acted(),
                ),
                (_, code, _) => (
                    format!(
                        "Lambda answered {status} {}: {}",
                        code.unwrap_or("(no error code)"),
                        service.err().message().unwrap_or_default()
                    ),
                    // 5xx: Lambda's own failure, maybe after the function ran. 4xx: refused.
                    status >= 500,
                ),
            }
        }
        SdkError::TimeoutError(_) => (format!("{action} timed out"), true),
        SdkError::DispatchFailure(d) => {
            let before_sending = d.is_user() || refused_connection(&e);
            (
                format!("could not reach Lambda: {}", root_cause(&e)),
                !before_sending,
            )
        }
        SdkError::ConstructionFailure(_) => (
            format!("could not build the request: {}", root_cause(&e)),
            false,
        ),
        SdkError::ResponseError(_) => (
            format!("Lambda's answer could not be read: {}", root_cause(&e)),
            true,
        ),
        _ => (format!("invoke failed: {}", root_cause(&e)), true),
    };
    TransportError {
        target,
        message,
        undetermined,
        source: Some(Box::new(e)),
    }
}

fn function(target: &Target) -> Result<&str, TransportError> {
    match target {
        Target::Lambda { function } => Ok(function),
        other => Err(TransportError {
            target: format!("{other:?}"),
            message: "the lambda transport reaches only lambda targets".into(),
            undetermined: false,
            source: None,
        }),
    }
}

impl Transport for LambdaTransport {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        self.call(function(target)?, &ParticipantCall::Prepare(req.clone()))
            .await
    }

    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        self.call(function(target)?, &ParticipantCall::Commit(req.clone()))
            .await
    }

    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        self.call(function(target)?, &ParticipantCall::Abort(req.clone()))
            .await
    }

    async fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        self.call(function(target)?, &ParticipantCall::Inquire(req.clone()))
            .await
    }
}
