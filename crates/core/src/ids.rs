//! Transaction identifiers.

use std::fmt;

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
    fn parse_refuses_non_uuids_and_normalises_case() {
        assert!(TxId::parse("not-a-uuid").is_err());
        let id = TxId::parse("0B6F6C1E-3F0E-4C3A-9A53-1F2D3C4B5A69").expect("uuid");
        assert_eq!(id.as_str(), "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69");
    }
}
