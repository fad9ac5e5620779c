//! JWT verification against an issuer's keys.
//!
//! The checks, in order: the token's shape; the header's `alg` against the configured list
//! (`none` and the HMAC family are never accepted: the keys are public); its `kid` against the
//! issuer's key set (fetched on first use; an unknown `kid` fetches it again, at most once per
//! [`VerifierConfig::refresh_cooldown_secs`], so a flood of made-up ids cannot hammer the
//! issuer); the signature (jsonwebtoken, on aws-lc-rs); then `iss`, `aud`, `exp`, `nbf` against
//! the clock the caller passes (so tests control time), and the `twopc` claim.

use std::collections::HashMap;
use std::future::Future;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
pub use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::AccessRefusal;
use crate::grants::{CLAIM, Grants};

/// Who is connecting, as the token says, and until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The token's `sub`.
    pub sub: String,
    /// The token's `exp` (unix seconds): nothing is pushed to the connection after it.
    pub exp: u64,
    /// What it may subscribe to.
    pub grants: Grants,
}

/// Where the issuer's public keys come from (its JWKS URL in AWS, a file locally).
pub trait KeySource: Send + Sync {
    /// The current key set, or why it could not be had.
    fn fetch(&self) -> impl Future<Output = Result<JwkSet, String>> + Send;
}

/// A fixed key set (the local issuer's, tests).
impl KeySource for JwkSet {
    async fn fetch(&self) -> Result<JwkSet, String> {
        Ok(self.clone())
    }
}

/// What a token must say to be accepted.
#[derive(Clone, Debug)]
pub struct VerifierConfig {
    /// The `iss` every token must carry (the OIDC issuer URL).
    pub issuer: String,
    /// A value `aud` must be or contain (an app client id, or an API's name); or, for an access
    /// token without `aud` (Amazon Cognito's), its `client_id`.
    pub audience: String,
    /// The accepted signature algorithms (never `none`, never HMAC).
    algorithms: Vec<Algorithm>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
    /// After a fetch, an unknown `kid` waits this long before fetching the keys again.
    pub refresh_cooldown_secs: u64,
}

/// The algorithms accepted unless configured otherwise: what OIDC issuers sign with (Cognito
/// signs RS256).
pub const DEFAULT_ALGORITHMS: &[Algorithm] = &[Algorithm::RS256, Algorithm::ES256];

