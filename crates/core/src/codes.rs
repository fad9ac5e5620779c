//! Every stable `code` the HTTP API answers with, each spelled once, with the status it answers
//! with and what it means. The coordinator's handler, the core's request checks and the local
//! gateway (`twopc serve`) refuse with these constants; `docs/openapi.json` declares every one
//! under its status with the same meaning (`crates/core/tests/openapi.rs` fails on a code it
//! lacks).
//!
//! Three lists, by where a code appears: [`REFUSALS`] in an error body (`{"code", "message"}`),
//! [`ABORTS`] in the 409 answer of an aborted transaction (its first no vote's reason, or
//! `aborted`), [`LOCAL`] only from the local gateway.

use std::fmt;

/// One stable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Code {
    /// The answer's `code`.
    pub name: &'static str,
    /// The HTTP status it answers with.
    pub status: u16,
    /// What it means, in one line (the document's description of it).
    pub meaning: &'static str,
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// Declares each list's codes as constants (the meaning is also the constant's doc) and the list.
macro_rules! codes {
    ($($(#[doc = $list_doc:literal])* $list:ident {
        $($id:ident = $name:literal, $status:literal, $meaning:literal;)*
    })*) => {
        $($(
            #[doc = $meaning]
            pub const $id: Code = Code { name: $name, status: $status, meaning: $meaning };
        )*
        $(#[doc = $list_doc])*
        pub const $list: &[Code] = &[$($id),*];
        )*
    };
}

codes! {
    /// Error bodies of the API: nothing was written (but for `unavailable`, which may not know).
    REFUSALS {
        INVALID_JSON = "invalid_json", 400,
            "The body is not JSON text: empty, malformed, not UTF-8, or base64-encoded.";
        INVALID_REQUEST = "invalid_request", 400,
            "The body is JSON but not a transaction: not an object, an unknown field, no participants, an entry without a service name.";
        UNKNOWN_PARTICIPANT = "unknown_participant", 400,
            "A participant names no configured service.";
        INVALID_KEY = "invalid_key", 400,
            "An item's key is missing, names attributes outside the table's key, or has a value of the wrong type.";
        DUPLICATE_ITEM = "duplicate_item", 400,
            "One item appears twice in the transaction: combine its operations into one.";
        DUPLICATE_PARTICIPANT = "duplicate_participant", 400,
            "A custom participant appears twice in the transaction: it takes one payload.";
        TOO_MANY_PARTICIPANTS = "too_many_participants", 400,
            "More participants than one transaction may have (TWOPC_MAX_PARTICIPANTS, default 32).";
        INVALID_OPERATION = "invalid_operation", 400,
            "An operation is malformed: an unknown field or operator, a wrong type, parts that cannot be combined.";
        INVALID_ATTRIBUTE_NAME = "invalid_attribute_name", 400,
            "An attribute name is not [A-Za-z_][A-Za-z0-9_-]* (1 to 255 characters), or is one the protocol keeps.";
        INVALID_NUMBER = "invalid_number", 400,
            "A number cannot be stored exactly: more than 38 significant digits, or beyond DynamoDB's range.";
        WRONG_PARTICIPANT_KIND = "wrong_participant_kind", 400,
            "An entry gives a table's service a payload, or a custom participant a key or an op.";
        INVALID_PAYLOAD = "invalid_payload", 400,
            "A custom participant's payload is missing, null, or more than 8 KiB of JSON.";
        INVALID_FOR_STORE = "invalid_for_store", 400,
            "DynamoDB refused the transaction as one it can never write (a sum past its range, an item past 400 KB, an expression past its limits); nothing was written: change the request, as it is it cannot succeed.";
        INVALID_TIMEOUT = "invalid_timeout", 400,
            "timeoutMs is not a whole number of milliseconds within the coordinator's limits (100 to TWOPC_MAX_TIMEOUT_MS).";
        INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key", 400,
            "The Idempotency-Key header is not 1 to 255 visible ASCII characters.";
        INVALID_TX_ID = "invalid_tx_id", 400,
            "The transaction id in the path is not a UUID.";
        INVALID_LISTING = "invalid_listing", 400,
            "GET /transactions: a query parameter is unknown or malformed (status=pending; overdue true or false; limit 1 to 100; next as a previous page gave it).";
        NOT_FOUND = "not_found", 404,
            "No such transaction, or no such route.";
        METHOD_NOT_ALLOWED = "method_not_allowed", 405,
            "The path takes another method; the Allow header names it.";
        IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused", 409,
            "The Idempotency-Key was used with a different body: use a new key for a new transaction.";
        REQUEST_TOO_LARGE = "request_too_large", 413,
            "The body is larger than the coordinator accepts (TWOPC_MAX_BODY_BYTES, default 64 KiB).";
        INVALID_OPERATOR_QUERY = "invalid_operator_query", 400,
            "An operator call's query is unknown or malformed (status, overdue, since, until, participant, key, limit, next).";
        ITEM_NOT_READABLE = "item_not_readable", 400,
            "The service's items are not read by the coordinator: it keeps its table behind its own function, or it is a custom participant.";
        OPERATOR_FORBIDDEN = "operator_forbidden", 403,
            "An operator call without an operator's identity: IAM authorisation for the operator routes in AWS, an admin token locally.";
        NOT_OVERDUE = "not_overdue", 409,
            "The transaction is undecided and its deadline has not passed: its coordinator may still decide, so recovery leaves it (retry after the deadline).";
        ALREADY_DECIDED = "already_decided", 409,
            "The transaction is decided: its outcome stands and cannot be aborted (recover finishes a decided one).";
        ALREADY_ENDED = "already_ended", 409,
            "The transaction has ended: there is nothing to recover.";
        UNAVAILABLE = "unavailable", 503,
            "The transaction store could not be reached: retry (a POST with the same Idempotency-Key).";
    }

    /// Codes of a 409 answer whose body is the aborted transaction: the reason of its first no
    /// vote, else `aborted`. Nothing was applied.
    ABORTS {
        VOTE_CONFLICT = "conflict", 409,
            "An item is held by another live transaction, or reservations stand in the way: retry.";
        VOTE_CONDITION = "condition", 409,
            "A require condition does not hold (or put found the item already there), or a custom participant declined.";
        VOTE_NOT_FOUND = "notFound", 409,
            "An item the operation changes does not exist.";
        VOTE_INVALID = "invalid", 409,
            "The operation cannot apply to the item as it is (DynamoDB refused to store it there: an item past 400 KB), or a custom participant cannot use its payload.";
        VOTE_EXPIRED = "expired", 409,
            "The transaction's deadline passed before a participant prepared.";
        VOTE_FENCED = "fenced", 409,
            "A participant no longer takes the transaction: it already ended there (a late or repeated prepare), or, on a busy item, more transactions that began after it ended there than its fence keeps. Nothing was applied: retry as a new transaction.";
        VOTE_UNREACHABLE = "unreachable", 409,
            "A participant did not answer (timeout or transport error).";
        VOTE_CLOCK_SKEW = "clockSkew", 409,
            "The transaction began further ahead of a participant's clock than TWOPC_FENCE_MARGIN_MS: the coordinator's clock runs ahead; retry.";
        ABORTED = "aborted", 409,
            "The deadline passed before the transaction was decided; no participant voted no.";
    }

    /// Refusals only the local gateway (`twopc serve`) makes: its own routes (the live page,
    /// `/ws`, `/local/...`) and its HTTP framework's, rewritten into JSON. The deployed API never
    /// answers these (API Gateway answers such requests itself).
    LOCAL {
        INVALID_QUERY_STRING = "invalid_query_string", 400,
            "(twopc serve) A query parameter does not decode to UTF-8 text.";
        INVALID_WEBSOCKET_REQUEST = "invalid_websocket_request", 400,
            "(twopc serve) GET /ws without a valid WebSocket upgrade (405 or 426 when the upgrade's refusal says so).";
        OPERATOR_TOKEN = "operator_token", 401,
            "(twopc serve) An operator call without a valid token: send Authorization: Bearer <a token of twopc token --admin>.";
        UNAUTHORIZED = "unauthorized", 401,
            "(twopc serve) A framework refusal for authorisation (401 or 403).";
        UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type", 415,
            "(twopc serve) A local route does not take a body of this content type.";
        UPGRADE_REQUIRED = "upgrade_required", 426,
            "(twopc serve) The route needs a protocol upgrade (a WebSocket).";
        INTERNAL = "internal", 500,
            "(twopc serve) A server error the framework answered (its own 5xx status).";
    }
}

/// Every code: the three lists.
pub fn all() -> impl Iterator<Item = Code> {
    REFUSALS.iter().chain(ABORTS).chain(LOCAL).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn each_code_is_spelled_once_and_says_what_it_means() {
        let names: BTreeSet<&str> = all().map(|c| c.name).collect();
        assert_eq!(
            names.len(),
            all().count(),
            "a code appears in one list, once"
        );
        for c in all() {
            assert!((400..600).contains(&c.status), "{c}: an error status");
            assert!(
                c.meaning.ends_with('.') && !c.meaning.contains('\n'),
                "{c}: one line"
            );
        }
    }
}
