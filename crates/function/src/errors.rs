//! How the participant function reports a failure, and how the `lambda` transport reads it back.
//!
//! A Lambda function error carries `{"errorType", "errorMessage"}`. The participant function
//! sets `errorType` to one of [`ErrorKind`]'s names, so the caller knows what it can do without
//! parsing prose: try again later (`Retryable`), read back before assuming anything
//! (`Undetermined`, `Fatal`), or stop sending that request (`Invalid`).

use serde::{Deserialize, Serialize};
use twopc_core::ports::PortError;

/// What a participant's failure lets its caller do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Nothing was done; the same call may succeed later (throttling, a refused connection).
    Retryable,
    /// The call may or may not have taken effect.
    Undetermined,
    /// The call itself is wrong (malformed event, invalid operation); repeating it will not help.
    Invalid,
    /// Anything else (missing table, bad credentials, corrupt item).
    Fatal,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 4] = [
        ErrorKind::Retryable,
        ErrorKind::Undetermined,
        ErrorKind::Invalid,
        ErrorKind::Fatal,
    ];

    /// The kind of a port failure.
    pub fn of(e: &PortError) -> ErrorKind {
        match e {
            PortError::Retryable { .. } => ErrorKind::Retryable,
            PortError::Undetermined { .. } => ErrorKind::Undetermined,
            PortError::Invalid { .. } => ErrorKind::Invalid,
            PortError::Fatal { .. } => ErrorKind::Fatal,
        }
    }

    /// The `errorType` the function reports.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Retryable => "Retryable",
            ErrorKind::Undetermined => "Undetermined",
            ErrorKind::Invalid => "Invalid",
            ErrorKind::Fatal => "Fatal",
        }
    }

    /// Reads an `errorType` (None: not one of ours, e.g. `Runtime.ExitError` or a timeout).
    pub fn parse(error_type: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.name() == error_type)
    }

    /// Whether the call may have taken effect.
    pub fn may_have_acted(self) -> bool {
        matches!(self, ErrorKind::Undetermined | ErrorKind::Fatal)
    }
}

/// A Lambda function error's payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionError {
    /// The error's type: one of [`ErrorKind`]'s names for the participant's own errors; the
    /// runtime's (`Runtime.ExitError`, `Sandbox.Timedout`, ...) otherwise.
    #[serde(default)]
    pub error_type: String,
    /// For people.
    #[serde(default)]
    pub error_message: String,
}

impl FunctionError {
    /// Reads a function error payload; None if it is not one.
    pub fn parse(payload: &[u8]) -> Option<FunctionError> {
        serde_json::from_slice::<FunctionError>(payload)
            .ok()
            .filter(|e| !e.error_type.is_empty() || !e.error_message.is_empty())
    }

    /// Whether the call may have taken effect: only our own `Retryable` and `Invalid` say it did
    /// not; a crash, a timeout or an unknown error may have happened after a write.
    pub fn may_have_acted(&self) -> bool {
        ErrorKind::parse(&self.error_type).is_none_or(ErrorKind::may_have_acted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_refusals_say_nothing_happened() {
        let e = |t: &str| FunctionError {
            error_type: t.into(),
            error_message: "m".into(),
        };
        assert!(!e("Retryable").may_have_acted());
        assert!(!e("Invalid").may_have_acted());
        assert!(e("Undetermined").may_have_acted());
        assert!(e("Fatal").may_have_acted());
        assert!(e("Sandbox.Timedout").may_have_acted());
        assert!(e("Runtime.ExitError").may_have_acted());
    }

    #[test]
    fn function_error_payloads_are_read() {
        let e = FunctionError::parse(br#"{"errorType":"Invalid","errorMessage":"bad"}"#)
            .expect("an error");
        assert_eq!(ErrorKind::parse(&e.error_type), Some(ErrorKind::Invalid));
        assert_eq!(FunctionError::parse(b"{}"), None);
        assert_eq!(FunctionError::parse(b"not json"), None);
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::parse(k.name()), Some(k));
        }
    }
}
