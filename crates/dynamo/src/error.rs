//! Classifies SDK errors into what the caller can do (the core's [`PortError`]). This is the
//! only place that looks inside an `SdkError`.

use std::error::Error as StdError;
use std::fmt::Debug;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use twopc_core::ports::PortError;

/// Errors that mean "not done, try later".
const RETRYABLE: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "LimitExceededException",
];

/// Maps an SDK error to a [`PortError`], keeping it as the source.
pub fn classify<E, R>(context: impl Into<String>, err: SdkError<E, R>) -> PortError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
    R: Debug + Send + Sync + 'static,
{
    let context = context.into();
    match &err {
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or_default().to_owned();
            let message = service.err().message().unwrap_or_default().to_owned();
            if RETRYABLE.contains(&code.as_str()) {
                PortError::Retryable {
                    context,
                    source: Box::new(err),
                }
            } else if code == "ValidationException" || code == "SerializationException" {
                PortError::Invalid {
                    context,
                    message: format!("{code}: {message}"),
                }
            } else if code.starts_with("InternalServer") || code == "ServiceUnavailable" {
                // The write may have been applied.
                PortError::Undetermined {
                    context,
                    source: Box::new(err),
                }
            } else {
                PortError::Fatal {
                    context,
                    source: Box::new(err),
                }
            }
        }
        SdkError::ConstructionFailure(_) => PortError::Invalid {
            context,
            message: format!("{err}"),
        },
        // Sent or maybe sent: the outcome is unknown until read back.
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            PortError::Undetermined {
                context,
                source: Box::new(err),
            }
        }
        _ => PortError::Fatal {
            context,
            source: Box::new(err),
        },
    }
}

/// A stored item that cannot be read back as the protocol wrote it.
pub fn corrupt(context: impl Into<String>, why: impl Into<String>) -> PortError {
    PortError::Fatal {
        context: context.into(),
        source: why.into().into(),
    }
}
