//! The client's request (`POST /transactions`), its validation and its hash, and the
//! configuration of the services it may name.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::decimal::Decimal;
use crate::ids::TxId;
use crate::item::Key;
use crate::op::{OpError, Operation};
use crate::record::{ParticipantEntry, Target, TxRecord};
use crate::status::TxStatus;

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

/// A participant service the coordinator may name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceConfig {
    /// How it is reached.
    pub target: Target,
    /// Its table's key.
    pub key: KeySchema,
}

/// Limits and defaults of the coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most participants in one transaction.
    pub max_participants: usize,
    /// Timeout when the request gives none (ms).
    pub default_timeout_ms: u64,
    /// Smallest accepted timeout (ms).
    pub min_timeout_ms: u64,
    /// Largest accepted timeout (ms).
    pub max_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_participants: 32,
            default_timeout_ms: 5_000,
            min_timeout_ms: 100,
            max_timeout_ms: 60_000,
        }
    }
}

/// A refused request: nothing was written. `code` is stable; `message` says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct RequestError {
    /// Stable machine-readable code.
    pub code: &'static str,
    /// What to fix.
    pub message: String,
}

impl RequestError {
    /// A new error.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        RequestError {
            code,
            message: message.into(),
        }
    }

    /// The HTTP status this error answers with.
    pub fn http_status(&self) -> u16 {
        match self.code {
            "idempotency_key_reused" => 409,
            _ => 400,
        }
    }
}

impl From<OpError> for RequestError {
    fn from(e: OpError) -> Self {
        RequestError::new(e.code(), e.to_string())
    }
}

/// One participant of a validated request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParticipantRequest {
    /// Service name.
    pub participant: String,
    /// Its configuration.
    pub service: ServiceConfig,
    /// The item.
    pub key: Key,
    /// The operation.
    pub op: Operation,
}

/// A validated request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxRequest {
    /// Participants, in request order.
    pub participants: Vec<ParticipantRequest>,
    /// Prepare must be decided within this (ms).
    pub timeout_ms: u64,
}

const MAX_KEY_STRING: usize = 1024;
const MAX_IDEMPOTENCY_KEY: usize = 255;

/// Checks an `Idempotency-Key` header value.
pub fn check_idempotency_key(key: &str) -> Result<(), RequestError> {
    if key.is_empty()
        || key.len() > MAX_IDEMPOTENCY_KEY
        || !key.bytes().all(|b| (0x21..0x7f).contains(&b))
    {
        return Err(RequestError::new(
            "invalid_idempotency_key",
            format!("Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"),
        ));
    }
    Ok(())
}

