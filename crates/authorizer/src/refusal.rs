//! Why a connection or a subscription was refused: one stable code per reason, a message that
//! says what to fix, never the token itself.

/// A refusal. [`AccessRefusal::code`] is stable and machine-readable; the message is for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccessRefusal {
    /// No token was given.
    #[error("no token: connect with ?token=<a JWT from the issuer>")]
    Missing,
    /// The token is not a JWT (three base64url parts, a JSON header and claims).
    #[error("the token is not a well-formed JWT: {0}")]
    Malformed(String),
    /// The header names an algorithm this deployment does not accept (`none` included).
    #[error("the token's algorithm {0:?} is not accepted; accepted: {1}")]
    Algorithm(String, String),
    /// The header's `kid` is not among the issuer's keys, even after fetching them again.
    #[error("the token's key id {0:?} is not one of the issuer's keys")]
    UnknownKey(String),
    /// The signature does not verify with the issuer's key: forged or altered.
    #[error("the token's signature does not verify")]
    Signature,
    /// `exp` is past.
    #[error("the token expired at {0} (unix seconds): get a fresh one and reconnect")]
    Expired(u64),
    /// `nbf` is in the future.
    #[error("the token is not valid before {0} (unix seconds)")]
    NotYetValid(u64),
    /// `iss` is not the configured issuer.
    #[error("the token's issuer is not the one this deployment trusts")]
    Issuer,
    /// `aud` does not include the configured audience.
    #[error("the token's audience does not include this deployment's")]
    Audience,
    /// A required claim is missing or has the wrong type, or the `twopc` claim is malformed.
    #[error("the token's claims: {0}")]
    Claims(String),
    /// The issuer's keys could not be fetched: nothing can be verified (retry later).
    #[error("the issuer's keys could not be fetched: {0}")]
    KeysUnavailable(String),
    /// The shared demo token was given and does not match.
    #[error("the shared token does not match")]
    SharedToken,
    /// A subscription names a topic the principal's claims do not grant.
    #[error("not granted by your token: {0}")]
    TopicForbidden(String),
    /// The connection's token expired since it connected: reconnect with a fresh one.
    #[error("the connection's token has expired: reconnect with a fresh token")]
    ConnectionExpired,
    /// Neither an issuer nor a shared token is configured: nobody is admitted.
    #[error("this deployment trusts no issuer and no shared token: every connection is refused")]
    NotConfigured,
    /// The issuer's configuration cannot be used (e.g. set in part): nobody is admitted until
    /// it is fixed.
    #[error("this deployment's token issuer is misconfigured, so every connection is refused: {0}")]
    Misconfigured(String),
    /// The connection carries no principal (connected before authorization, or unknown).
    #[error("the connection has no authorized principal: reconnect with a token")]
    NoPrincipal,
}

impl AccessRefusal {
    /// The stable code (`token_missing`, `token_signature`, `topic_forbidden`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            AccessRefusal::Missing => codes::TOKEN_MISSING,
            AccessRefusal::Malformed(_) => codes::TOKEN_MALFORMED,
            AccessRefusal::Algorithm(..) => codes::TOKEN_ALGORITHM,
            AccessRefusal::UnknownKey(_) => codes::TOKEN_UNKNOWN_KEY,
            AccessRefusal::Signature => codes::TOKEN_SIGNATURE,
            AccessRefusal::Expired(_) => codes::TOKEN_EXPIRED,
            AccessRefusal::NotYetValid(_) => codes::TOKEN_NOT_YET_VALID,
            AccessRefusal::Issuer => codes::TOKEN_ISSUER,
            AccessRefusal::Audience => codes::TOKEN_AUDIENCE,
            AccessRefusal::Claims(_) => codes::TOKEN_CLAIMS,
            AccessRefusal::KeysUnavailable(_) => codes::KEYS_UNAVAILABLE,
            AccessRefusal::SharedToken => codes::TOKEN_SHARED,
            AccessRefusal::TopicForbidden(_) => codes::TOPIC_FORBIDDEN,
            AccessRefusal::ConnectionExpired => codes::CONNECTION_EXPIRED,
            AccessRefusal::NoPrincipal => codes::NO_PRINCIPAL,
            AccessRefusal::NotConfigured => codes::NOT_CONFIGURED,
            AccessRefusal::Misconfigured(_) => codes::MISCONFIGURED,
        }
    }

    /// The HTTP status a gateway answers `$connect` with: 503 when the keys could not be
    /// fetched (the token may be fine), 500 when the deployment is misconfigured, 401 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            AccessRefusal::KeysUnavailable(_) => 503,
            AccessRefusal::TopicForbidden(_) => 403,
            AccessRefusal::Misconfigured(_) => 500,
            _ => 401,
        }
    }
}

/// The codes, each spelled once.
pub mod codes {
    /// No token.
    pub const TOKEN_MISSING: &str = "token_missing";
    /// Not a JWT.
    pub const TOKEN_MALFORMED: &str = "token_malformed";
    /// Algorithm not accepted (`none` included).
    pub const TOKEN_ALGORITHM: &str = "token_algorithm";
    /// Unknown `kid`.
    pub const TOKEN_UNKNOWN_KEY: &str = "token_unknown_key";
    /// Bad signature.
    pub const TOKEN_SIGNATURE: &str = "token_signature";
    /// Expired.
    pub const TOKEN_EXPIRED: &str = "token_expired";
    /// Not yet valid.
    pub const TOKEN_NOT_YET_VALID: &str = "token_not_yet_valid";
    /// Wrong issuer.
    pub const TOKEN_ISSUER: &str = "token_issuer";
    /// Wrong audience.
    pub const TOKEN_AUDIENCE: &str = "token_audience";
    /// Claims missing or malformed.
    pub const TOKEN_CLAIMS: &str = "token_claims";
    /// The issuer's keys could not be fetched.
    pub const KEYS_UNAVAILABLE: &str = "keys_unavailable";
    /// The shared demo token does not match.
    pub const TOKEN_SHARED: &str = "token_shared";
    /// A topic outside the claims.
    pub const TOPIC_FORBIDDEN: &str = "topic_forbidden";
    /// The connection's token has expired.
    pub const CONNECTION_EXPIRED: &str = "connection_expired";
    /// The connection has no principal.
    pub const NO_PRINCIPAL: &str = "no_principal";

    /// No issuer and no shared token configured.
    pub const NOT_CONFIGURED: &str = "auth_not_configured";
    /// The issuer's configuration cannot be used.
    pub const MISCONFIGURED: &str = "auth_misconfigured";

    /// Every code, for documents and tests.
    pub const ALL: &[&str] = &[
        TOKEN_MISSING,
        TOKEN_MALFORMED,
        TOKEN_ALGORITHM,
        TOKEN_UNKNOWN_KEY,
        TOKEN_SIGNATURE,
        TOKEN_EXPIRED,
        TOKEN_NOT_YET_VALID,
        TOKEN_ISSUER,
        TOKEN_AUDIENCE,
        TOKEN_CLAIMS,
        KEYS_UNAVAILABLE,
        TOKEN_SHARED,
        TOPIC_FORBIDDEN,
        CONNECTION_EXPIRED,
        NO_PRINCIPAL,
        NOT_CONFIGURED,
        MISCONFIGURED,
    ];
}
