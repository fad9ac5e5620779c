//! Signed requests to `http` participants: the coordinator signs each request with a secret it
//! shares with the service, over the transaction id, the time and the body (HMAC-SHA256); the
//! service refuses a request that is unsigned, signed with another secret, for another
//! transaction than its body names, or older (or newer) than the skew it allows, so a captured
//! request cannot be replayed later or sent to another transaction.
//!
//! Headers: [`TIMESTAMP_HEADER`] (epoch ms), [`TX_HEADER`], [`SIGNATURE_HEADER`]
//! (`v1=<hex>` over `v1\n<timestamp>\n<txId>\n<body>`).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::ids::TxId;

/// When the request was signed (epoch ms).
pub const TIMESTAMP_HEADER: &str = "x-twopc-timestamp";
/// The transaction the request is for (must match the body's `txId`).
pub const TX_HEADER: &str = "x-twopc-tx-id";
/// `v1=<hex of HMAC-SHA256>`.
pub const SIGNATURE_HEADER: &str = "x-twopc-signature";
/// How far a request's time may be from the receiver's clock by default (ms).
pub const DEFAULT_MAX_SKEW_MS: u64 = 5 * 60 * 1000;

/// The secret a coordinator and a service share; its `Debug` never shows it.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// From its bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Secret {
        Secret(bytes.into())
    }

    /// Its bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Why a signed request is refused, each with a stable code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// A signing header is missing.
    #[error("the request is not signed: missing {0}")]
    Unsigned(&'static str),
    /// A signing header is not in its form.
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// The signature does not match (another secret, or the request was altered).
    #[error("the signature does not match the request")]
    Mismatch,
    /// Signed too long ago (or too far ahead of the receiver's clock).
    #[error("signed at {signed}, {skew} ms from the receiver's clock (at most {max} ms allowed)")]
    Stale {
        /// When it was signed (epoch ms).
        signed: u64,
        /// How far from now (ms).
        skew: u64,
        /// The allowed skew (ms).
        max: u64,
    },
    /// The signed transaction is not the body's.
    #[error("signed for transaction {signed}, the body is for {body}")]
    OtherTransaction {
        /// The signed one.
        signed: String,
        /// The body's.
        body: String,
    },
}

impl SignatureError {
    /// The stable code, for the `code` of a JSON error.
    pub fn code(&self) -> &'static str {
        match self {
            SignatureError::Unsigned(_) => "unsigned",
            SignatureError::Malformed(_) => "malformed_signature",
            SignatureError::Mismatch => "bad_signature",
            SignatureError::Stale { .. } => "stale_request",
            SignatureError::OtherTransaction { .. } => "wrong_transaction",
        }
    }
}

fn mac(secret: &[u8], timestamp: u64, tx: &str, body: &[u8]) -> Hmac<Sha256> {
    // Any key length is valid for HMAC.
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    m.update(format!("v1\n{timestamp}\n{tx}\n").as_bytes());
    m.update(body);
    m
}