impl TxRequest {
    /// Validates a request body against the configured services.
    pub fn parse(
        body: &Value,
        services: &BTreeMap<String, ServiceConfig>,
        limits: &Limits,
    ) -> Result<TxRequest, RequestError> {
        let invalid = |m: String| RequestError::new("invalid_request", m);
        let obj = body.as_object().ok_or_else(|| {
            invalid("the body must be a JSON object with a \"participants\" list".into())
        })?;
        for field in obj.keys() {
            if !["participants", "timeoutMs"].contains(&field.as_str()) {
                return Err(invalid(format!(
                    "unknown field {field:?}; a transaction has \"participants\" and an optional \"timeoutMs\""
                )));
            }
        }
        let timeout_ms = match obj.get("timeoutMs") {
            None => limits.default_timeout_ms,
            Some(v) => v
                .as_u64()
                .filter(|t| (limits.min_timeout_ms..=limits.max_timeout_ms).contains(t))
                .ok_or_else(|| {
                    RequestError::new(
                        "invalid_timeout",
                        format!(
                            "timeoutMs must be a whole number of milliseconds from {} to {}",
                            limits.min_timeout_ms, limits.max_timeout_ms
                        ),
                    )
                })?,
        };
        let list = obj
            .get("participants")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("\"participants\" must be a list".into()))?;
        if list.is_empty() {
            return Err(invalid(
                "\"participants\" is empty: name at least one participant".into(),
            ));
        }
        if list.len() > limits.max_participants {
            return Err(RequestError::new(
                "too_many_participants",
                format!(
                    "{} participants; at most {} are allowed in one transaction",
                    list.len(),
                    limits.max_participants
                ),
            ));
        }
        let mut seen = BTreeSet::new();
        let mut participants = Vec::with_capacity(list.len());
        for (i, entry) in list.iter().enumerate() {
            let path = format!("participants[{i}]");
            let p = parse_participant(&path, entry, services)?;
            if !seen.insert((
                format!("{:?}", p.service.target),
                serde_json::to_string(&p.key).unwrap_or_default(),
            )) {
                return Err(RequestError::new(
                    "duplicate_item",
                    format!(
                        "{path}: the item {} of {:?} appears more than once; combine its operations into one",
                        serde_json::to_string(&p.key).unwrap_or_default(),
                        p.participant
                    ),
                ));
            }
            participants.push(p);
        }
        Ok(TxRequest {
            participants,
            timeout_ms,
        })
    }

    /// The record that begins this transaction: `PREPARING`, deadline `now + timeout`.
    pub fn begin(
        &self,
        tx_id: TxId,
        idempotency_key: Option<&str>,
        begun_by: String,
        now: u64,
    ) -> TxRecord {
        TxRecord {
            tx_id,
            status: TxStatus::Preparing,
            participants: self
                .participants
                .iter()
                .map(|p| ParticipantEntry {
                    participant: p.participant.clone(),
                    target: p.service.target.clone(),
                    key: p.key.clone(),
                    op: p.op.clone(),
                })
                .collect(),
            votes: vec![],
            deadline: now + self.timeout_ms,
            created_at: now,
            updated_at: now,
            idempotency_key: idempotency_key.map(str::to_owned),
            request_hash: self.hash(),
            begun_by,
            attempts: 0,
            retry_after: None,
        }
    }

    /// A hash of the request's meaning (canonical JSON): an idempotency key replayed with
    /// another body is told apart from a true replay.
    pub fn hash(&self) -> String {
        let parts: Vec<Value> = self
            .participants
            .iter()
            .map(|p| {
                let mut m = Map::new();
                m.insert("participant".into(), Value::String(p.participant.clone()));
                m.insert(
                    "key".into(),
                    Value::Object(p.key.clone().into_iter().collect()),
                );
                m.insert("op".into(), p.op.to_json());
                Value::Object(m)
            })
            .collect();
        let canonical = serde_json::json!({"participants": parts, "timeoutMs": self.timeout_ms});
        let digest = Sha256::digest(canonical.to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn parse_participant(
    path: &str,
    entry: &Value,
    services: &BTreeMap<String, ServiceConfig>,
) -> Result<ParticipantRequest, RequestError> {
    let invalid = |m: String| RequestError::new("invalid_request", m);
    let obj = entry.as_object().ok_or_else(|| {
        invalid(format!(
            "{path}: expected an object with participant, key and op"
        ))
    })?;
    for field in obj.keys() {
        if !["participant", "key", "op"].contains(&field.as_str()) {
            return Err(invalid(format!(
                "{path}: unknown field {field:?}; expected participant, key and op"
            )));
        }
    }
    let name = obj
        .get("participant")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            invalid(format!(
                "{path}.participant: expected the name of a service"
            ))
        })?;
    let service = services.get(name).ok_or_else(|| {
        let known: Vec<&str> = services.keys().map(String::as_str).collect();
        RequestError::new(
            "unknown_participant",
            format!(
                "{path}.participant: no service named {name:?}; configured: {}",
                known.join(", ")
            ),
        )
    })?;
    let key = parse_key(&format!("{path}.key"), obj.get("key"), &service.key)?;
    let op_value = obj
        .get("op")
        .ok_or_else(|| invalid(format!("{path}.op: missing; say what to do to the item")))?;
    let op = Operation::from_json(&format!("{path}.op"), op_value)?;
    op.check_against_key(&format!("{path}.op"), &key)?;
    Ok(ParticipantRequest {
        participant: name.to_owned(),
        service: service.clone(),
        key,
        op,
    })
}

