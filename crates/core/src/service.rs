//! The services a coordinator may name in a request: how each is reached, what kind of
//! participant it is, and a table's key schema.

use serde::{Deserialize, Serialize};

use crate::record::Target;

/// The type of a key attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KeyType {
    /// String.
    S,
    /// Number.
    N,
}

/// One key attribute.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyAttribute {
    /// Name.
    pub name: String,
    /// Type.
    #[serde(rename = "type")]
    pub kind: KeyType,
}

/// A table's key schema.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeySchema {
    /// Partition key.
    pub hash: KeyAttribute,
    /// Sort key, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<KeyAttribute>,
}

impl KeySchema {
    /// A schema with a string partition key only.
    pub fn string_hash(name: &str) -> Self {
        KeySchema {
            hash: KeyAttribute {
                name: name.to_owned(),
                kind: KeyType::S,
            },
            range: None,
        }
    }

    /// The key attributes.
    pub fn attributes(&self) -> impl Iterator<Item = &KeyAttribute> {
        std::iter::once(&self.hash).chain(self.range.as_ref())
    }
}

/// What kind of participant a service is: what a request names for it, and who validates it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceKind {
    /// Items of a DynamoDB table: a request names an item's `key` and an `op` in the operation
    /// language, which the coordinator validates.
    #[default]
    Table,
    /// A service with its own logic (`twopc-participant-sdk`): a request gives an opaque JSON
    /// `payload` (no key, no op), which the participant validates in prepare. It keeps one state
    /// per transaction, so it appears at most once in a transaction.
    Custom,
}

/// A participant service the coordinator may name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceConfig {
    /// How it is reached.
    pub target: Target,
    /// What a request names for it (absent: a table).
    #[serde(default, skip_serializing_if = "is_table")]
    pub kind: ServiceKind,
    /// Its table's key (a table's only; a custom participant has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<KeySchema>,
    /// Its items are hot (many transactions at once on one item, commuting `add`s): they take
    /// concurrent reservations, so its transactions are never committed natively
    /// (`CommitMode::Auto`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hot: bool,
    /// Its answers are as available as the transaction record (`"highlyAvailable": true`):
    /// its transactions may be staged in the default mode (`rules::stages`), and one left
    /// `STAGING` waits for its answer. Without it, a transaction naming a custom participant,
    /// or a table's reached over HTTP, takes the classic path, aborted at its deadline.
    #[serde(
        default,
        rename = "highlyAvailable",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub highly_available: bool,
}

fn is_table(kind: &ServiceKind) -> bool {
    *kind == ServiceKind::Table
}

impl ServiceConfig {
    /// A table's participant.
    pub fn table(target: Target, key: KeySchema) -> Self {
        ServiceConfig {
            target,
            kind: ServiceKind::Table,
            key: Some(key),
            hot: false,
            highly_available: false,
        }
    }

    /// A custom participant.
    pub fn custom(target: Target) -> Self {
        ServiceConfig {
            target,
            kind: ServiceKind::Custom,
            key: None,
            hot: false,
            highly_available: false,
        }
    }

    /// What is wrong with this configuration, if anything: a table needs a key, a custom
    /// participant has none.
    pub fn problem(&self) -> Option<&'static str> {
        match (self.kind, &self.key) {
            (ServiceKind::Table, None) => Some("a table's service needs \"key\" (its key schema)"),
            (ServiceKind::Custom, Some(_)) => {
                Some("a custom participant has no \"key\" (it keeps one state per transaction)")
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn service_kinds_are_read_and_checked() {
        let custom: ServiceConfig = serde_json::from_value(
            json!({"kind": "custom", "target": {"transport": "http", "url": "http://p"}}),
        )
        .expect("custom");
        assert_eq!(custom.problem(), None);
        let table: ServiceConfig = serde_json::from_value(json!({
            "target": {"transport": "direct", "table": "t"}, "key": {"hash": {"name": "id", "type": "S"}}}))
        .expect("table");
        assert_eq!(table.kind, ServiceKind::Table);
        assert_eq!(table.problem(), None);
        assert!(
            serde_json::to_value(&table)
                .expect("ser")
                .get("kind")
                .is_none()
        );
        let keyless: ServiceConfig =
            serde_json::from_value(json!({"target": {"transport": "direct", "table": "t"}}))
                .expect("parses");
        assert!(keyless.problem().is_some());
    }
}