/// The signing headers of a request for `tx` with `body`, signed at `timestamp`.
pub fn sign(secret: &[u8], tx: &TxId, timestamp: u64, body: &[u8]) -> [(&'static str, String); 3] {
    sign_text(secret, tx.as_str(), timestamp, body)
}

/// The same for a transaction id taken as it is, even one that is no id (the conformance kit
/// signs malformed requests so that they reach the body's checks).
pub fn sign_text(
    secret: &[u8],
    tx: &str,
    timestamp: u64,
    body: &[u8],
) -> [(&'static str, String); 3] {
    let tag = mac(secret, timestamp, tx, body).finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    [
        (TIMESTAMP_HEADER, timestamp.to_string()),
        (TX_HEADER, tx.to_owned()),
        (SIGNATURE_HEADER, format!("v1={hex}")),
    ]
}

/// Checks a request's signing headers (`header` looks one up by name) against its body at
/// `now`, and returns the signed transaction id (the caller checks it is the body's).
pub fn verify<'a>(
    secret: &[u8],
    header: impl Fn(&str) -> Option<&'a str>,
    body: &[u8],
    now: u64,
    max_skew_ms: u64,
) -> Result<String, SignatureError> {
    let get = |name: &'static str| header(name).ok_or(SignatureError::Unsigned(name));
    let timestamp = get(TIMESTAMP_HEADER)?;
    let tx = get(TX_HEADER)?;
    let signature = get(SIGNATURE_HEADER)?;
    let signed: u64 = timestamp
        .parse()
        .map_err(|_| SignatureError::Malformed(TIMESTAMP_HEADER))?;
    let tag = signature
        .strip_prefix("v1=")
        .and_then(unhex)
        .filter(|tag| tag.len() == 32) // HMAC-SHA256: 64 hex digits, or it is no signature
        .ok_or(SignatureError::Malformed(SIGNATURE_HEADER))?;
    // Constant time: `verify_slice` compares without an early exit.
    mac(secret, signed, tx, body)
        .verify_slice(&tag)
        .map_err(|_| SignatureError::Mismatch)?;
    let skew = now.abs_diff(signed);
    if skew > max_skew_ms {
        return Err(SignatureError::Stale {
            signed,
            skew,
            max: max_skew_ms,
        });
    }
    Ok(tx.to_owned())
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(headers: &'a [(&'static str, String)]) -> impl Fn(&str) -> Option<&'a str> + 'a {
        move |name| {
            headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        }
    }

    /// docs/signing-vectors.json: the vectors every language's signer is tested against.
    const VECTORS: &str = include_str!("../../../docs/signing-vectors.json");

    #[test]
    fn the_signer_gives_every_documented_vector() {
        let doc: serde_json::Value = serde_json::from_str(VECTORS).expect("the vectors are JSON");
        let vectors = doc["vectors"].as_array().expect("vectors");
        assert!(vectors.len() >= 8, "{} vectors", vectors.len());
        let text = |v: &serde_json::Value, field: &str| -> String {
            v[field]
                .as_str()
                .unwrap_or_else(|| panic!("{field}: {v}"))
                .to_owned()
        };
        for v in vectors {
            let name = text(v, "name");
            let (secret, tx, body) = (text(v, "secret"), text(v, "txId"), text(v, "body"));
            let timestamp: u64 = text(v, "timestamp").parse().expect("a timestamp");
            if let Some(file) = v["secretFile"].as_str() {
                assert_eq!(file.strip_suffix('\n'), Some(secret.as_str()), "{name}");
            }
            assert_eq!(
                text(v, "stringToSign"),
                format!("v1\n{timestamp}\n{tx}\n{body}"),
                "{name}"
            );
            let headers = sign_text(secret.as_bytes(), &tx, timestamp, body.as_bytes());
            assert_eq!(
                headers[0],
                (TIMESTAMP_HEADER, text(v, "timestamp")),
                "{name}"
            );
            assert_eq!(headers[1], (TX_HEADER, tx.clone()), "{name}");
            assert_eq!(
                headers[2],
                (SIGNATURE_HEADER, text(v, "signature")),
                "{name}"
            );
        }
    }

    #[test]
    fn the_verifier_answers_every_documented_check() {
        let doc: serde_json::Value = serde_json::from_str(VECTORS).expect("the vectors are JSON");
        let secret = doc["vectors"][0]["secret"].as_str().expect("secret");
        let max = doc["maxSkewMs"].as_u64().expect("maxSkewMs");
        assert_eq!(max, DEFAULT_MAX_SKEW_MS);
        let checks = doc["checks"].as_array().expect("checks");
        assert!(checks.len() >= 15, "{} checks", checks.len());
        for c in checks {
            let name = c["name"].as_str().expect("name");
            let headers = c["headers"].as_object().expect("headers");
            let header = |n: &str| headers.get(n).and_then(|v| v.as_str());
            let body = c["body"].as_str().expect("body").as_bytes();
            let now = c["now"].as_u64().expect("now");
            let got = verify(secret.as_bytes(), header, body, now, max);
            let want = &c["expect"];
            match (&got, want["txId"].as_str(), want["code"].as_str()) {
                (Ok(tx), Some(want), None) => assert_eq!(tx, want, "{name}"),
                (Err(e), None, Some(code)) => assert_eq!(e.code(), code, "{name}: {e}"),
                _ => panic!("{name}: got {got:?}, want {want}"),
            }
        }
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // Test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(b"Jefe").expect("key");
        m.update(b"what do ya want for nothing?");
        let hex: String = m
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_signed_request_verifies_and_any_change_refuses_it() {
        let tx = TxId::random();
        let body = br#"{"txId": "x", "amount": 12.50}"#;
        let headers = sign(b"secret", &tx, 1_000, body);
        let ok = verify(b"secret", lookup(&headers), body, 1_500, 60_000);
        assert_eq!(ok, Ok(tx.to_string()));
        let code = |r: Result<String, SignatureError>| r.map_err(|e| e.code());
        assert_eq!(
            code(verify(b"other", lookup(&headers), body, 1_500, 60_000)),
            Err("bad_signature")
        );
        let altered = br#"{"txId": "x", "amount": 99.50}"#;
        assert_eq!(
            code(verify(b"secret", lookup(&headers), altered, 1_500, 60_000)),
            Err("bad_signature")
        );
        assert_eq!(
            code(verify(b"secret", lookup(&headers), body, 70_000, 60_000)),
            Err("stale_request")
        );
        assert_eq!(
            code(verify(
                b"secret",
                lookup(&headers[..2]),
                body,
                1_500,
                60_000
            )),
            Err("unsigned")
        );
        let mut forged = headers.clone();
        forged[1].1 = TxId::random().to_string();
        assert_eq!(
            code(verify(b"secret", lookup(&forged), body, 1_500, 60_000)),
            Err("bad_signature"),
            "the transaction id is signed"
        );
        forged = headers.clone();
        for malformed in ["v1=zz", "v1=abcd", "v2=00"] {
            forged[2].1 = malformed.into();
            assert_eq!(
                code(verify(b"secret", lookup(&forged), body, 1_500, 60_000)),
                Err("malformed_signature"),
                "{malformed}"
            );
        }
    }
}
