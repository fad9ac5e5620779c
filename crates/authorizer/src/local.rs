//! The local stack's issuer: a P-256 key generated once per data folder and kept there (PKCS#8,
//! readable by its owner only), the tokens `twopc token` mints with it (ES256), and its key set,
//! which the local gateway verifies against exactly as a deployment verifies an OIDC issuer's.

use std::io::Write;
use std::path::{Path, PathBuf};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::grants::{CLAIM, Grants};
use crate::verify::VerifierConfig;

/// The `iss` of local tokens.
pub const ISSUER: &str = "twopc-local";
/// The `aud` of local tokens.
pub const AUDIENCE: &str = "twopc-websocket";
/// The key's file in the data folder.
pub const KEY_FILE: &str = "ws-signing-key.p8";

/// The verifier configuration that accepts local tokens (ES256 only).
pub fn config() -> VerifierConfig {
    VerifierConfig::new(ISSUER, AUDIENCE)
        .with_algorithms(&["ES256"])
        .unwrap_or_else(|_| VerifierConfig::new(ISSUER, AUDIENCE))
}

/// Why the key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LocalKeyError {
    /// Reading or writing the key file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file does not hold a P-256 PKCS#8 key.
    #[error("{}: not a P-256 key ({reason}); remove it to have a new one made", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// The local issuer.
pub struct LocalIssuer {
    pkcs8: Vec<u8>,
    kid: String,
    x: String,
    y: String,
}

impl LocalIssuer {
    /// The key kept in `dir` ([`KEY_FILE`]), made there first if it is not (two processes
    /// racing both end up with the one written first).
    pub fn load_or_create(dir: &Path) -> Result<Self, LocalKeyError> {
        let path = dir.join(KEY_FILE);
        let io = |source| LocalKeyError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let pkcs8 = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let fresh = Self::generate().map_err(|reason| LocalKeyError::Invalid {
                    path: path.clone(),
                    reason,
                })?;
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                match options.open(&path) {
                    Ok(mut f) => {
                        f.write_all(&fresh).map_err(io)?;
                        f.sync_all().map_err(io)?;
                        fresh
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        std::fs::read(&path).map_err(io)?
                    }
                    Err(e) => return Err(io(e)),
                }
            }
            Err(e) => return Err(io(e)),
        };
        Self::from_pkcs8(pkcs8).map_err(|reason| LocalKeyError::Invalid { path, reason })
    }

    /// A fresh key that is kept nowhere (tests: a second issuer to forge with).
    pub fn ephemeral() -> Result<Self, String> {
        Self::from_pkcs8(Self::generate()?)
    }

    fn generate() -> Result<Vec<u8>, String> {
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .map(|d| d.as_ref().to_vec())
            .map_err(|e| e.to_string())
    }

    fn from_pkcs8(pkcs8: Vec<u8>) -> Result<Self, String> {
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8)
            .map_err(|e| e.to_string())?;
        // Uncompressed point: 0x04 || x (32 bytes) || y (32 bytes).
        let point = pair.public_key().as_ref();
        let (Some(x), Some(y)) = (point.get(1..33), point.get(33..65)) else {
            return Err("unexpected public key encoding".into());
        };
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, point);
        let kid = URL_SAFE_NO_PAD.encode(digest.as_ref().get(..12).unwrap_or_default());
        Ok(LocalIssuer {
            kid,
            x: URL_SAFE_NO_PAD.encode(x),
            y: URL_SAFE_NO_PAD.encode(y),
            pkcs8,
        })
    }

    /// The key's id (`kid`): derived from the public key.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The signing key, for jsonwebtoken.
    pub fn encoding_key(&self) -> EncodingKey {
        EncodingKey::from_ec_der(&self.pkcs8)
    }

    /// The public key set (what an issuer serves at its JWKS URL).
    pub fn jwks(&self) -> JwkSet {
        let set = json!({"keys": [{
            "kty": "EC", "crv": "P-256", "x": self.x, "y": self.y,
            "kid": self.kid, "alg": "ES256", "use": "sig"
        }]});
        serde_json::from_value(set).unwrap_or(JwkSet { keys: vec![] })
    }

    /// Signs `claims` as they are (tests: expired, wrong audience...).
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding_key()).map_err(|e| e.to_string())
    }

    /// A token for `sub` granting `grants`, valid from `now` for `ttl_secs`.
    pub fn mint(
        &self,
        sub: &str,
        grants: &Grants,
        now: u64,
        ttl_secs: u64,
    ) -> Result<String, String> {
        let mut claims = json!({
            "iss": ISSUER, "aud": AUDIENCE, "sub": sub,
            "iat": now, "nbf": now, "exp": now.saturating_add(ttl_secs),
        });
        if grants != &Grants::default() {
            claims[CLAIM] = serde_json::to_value(grants).map_err(|e| e.to_string())?;
        }
        self.sign(&claims)
    }
}
