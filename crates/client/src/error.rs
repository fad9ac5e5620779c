//! What can go wrong, named by what the caller can do: [`Error`], and the API's stable error
//! codes as [`ErrorCode`].

use std::time::Duration;

use serde_json::Value;
use twopc_core::ids::TxId;
use twopc_core::status::TxStatus;

/// A boxed error source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API answered with an error (`{"code", "message"}`): a refusal (nothing was written;
    /// fix the request), or, once retries are spent, `unavailable`, `throttled` or `internal`.
    #[error("{status} {code}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The stable code.
        code: ErrorCode,
        /// What to fix, for people.
        message: String,
        /// The answer's JSON as received (`Null` if it was not JSON).
        body: Value,
    },
    /// A submit whose outcome is unknown: an attempt may have reached the coordinator, and no
    /// attempt got an answer. The transaction may exist and may even commit: read it with
    /// `status(tx_id)`, or submit the same body again with the same `idempotency_key`, never
    /// with a new one.
    #[error(
        "transaction {tx_id} (Idempotency-Key {idempotency_key:?}): outcome unknown after every retry: {last}"
    )]
    Undetermined {
        /// The transaction's id (the API derives it from the key).
        tx_id: TxId,
        /// The key every attempt carried.
        idempotency_key: String,
        /// The last attempt's failure.
        #[source]
        last: Box<Error>,
    },
    /// No answer within the per-request timeout.
    #[error("no answer within {} ms", after.as_millis())]
    Timeout {
        /// The timeout.
        after: Duration,
    },
    /// The request could not be sent or its answer not read (connection refused or reset, TLS).
    #[error("{message}")]
    Transport {
        /// What failed.
        message: String,
        /// Whether the request was possibly received (a connection that could not be opened
        /// carried nothing).
        maybe_received: bool,
        /// Cause.
        #[source]
        source: Option<BoxError>,
    },
    /// An answer that is not the API's (a success that is not a transaction, say).
    #[error("unexpected answer {status}: {message}")]
    Protocol {
        /// HTTP status.
        status: u16,
        /// What was wrong with it.
        message: String,
    },
    /// `wait` ran out of time while the transaction is still unfinished (it will finish:
    /// a decided transaction is completed by the sweeper; ask again later).
    #[error("transaction {tx_id} is still {status} after {} ms", waited.as_millis())]
    Unfinished {
        /// The transaction.
        tx_id: TxId,
        /// Its last status seen.
        status: TxStatus,
        /// How long `wait` waited.
        waited: Duration,
    },
    /// The request could not be signed (no credentials, no region).
    #[error("signing: {message}")]
    Signing {
        /// What failed.
        message: String,
        /// Cause.
        #[source]
        source: Option<BoxError>,
    },
    /// Unusable input, refused before anything was sent (a base URL, a header value).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// The API's code, if the API answered with one.
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            Error::Api { code, .. } => Some(code),
            Error::Undetermined { last, .. } => last.code(),
            _ => None,
        }
    }

    /// Whether the same call may succeed if repeated unchanged (with the same idempotency key):
    /// a timeout, a broken connection, `unavailable`, `throttled`, `internal`.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Api { status, .. } => retryable_status(*status),
            Error::Timeout { .. } | Error::Transport { .. } | Error::Undetermined { .. } => true,
            _ => false,
        }
    }

    /// Whether the request may have been received and acted on: a submit that failed this way
    /// has an unknown outcome.
    pub(crate) fn maybe_received(&self) -> bool {
        match self {
            Error::Transport { maybe_received, .. } => *maybe_received,
            Error::Timeout { .. } | Error::Undetermined { .. } => true,
            // A 429 is the gateway's throttle: refused before the coordinator ran.
            Error::Api { status, .. } => retryable_status(*status) && *status != 429,
            _ => false,
        }
    }
}

/// Statuses a request is repeated after: the gateway's throttle (429) and server failures,
/// after which the same idempotency key finds the first attempt's transaction.
pub(crate) fn retryable_status(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504)
}