fn parse_key(path: &str, v: Option<&Value>, schema: &KeySchema) -> Result<Key, RequestError> {
    let bad = |m: String| RequestError::new("invalid_key", m);
    let names: Vec<&str> = schema.attributes().map(|a| a.name.as_str()).collect();
    let obj = v.and_then(Value::as_object).ok_or_else(|| {
        bad(format!(
            "{path}: expected an object with {}",
            names.join(" and ")
        ))
    })?;
    if let Some(extra) = obj.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(bad(format!(
            "{path}: {extra:?} is not part of the key; the key is {}",
            names.join(" and ")
        )));
    }
    let mut key = Key::new();
    for attr in schema.attributes() {
        let value = obj
            .get(&attr.name)
            .ok_or_else(|| bad(format!("{path}.{}: missing", attr.name)))?;
        match (attr.kind, value) {
            (KeyType::S, Value::String(s)) if !s.is_empty() && s.len() <= MAX_KEY_STRING => {}
            (KeyType::S, _) => {
                return Err(bad(format!(
                    "{path}.{}: expected a non-empty string of at most {MAX_KEY_STRING} bytes",
                    attr.name
                )));
            }
            (KeyType::N, Value::Number(n)) => {
                Decimal::parse(&n.to_string())
                    .map_err(|e| bad(format!("{path}.{}: {e}", attr.name)))?;
            }
            (KeyType::N, _) => return Err(bad(format!("{path}.{}: expected a number", attr.name))),
        }
        key.insert(attr.name.clone(), value.clone());
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn services() -> BTreeMap<String, ServiceConfig> {
        [(
            "accounts".to_owned(),
            ServiceConfig {
                target: Target::Direct {
                    table: "accounts".into(),
                },
                key: KeySchema::string_hash("id"),
            },
        )]
        .into()
    }

    fn parse(v: Value) -> Result<TxRequest, RequestError> {
        TxRequest::parse(&v, &services(), &Limits::default())
    }

    fn transfer() -> Value {
        json!({"participants": [
            {"participant": "accounts", "key": {"id": "a"}, "op": {"add": {"balance": -1}}},
            {"participant": "accounts", "key": {"id": "b"}, "op": {"add": {"balance": 1}}}]})
    }

    #[test]
    fn a_transfer_is_valid_with_the_default_timeout() {
        let r = parse(transfer()).expect("valid");
        assert_eq!(r.participants.len(), 2);
        assert_eq!(r.timeout_ms, 5_000);
    }

    #[test]
    fn refusals_carry_stable_codes() {
        let code = |v| parse(v).unwrap_err().code;
        assert_eq!(code(json!({"participants": []})), "invalid_request");
        assert_eq!(code(json!([])), "invalid_request");
        assert_eq!(
            code(json!({"participants": [], "extra": 1})),
            "invalid_request"
        );
        assert_eq!(
            code(
                json!({"participants": [{"participant": "nope", "key": {"id": "a"}, "op": {"delete": true}}]})
            ),
            "unknown_participant"
        );
        assert_eq!(
            code(
                json!({"participants": [{"participant": "accounts", "key": {"id": 1}, "op": {"delete": true}}]})
            ),
            "invalid_key"
        );
        assert_eq!(
            code(
                json!({"participants": [{"participant": "accounts", "key": {"id": "a", "x": 1}, "op": {"delete": true}}]})
            ),
            "invalid_key"
        );
        assert_eq!(
            code(
                json!({"participants": [{"participant": "accounts", "key": {"id": "a"}, "op": {"explode": true}}]})
            ),
            "invalid_operation"
        );
        let mut t = transfer();
        t["timeoutMs"] = json!(10);
        assert_eq!(code(t), "invalid_timeout");
        let dup = json!({"participants": [
            {"participant": "accounts", "key": {"id": "a"}, "op": {"add": {"balance": -1}}},
            {"participant": "accounts", "key": {"id": "a"}, "op": {"add": {"balance": 1}}}]});
        assert_eq!(code(dup), "duplicate_item");
        let many: Vec<Value> = (0..33).map(|i| json!({"participant": "accounts", "key": {"id": format!("a{i}")}, "op": {"add": {"b": 1}}})).collect();
        assert_eq!(code(json!({"participants": many})), "too_many_participants");
    }

    #[test]
    fn hash_tells_bodies_apart_and_ignores_field_order() {
        let a = parse(transfer()).expect("valid").hash();
        let reordered = json!({"participants": [
            {"op": {"add": {"balance": -1}}, "key": {"id": "a"}, "participant": "accounts"},
            {"participant": "accounts", "op": {"add": {"balance": 1}}, "key": {"id": "b"}}]});
        assert_eq!(a, parse(reordered).expect("valid").hash());
        let mut other = transfer();
        other["participants"][1]["op"]["add"]["balance"] = json!(2);
        assert_ne!(a, parse(other).expect("valid").hash());
    }

    #[test]
    fn idempotency_keys_are_checked() {
        assert!(check_idempotency_key("order-42").is_ok());
        assert!(check_idempotency_key("").is_err());
        assert!(check_idempotency_key("has space").is_err());
    }
}
