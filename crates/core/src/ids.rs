//! Transaction identifiers.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Namespace for ids derived from client idempotency keys (UUID v5): the same key always names
/// the same transaction, so a replayed request finds the record its first attempt wrote.
const IDEMPOTENCY_NAMESPACE: Uuid = Uuid::from_u128(0x6b1f_3c2e_9d4a_4e8b_a0c7_52f1_d3e9_0b17);

/// A transaction id: a UUID in its hyphenated lowercase form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TxId(String);

/// The text is not a transaction id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a transaction id (expected a UUID such as 0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69)"
)]
pub struct TxIdError(pub String);

impl TxId {
    /// A fresh random id.
    pub fn random() -> Self {
        TxId(Uuid::new_v4().to_string())
    }

    /// The id a client idempotency key names.
    pub fn for_idempotency_key(key: &str) -> Self {
        TxId(Uuid::new_v5(&IDEMPOTENCY_NAMESPACE, key.as_bytes()).to_string())
    }

    /// Parses an id received from outside.
    pub fn parse(text: &str) -> Result<Self, TxIdError> {
        Uuid::parse_str(text)
            .map(|u| TxId(u.to_string()))
            .map_err(|_| TxIdError(text.chars().take(80).collect()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's 16 bytes in base64url without padding: 22 characters instead of 36. Items name
    /// transactions this way (fence keys, reservation attributes), where DynamoDB bills every
    /// byte of every write.
    pub fn short(&self) -> String {
        let uuid = Uuid::parse_str(&self.0).expect("a TxId holds a UUID");
        URL_SAFE_NO_PAD.encode(uuid.as_bytes())
    }

    /// Reads [`TxId::short`]'s form back.
    pub(crate) fn from_short(text: &str) -> Result<Self, TxIdError> {
        let refuse = || TxIdError(text.chars().take(80).collect());
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| refuse())?;
        let uuid = Uuid::from_slice(&bytes).map_err(|_| refuse())?;
        Ok(TxId(uuid.to_string()))
    }
}

impl fmt::Display for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for TxId {
    type Error = TxIdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        TxId::parse(&s)
    }
}

impl From<TxId> for String {
    fn from(id: TxId) -> String {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_key_always_names_the_same_transaction() {
        assert_eq!(
            TxId::for_idempotency_key("k-1"),
            TxId::for_idempotency_key("k-1")
        );
        assert_ne!(
            TxId::for_idempotency_key("k-1"),
            TxId::for_idempotency_key("k-2")
        );
    }

    #[test]
    fn the_short_form_is_22_characters_and_reads_back() {
        for id in [TxId::random(), TxId::for_idempotency_key("k-1")] {
            let short = id.short();
            assert_eq!(short.len(), 22, "{short}");
            assert_eq!(TxId::from_short(&short), Ok(id));
        }
        let id = TxId::parse("0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69").expect("uuid");
        assert_eq!(id.short(), "C29sHj8OTDqaUx8tPEtaaQ");
        // The long form, too short or too long, or not base64url: not a short id.
        for bad in [
            id.as_str(),
            "C29sHj8OTDqaUx8tPEtaa",
            "C29sHj8OTDqaUx8tPEtaaQA",
            "C29sHj8OTDqaUx8tPEta+Q",
        ] {
            assert!(TxId::from_short(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parse_refuses_non_uuids_and_normalises_case() {
        assert!(TxId::parse("not-a-uuid").is_err());
        let id = TxId::parse("0B6F6C1E-3F0E-4C3A-9A53-1F2D3C4B5A69").expect("uuid");
        assert_eq!(id.as_str(), "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69");
    }
}