/// An enum of stable codes with their spelling, `KNOWN`, `as_str`, `parse` and an `Other`
/// variant for codes this version does not know.
macro_rules! codes {
    ($(#[$meta:meta])* $name:ident { $($(#[$doc:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$doc])* $variant,)*
            /// A code this version does not know.
            Other(String),
        }

        impl $name {
            /// Every code this version knows, in the order of its definition.
            pub const KNOWN: &'static [$name] = &[$($name::$variant,)*];

            /// The code as the API spells it.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Other(code) => code,
                }
            }

            /// Reads a code as the API spells it.
            pub fn parse(code: &str) -> $name {
                match code {
                    $($text => $name::$variant,)*
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use codes;

codes! {
    /// The stable `code` of an error answer (docs/api.md, "Errors"). Matching on it is the
    /// supported way to tell refusals apart; [`ErrorCode::Other`] keeps any code this version
    /// does not know.
    ErrorCode {
    // Refusals of the request (400; nothing was written).
    /// The body is not a transaction (shape, unknown field, no participants).
    InvalidRequest = "invalid_request",
    /// A participant names no configured service.
    UnknownParticipant = "unknown_participant",
    /// An item's key does not match its table's key schema.
    InvalidKey = "invalid_key",
    /// The same item appears twice.
    DuplicateItem = "duplicate_item",
    /// More participants than the coordinator allows.
    TooManyParticipants = "too_many_participants",
    /// An operation is not understood.
    InvalidOperation = "invalid_operation",
    /// An attribute name is not allowed.
    InvalidAttributeName = "invalid_attribute_name",
    /// A number cannot be stored exactly.
    InvalidNumber = "invalid_number",
    /// A table's participant given a payload, or a custom participant given a key or an op.
    WrongParticipantKind = "wrong_participant_kind",
    /// A custom participant's payload is missing or too large.
    InvalidPayload = "invalid_payload",
    /// A custom participant named twice.
    DuplicateParticipant = "duplicate_participant",
    /// DynamoDB refused the transaction as one it can never write (a sum past its range, an item
    /// past 400 KB): nothing was written; change the request, retrying it cannot help.
    InvalidForStore = "invalid_for_store",
    /// `timeoutMs` out of range.
    InvalidTimeout = "invalid_timeout",
    /// The `Idempotency-Key` is not 1 to 255 visible ASCII characters.
    InvalidIdempotencyKey = "invalid_idempotency_key",
    /// The `Idempotency-Key` was used with a different body (409): use a new key.
    IdempotencyKeyReused = "idempotency_key_reused",
    // The HTTP layer's.
    /// The body is not JSON (400).
    InvalidJson = "invalid_json",
    /// The path's transaction id is not one (400).
    InvalidTxId = "invalid_tx_id",
    /// A query parameter of `GET /transactions?status=pending` is unknown or malformed (400).
    InvalidListing = "invalid_listing",
    /// The body is over the size limit (413).
    RequestTooLarge = "request_too_large",
    /// No such transaction, or no such route (404).
    NotFound = "not_found",
    /// The method is not allowed on the path (405).
    MethodNotAllowed = "method_not_allowed",
    /// The transaction store could not be reached (503): retry with the same key.
    Unavailable = "unavailable",
    /// A query string that does not decode (400, local gateway).
    InvalidQueryString = "invalid_query_string",
    /// A body of another media type (415, local gateway).
    UnsupportedMediaType = "unsupported_media_type",
    /// A WebSocket route asked without an upgrade (426, local gateway).
    UpgradeRequired = "upgrade_required",
    /// A WebSocket connection request that is not one (400, local gateway).
    InvalidWebsocketRequest = "invalid_websocket_request",
    /// Not signed, or signed by a principal not allowed to invoke the API (401/403).
    Unauthorized = "unauthorized",
    /// A server failure (5xx).
    Internal = "internal",
    // The operator API's (docs/api.md, "The operator API").
    /// An operator call's query is unknown or malformed (400).
    InvalidOperatorQuery = "invalid_operator_query",
    /// An item read of a service whose items the coordinator does not read (400).
    ItemNotReadable = "item_not_readable",
    /// An operator call without an operator's identity (403).
    OperatorForbidden = "operator_forbidden",
    /// An operator call without a valid admin token (401, local gateway).
    OperatorToken = "operator_token",
    /// An abort or recovery before the transaction's deadline (409): its coordinator may still decide.
    NotOverdue = "not_overdue",
    /// An abort of a decided transaction (409): its outcome stands.
    AlreadyDecided = "already_decided",
    /// A recovery of an ended transaction (409): nothing is left to recover.
    AlreadyEnded = "already_ended",
    /// API Gateway's throttle (429). API Gateway's own answers carry no `code`; the client
    /// names them by status, as the local gateway does.
    Throttled = "throttled",
    }
}

impl ErrorCode {
    /// The code of an error answer that carries none (API Gateway's own answers: `403 {"message":
    /// "Missing Authentication Token"}`, `429`, `502`, `504`), by its status.
    pub fn for_status(status: u16) -> ErrorCode {
        match status {
            401 | 403 => ErrorCode::Unauthorized,
            404 => ErrorCode::NotFound,
            405 => ErrorCode::MethodNotAllowed,
            413 => ErrorCode::RequestTooLarge,
            415 => ErrorCode::UnsupportedMediaType,
            429 => ErrorCode::Throttled,
            503 => ErrorCode::Unavailable,
            s if s >= 500 => ErrorCode::Internal,
            _ => ErrorCode::InvalidRequest,
        }
    }
}

/// An error answer as [`Error::Api`]: its `code` (or one named by status) and `message`.
pub(crate) fn api_error(status: u16, body: Value) -> Error {
    let code = body
        .get("code")
        .and_then(Value::as_str)
        .map_or_else(|| ErrorCode::for_status(status), ErrorCode::parse);
    let message = match (body.get("message").and_then(Value::as_str), &body) {
        (Some(m), _) => m.to_owned(),
        (None, Value::String(text)) => text.chars().take(200).collect(),
        (None, Value::Null) => format!("HTTP {status}"),
        (None, other) => other.to_string().chars().take(200).collect(),
    };
    Error::Api {
        status,
        code,
        message,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The API's registry (`twopc_core::api::codes`, which the OpenAPI document is checked
    /// against) is the truth: a code added there without a variant here fails this test.
    #[test]
    fn every_code_of_the_api_registry_is_known_to_the_client() {
        use twopc_core::api::codes;
        for code in codes::REFUSALS.iter().chain(codes::LOCAL) {
            assert!(
                !matches!(ErrorCode::parse(code.name), ErrorCode::Other(_)),
                "{}: add it to ErrorCode",
                code.name
            );
        }
        for code in codes::ABORTS {
            assert!(
                !matches!(
                    crate::outcome::AbortCode::parse(code.name),
                    crate::outcome::AbortCode::Other(_)
                ),
                "{}: add it to AbortCode",
                code.name
            );
        }
    }

    /// Every code the client knows, as the API spells it: the list to reconcile with the API's
    /// own (docs/api.md, "Errors", and the OpenAPI document). `throttled` is the client's name for
    /// API Gateway's 429, which carries no code.
    #[test]
    fn every_known_code_is_listed_and_reads_back() {
        let spelled: Vec<&str> = ErrorCode::KNOWN.iter().map(ErrorCode::as_str).collect();
        assert_eq!(
            spelled,
            [
                "invalid_request",
                "unknown_participant",
                "invalid_key",
                "duplicate_item",
                "too_many_participants",
                "invalid_operation",
                "invalid_attribute_name",
                "invalid_number",
                "wrong_participant_kind",
                "invalid_payload",
                "duplicate_participant",
                "invalid_for_store",
                "invalid_timeout",
                "invalid_idempotency_key",
                "idempotency_key_reused",
                "invalid_json",
                "invalid_tx_id",
                "invalid_listing",
                "request_too_large",
                "not_found",
                "method_not_allowed",
                "unavailable",
                "invalid_query_string",
                "unsupported_media_type",
                "upgrade_required",
                "invalid_websocket_request",
                "unauthorized",
                "internal",
                "invalid_operator_query",
                "item_not_readable",
                "operator_forbidden",
                "operator_token",
                "not_overdue",
                "already_decided",
                "already_ended",
                "throttled",
            ]
        );
        for code in ErrorCode::KNOWN {
            assert_eq!(&ErrorCode::parse(code.as_str()), code);
        }
        assert_eq!(
            ErrorCode::parse("something_new"),
            ErrorCode::Other("something_new".into())
        );
    }

    #[test]
    fn an_answer_without_a_code_is_named_by_its_status() {
        let e = api_error(403, json!({"message": "Missing Authentication Token"}));
        assert_eq!(e.code(), Some(&ErrorCode::Unauthorized));
        assert_eq!(
            e.to_string(),
            "403 unauthorized: Missing Authentication Token"
        );
        let e = api_error(504, json!({"message": "Endpoint request timed out"}));
        assert_eq!(e.code(), Some(&ErrorCode::Internal));
        assert!(e.is_retryable() && e.maybe_received());
        let e = api_error(429, json!({"message": "Too Many Requests"}));
        assert!(
            e.is_retryable() && !e.maybe_received(),
            "a throttle ran nothing"
        );
        let e = api_error(400, json!({"code": "unknown_participant", "message": "no"}));
        assert_eq!(e.code(), Some(&ErrorCode::UnknownParticipant));
        assert!(!e.is_retryable());
    }
}