impl VerifierConfig {
    /// Tokens from `issuer` for `audience`, RS256 or ES256, 30 s of leeway, one refetch per
    /// minute at most.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        VerifierConfig {
            issuer: issuer.into(),
            audience: audience.into(),
            algorithms: DEFAULT_ALGORITHMS.to_vec(),
            leeway_secs: 30,
            refresh_cooldown_secs: 60,
        }
    }

    /// Accepts these algorithms instead (names as in a JWT header: `RS256`, `ES256`, `PS256`,
    /// `EdDSA`...). HMAC (`HS*`) is refused: it would make the issuer's public key a secret.
    pub fn with_algorithms(mut self, names: &[&str]) -> Result<Self, String> {
        let mut algorithms = vec![];
        for name in names {
            let alg =
                Algorithm::from_str(name).map_err(|_| format!("unknown JWT algorithm {name:?}"))?;
            if alg.family() == AlgorithmFamily::Hmac {
                return Err(format!(
                    "{name}: a shared-secret algorithm cannot be verified with public keys"
                ));
            }
            algorithms.push(alg);
        }
        if algorithms.is_empty() {
            return Err("no JWT algorithm accepted: name at least one".into());
        }
        self.algorithms = algorithms;
        Ok(self)
    }

    /// The accepted algorithms.
    pub fn algorithms(&self) -> &[Algorithm] {
        &self.algorithms
    }

    fn algorithm_names(&self) -> String {
        self.algorithms
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The keys known, by `kid`, and when they were fetched.
#[derive(Default)]
struct Cache {
    keys: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    fetched_at: Option<u64>,
}

/// Verifies tokens with the keys of a [`KeySource`], cached.
pub struct Verifier<K> {
    config: VerifierConfig,
    source: K,
    cache: Mutex<Cache>,
}

impl<K: KeySource> Verifier<K> {
    /// A verifier; no key is fetched until the first token.
    pub fn new(config: VerifierConfig, source: K) -> Self {
        Verifier {
            config,
            source,
            cache: Mutex::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &VerifierConfig {
        &self.config
    }

    /// The principal `token` names, at `now` (unix seconds), or why it is refused.
    pub async fn verify(&self, token: Option<&str>, now: u64) -> Result<Principal, AccessRefusal> {
        let token = token
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AccessRefusal::Missing)?;
        let header = header(token)?;
        let alg_name = header
            .get("alg")
            .and_then(Value::as_str)
            .ok_or_else(|| AccessRefusal::Malformed("the header has no \"alg\"".into()))?;
        let alg = Algorithm::from_str(alg_name)
            .ok()
            .filter(|a| self.config.algorithms.contains(a))
            .ok_or_else(|| {
                AccessRefusal::Algorithm(alg_name.to_owned(), self.config.algorithm_names())
            })?;
        let kid = header
            .get("kid")
            .and_then(Value::as_str)
            .ok_or_else(|| AccessRefusal::Malformed("the header has no \"kid\" (key id)".into()))?;
        let (key, key_alg) = self.key(kid, now).await?;
        if key_alg.is_some_and(|k| k != alg) {
            // The issuer published this key for another algorithm: an attempt at confusion.
            return Err(AccessRefusal::Algorithm(
                alg_name.to_owned(),
                format!("{key_alg:?} for this key"),
            ));
        }
        let mut validation = Validation::new(alg);
        // Claims are checked below against the caller's clock; only the signature here.
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => AccessRefusal::Signature,
                jsonwebtoken::errors::ErrorKind::InvalidAlgorithm
                | jsonwebtoken::errors::ErrorKind::InvalidEcdsaKey
                | jsonwebtoken::errors::ErrorKind::InvalidRsaKey(_) => AccessRefusal::Algorithm(
                    alg_name.to_owned(),
                    "the algorithm of the issuer's key".into(),
                ),
                _ => AccessRefusal::Malformed(e.to_string()),
            })?
            .claims;
        self.check_claims(&claims, now)
    }

    fn check_claims(&self, claims: &Value, now: u64) -> Result<Principal, AccessRefusal> {
        let leeway = self.config.leeway_secs;
        if claims.get("iss").and_then(Value::as_str) != Some(self.config.issuer.as_str()) {
            return Err(AccessRefusal::Issuer);
        }
        if !self.for_our_audience(claims) {
            return Err(AccessRefusal::Audience);
        }
        let exp = claims.get("exp").and_then(Value::as_u64).ok_or_else(|| {
            AccessRefusal::Claims("\"exp\" must be a number of unix seconds".into())
        })?;
        if now >= exp.saturating_add(leeway) {
            return Err(AccessRefusal::Expired(exp));
        }
        match claims.get("nbf") {
            None => {}
            Some(nbf) => {
                let nbf = nbf.as_u64().ok_or_else(|| {
                    AccessRefusal::Claims("\"nbf\" must be a number of unix seconds".into())
                })?;
                if nbf > now.saturating_add(leeway) {
                    return Err(AccessRefusal::NotYetValid(nbf));
                }
            }
        }
        let sub = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| AccessRefusal::Claims("\"sub\" must name the principal".into()))?;
        Ok(Principal {
            sub: sub.to_owned(),
            exp,
            grants: Grants::from_claim(claims.get(CLAIM))?,
        })
    }

    /// Whether the token is meant for us: its `aud` is or contains the audience; or, having
    /// no `aud` at all, it is an OAuth access token (`token_use` "access") issued to the
    /// audience as a client (`client_id`): Amazon Cognito's access tokens name their app
    /// client so, and carry no `aud`. A token with an `aud` is judged by it alone.
    fn for_our_audience(&self, claims: &Value) -> bool {
        let ours = |v: &Value| v.as_str() == Some(self.config.audience.as_str());
        match claims.get("aud") {
            Some(Value::Array(list)) => list.iter().any(ours),
            Some(aud) => ours(aud),
            None => {
                claims.get("token_use").and_then(Value::as_str) == Some("access")
                    && claims.get("client_id").is_some_and(ours)
            }
        }
    }

    /// The key `kid`, fetching the set on first use and again (once per cooldown) when `kid`
    /// is unknown.
    async fn key(
        &self,
        kid: &str,
        now: u64,
    ) -> Result<(DecodingKey, Option<Algorithm>), AccessRefusal> {
        let mut cache = self.cache.lock().await;
        if let Some(k) = cache.keys.get(kid) {
            return Ok(k.clone());
        }
        let due = cache
            .fetched_at
            .is_none_or(|at| now >= at.saturating_add(self.config.refresh_cooldown_secs));
        if due {
            let set = self
                .source
                .fetch()
                .await
                .map_err(AccessRefusal::KeysUnavailable)?;
            cache.keys = usable_keys(&set);
            cache.fetched_at = Some(now);
        }
        cache
            .keys
            .get(kid)
            .cloned()
            .ok_or_else(|| AccessRefusal::UnknownKey(kid.to_owned()))
    }
}

/// The keys of a set that can verify signatures, by `kid` (keys without one, or of a kind
/// jsonwebtoken cannot use, or marked for encryption, are left out).
fn usable_keys(set: &JwkSet) -> HashMap<String, (DecodingKey, Option<Algorithm>)> {
    set.keys
        .iter()
        .filter(|k| {
            !matches!(
                k.common.public_key_use,
                Some(jsonwebtoken::jwk::PublicKeyUse::Encryption)
            )
        })
        .filter_map(|k| {
            let kid = k.common.key_id.clone()?;
            let key = DecodingKey::from_jwk(k).ok()?;
            let alg = k
                .common
                .key_algorithm
                .and_then(|a| Algorithm::try_from(a).ok());
            Some((kid, (key, alg)))
        })
        .collect()
}

/// The JOSE header as JSON, parsed here rather than by jsonwebtoken so that an algorithm it
/// does not know (`none`) is refused as an algorithm, not as a malformed token.
fn header(token: &str) -> Result<serde_json::Map<String, Value>, AccessRefusal> {
    let mut parts = token.split('.');
    let (Some(h), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AccessRefusal::Malformed(
            "expected three base64url parts separated by dots".into(),
        ));
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(h)
        .map_err(|e| AccessRefusal::Malformed(format!("header: {e}")))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(AccessRefusal::Malformed("header: not a JSON object".into())),
        Err(e) => Err(AccessRefusal::Malformed(format!("header: {e}"))),
    }
}
