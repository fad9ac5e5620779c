//! The client's request (`POST /transactions`): its validation against the configured
//! services ([`crate::service`]) and limits, and its hash.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::codes::{self, Code};
use crate::decimal::{Decimal, canonical_json};
use crate::ids::TxId;
use crate::item::{Key, canonical_key};
use crate::op::{OpError, Operation};
use crate::record::{ParticipantEntry, TxRecord};
use crate::service::{KeySchema, KeyType, ServiceConfig, ServiceKind};
use crate::status::TxStatus;

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
    /// Stable machine-readable code (one of [`codes::REFUSALS`]).
    pub code: Code,
    /// What to fix.
    pub message: String,
}

impl RequestError {
    /// A new error.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        RequestError {
            code,
            message: message.into(),
        }
    }

    /// The HTTP status this error answers with.
    pub fn http_status(&self) -> u16 {
        self.code.status
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
    /// The item (empty for a custom participant).
    pub key: Key,
    /// The operation (empty for a custom participant).
    pub op: Operation,
    /// A custom participant's opaque payload (none for a table).
    pub payload: Option<Value>,
}

/// A validated request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxRequest {
    /// Participants, in request order.
    pub participants: Vec<ParticipantRequest>,
    /// Prepare must be decided within this (ms).
    pub timeout_ms: u64,
    /// When the client wants its answer.
    pub wait: Wait,
}

/// When a client is answered (the request's `"wait"`). Not part of the transaction: a replay
/// may ask otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Wait {
    /// Once the outcome is decided (`"decided"`, the default): a staged commit is answered
    /// after one round of writes, before its participants applied it.
    #[default]
    Decided,
    /// Once every participant applied the outcome (`"applied"`): read-your-writes for a
    /// service that reads its own table right after.
    Applied,
}

impl Wait {
    /// The names a request may give.
    pub(crate) const NAMES: [&str; 2] = ["decided", "applied"];
}

const MAX_KEY_STRING: usize = 1024;
/// The largest payload one custom participant may be given (bytes of its compact JSON): the
/// record holds every participant's payload and must fit one DynamoDB item (400 KB).
pub(crate) const MAX_PAYLOAD_BYTES: usize = 8 * 1024;
const MAX_IDEMPOTENCY_KEY: usize = 255;

/// Checks an `Idempotency-Key` header value.
pub(crate) fn check_idempotency_key(key: &str) -> Result<(), RequestError> {
    if key.is_empty()
        || key.len() > MAX_IDEMPOTENCY_KEY
        || !key.bytes().all(|b| (0x21..0x7f).contains(&b))
    {
        return Err(RequestError::new(
            codes::INVALID_IDEMPOTENCY_KEY,
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
        let invalid = |m: String| RequestError::new(codes::INVALID_REQUEST, m);
        let obj = body.as_object().ok_or_else(|| {
            invalid("the body must be a JSON object with a \"participants\" list".into())
        })?;
        for field in obj.keys() {
            if !["participants", "timeoutMs", "wait"].contains(&field.as_str()) {
                return Err(invalid(format!(
                    "unknown field {field:?}; a transaction has \"participants\", an optional \"timeoutMs\" and an optional \"wait\""
                )));
            }
        }
        let wait = parse_wait(obj.get("wait"))?;
        let timeout_ms = parse_timeout(obj.get("timeoutMs"), limits)?;
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
                codes::TOO_MANY_PARTICIPANTS,
                format!(
                    "{} participants; at most {} are allowed in one transaction",
                    list.len(),
                    limits.max_participants
                ),
            ));
        }
        Ok(TxRequest {
            participants: parse_participants(list, services)?,
            timeout_ms,
            wait,
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
                    payload: p.payload.clone(),
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
            recovery_asked: None,
            decided_at: None,
            operator_actions: vec![],
        }
    }

    /// A hash of the request's meaning: an idempotency key replayed with another body is told
    /// apart from a true replay. Canonical JSON with every number read by value as DynamoDB
    /// stores it ([`canonical_json`], exact decimals, never an `f64`), so `1`, `1.0` and `10e-1`
    /// hash alike, in keys, operations and payloads.
    pub fn hash(&self) -> String {
        let parts = self.participants.iter().map(|p| {
            let payload = p.payload.as_ref();
            (p.participant.as_str(), &p.key, &p.op, payload)
        });
        digest(&canonical_json(&meaning(parts, self.timeout_ms)))
    }
}

/// The hash of `record`'s request spelled as it was sent, as coordinators computed it before
/// numbers were read by value. A record one of them wrote holds this; a retry of the same bytes
/// still matches it (a replay compares both), so a key in flight across the deploy replays. (A
/// retry spelling a number otherwise matches neither and is refused `idempotency_key_reused`,
/// as before; so is one that an older coordinator reads against a record a newer one wrote,
/// unless its numbers are spelled canonically, where the two hashes are one.)
pub(crate) fn spelled_hash(record: &TxRecord) -> String {
    let parts = record.participants.iter().map(|p| {
        let payload = p.payload.as_ref();
        (p.participant.as_str(), &p.key, &p.op, payload)
    });
    let timeout_ms = record.deadline.saturating_sub(record.created_at);
    digest(&meaning(parts, timeout_ms))
}

/// The request as hashed: each participant's name, key and operation (or payload), and the
/// timeout.
fn meaning<'a>(
    parts: impl Iterator<Item = (&'a str, &'a Key, &'a Operation, Option<&'a Value>)>,
    timeout_ms: u64,
) -> Value {
    let parts: Vec<Value> = parts
        .map(|(participant, key, op, payload)| {
            let mut m = Map::new();
            m.insert("participant".into(), Value::String(participant.to_owned()));
            m.insert(
                "key".into(),
                Value::Object(key.clone().into_iter().collect()),
            );
            match payload {
                // Its own field: a payload never hashes like an operation of the same text.
                Some(payload) => m.insert("payload".into(), payload.clone()),
                None => m.insert("op".into(), op.to_json()),
            };
            Value::Object(m)
        })
        .collect();
    serde_json::json!({"participants": parts, "timeoutMs": timeout_ms})
}

/// SHA-256 of the compact JSON text, in hex.
fn digest(v: &Value) -> String {
    let digest = Sha256::digest(v.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The request's `"wait"` (absent: [`Wait::Decided`]).
fn parse_wait(v: Option<&Value>) -> Result<Wait, RequestError> {
    match v {
        None => Ok(Wait::Decided),
        Some(Value::String(w)) if w == Wait::NAMES[0] => Ok(Wait::Decided),
        Some(Value::String(w)) if w == Wait::NAMES[1] => Ok(Wait::Applied),
        Some(other) => Err(RequestError::new(
            codes::INVALID_REQUEST,
            format!(
                "\"wait\" is {other}; use \"decided\" (answer once the outcome is decided, the default) or \"applied\" (once every participant applied it)"
            ),
        )),
    }
}

/// The request's `"timeoutMs"`, within the limits (absent: the default).
fn parse_timeout(v: Option<&Value>, limits: &Limits) -> Result<u64, RequestError> {
    let Some(v) = v else {
        return Ok(limits.default_timeout_ms);
    };
    v.as_u64()
        .filter(|t| (limits.min_timeout_ms..=limits.max_timeout_ms).contains(t))
        .ok_or_else(|| {
            RequestError::new(
                codes::INVALID_TIMEOUT,
                format!(
                    "timeoutMs must be a whole number of milliseconds from {} to {}",
                    limits.min_timeout_ms, limits.max_timeout_ms
                ),
            )
        })
}

/// Every participant of the list, each item named once. One item is one item whichever way
/// its key is spelled (DynamoDB reads numbers by value): items are told apart by their table
/// and canonical key, never by JSON text.
fn parse_participants(
    list: &[Value],
    services: &BTreeMap<String, ServiceConfig>,
) -> Result<Vec<ParticipantRequest>, RequestError> {
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut participants: Vec<ParticipantRequest> = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let path = format!("participants[{i}]");
        let p = parse_participant(&path, entry, services)?;
        let item = (
            p.service.target.reaches(),
            serde_json::to_string(&canonical_key(&p.key)).unwrap_or_default(),
        );
        if let Some(&first) = seen.get(&item) {
            return Err(named_twice(&path, &p, &participants[first], first));
        }
        seen.insert(item, i);
        participants.push(p);
    }
    Ok(participants)
}

/// The refusal of a participant naming what `participants[first]` names already.
fn named_twice(
    path: &str,
    p: &ParticipantRequest,
    first: &ParticipantRequest,
    first_ix: usize,
) -> RequestError {
    if p.service.kind == ServiceKind::Custom {
        return RequestError::new(
            codes::DUPLICATE_PARTICIPANT,
            format!(
                "{path}: the custom participant {:?} appears more than once; it takes one payload per transaction",
                p.participant
            ),
        );
    }
    let show = |key: &Key| serde_json::to_string(key).unwrap_or_default();
    RequestError::new(
        codes::DUPLICATE_ITEM,
        format!(
            "{path}: the item {} of {:?} is the one participants[{first_ix}] names ({}: numbers are read by value); combine their operations into one",
            show(&p.key),
            p.participant,
            show(&first.key),
        ),
    )
}

fn parse_participant(
    path: &str,
    entry: &Value,
    services: &BTreeMap<String, ServiceConfig>,
) -> Result<ParticipantRequest, RequestError> {
    let invalid = |m: String| RequestError::new(codes::INVALID_REQUEST, m);
    let obj = entry.as_object().ok_or_else(|| {
        invalid(format!(
            "{path}: expected an object with participant and either key and op (a table) or payload (a custom participant)"
        ))
    })?;
    for field in obj.keys() {
        if !["participant", "key", "op", "payload"].contains(&field.as_str()) {
            return Err(invalid(format!(
                "{path}: unknown field {field:?}; expected participant and either key and op (a table) or payload (a custom participant)"
            )));
        }
    }
    let (name, service) = service_named(path, obj, services)?;
    check_fields_for_kind(path, name, service, obj)?;
    let (key, op, payload) = match (service.kind, &service.key) {
        (ServiceKind::Table, Some(schema)) => {
            let key = parse_key(&format!("{path}.key"), obj.get("key"), schema)?;
            let op_value = obj.get("op").ok_or_else(|| {
                invalid(format!("{path}.op: missing; say what to do to the item"))
            })?;
            let op = Operation::from_json(&format!("{path}.op"), op_value)?;
            op.check_against_key(&format!("{path}.op"), &key)?;
            (key, op, None)
        }
        (ServiceKind::Custom, _) => {
            let payload = check_payload(&format!("{path}.payload"), obj.get("payload"))?;
            (Key::new(), Operation::default(), Some(payload))
        }
        // Refused when the configuration is read (`ServiceConfig::problem`).
        (ServiceKind::Table, None) => {
            return Err(invalid(format!(
                "{path}.participant: the service {name:?} is configured without a key"
            )));
        }
    };
    Ok(ParticipantRequest {
        participant: name.to_owned(),
        service: service.clone(),
        key,
        op,
        payload,
    })
}

/// The participant's `"participant"`: the name of a configured service, and the service.
fn service_named<'a>(
    path: &str,
    obj: &'a Map<String, Value>,
    services: &'a BTreeMap<String, ServiceConfig>,
) -> Result<(&'a str, &'a ServiceConfig), RequestError> {
    let name = obj
        .get("participant")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            RequestError::new(
                codes::INVALID_REQUEST,
                format!("{path}.participant: expected the name of a service"),
            )
        })?;
    let service = services.get(name).ok_or_else(|| {
        let known: Vec<&str> = services.keys().map(String::as_str).collect();
        RequestError::new(
            codes::UNKNOWN_PARTICIPANT,
            format!(
                "{path}.participant: no service named {name:?}; configured: {}",
                known.join(", ")
            ),
        )
    })?;
    Ok((name, service))
}

/// A table's entry names `key` and `op`; a custom participant's names `payload` only. Anything
/// else is `wrong_participant_kind`, saying which the service is and what it takes.
fn check_fields_for_kind(
    path: &str,
    name: &str,
    service: &ServiceConfig,
    obj: &Map<String, Value>,
) -> Result<(), RequestError> {
    let wrong = |m: String| RequestError::new(codes::WRONG_PARTICIPANT_KIND, m);
    match service.kind {
        ServiceKind::Table if obj.contains_key("payload") => Err(wrong(format!(
            "{path}.payload: {name:?} is a table's participant: give the item's \"key\" and an \"op\", not a payload"
        ))),
        ServiceKind::Custom => match ["op", "key"].into_iter().find(|f| obj.contains_key(*f)) {
            Some(field) => Err(wrong(format!(
                "{path}.{field}: {name:?} is a custom participant: give its work as \"payload\" (opaque JSON), with no key or op"
            ))),
            None => Ok(()),
        },
        ServiceKind::Table => Ok(()),
    }
}

/// A custom participant's payload: any JSON but `null`, at most [`MAX_PAYLOAD_BYTES`]. What it
/// means is the participant's business (a bad one is its `no` vote, reason `invalid`).
fn check_payload(path: &str, v: Option<&Value>) -> Result<Value, RequestError> {
    let bad = |m: String| RequestError::new(codes::INVALID_PAYLOAD, m);
    let payload = match v {
        None | Some(Value::Null) => {
            return Err(bad(format!(
                "{path}: missing; a custom participant is given its work as JSON"
            )));
        }
        Some(p) => p,
    };
    let size = serde_json::to_string(payload).map_or(usize::MAX, |s| s.len());
    if size > MAX_PAYLOAD_BYTES {
        return Err(bad(format!(
            "{path}: {size} bytes of JSON; at most {MAX_PAYLOAD_BYTES} are allowed"
        )));
    }
    Ok(payload.clone())
}

fn parse_key(path: &str, v: Option<&Value>, schema: &KeySchema) -> Result<Key, RequestError> {
    let bad = |m: String| RequestError::new(codes::INVALID_KEY, m);
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
    use serde_json::json;

    use super::*;
    use crate::record::Target;
    use crate::service::KeyAttribute;

    fn services() -> BTreeMap<String, ServiceConfig> {
        [
            (
                "accounts".to_owned(),
                ServiceConfig::table(
                    Target::Direct {
                        table: "accounts".into(),
                    },
                    KeySchema::string_hash("id"),
                ),
            ),
            (
                "payments".to_owned(),
                ServiceConfig::custom(Target::Http {
                    url: "http://payments.example".into(),
                }),
            ),
        ]
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
        assert_eq!(code(json!({"participants": []})), codes::INVALID_REQUEST);
        assert_eq!(code(json!([])), codes::INVALID_REQUEST);
        assert_eq!(
            code(json!({"participants": [], "extra": 1})),
            codes::INVALID_REQUEST
        );
        assert_eq!(
            code(
                json!({"participants": [{"participant": "nope", "key": {"id": "a"}, "op": {"delete": true}}]})
            ),
            codes::UNKNOWN_PARTICIPANT
        );
        assert_eq!(
            code(
                json!({"participants": [{"participant": "accounts", "key": {"id": 1}, "op": {"delete": true}}]})
            ),
            codes::INVALID_KEY
        );
        assert_eq!(
            code(
                json!({"participants": [{"participant": "accounts", "key": {"id": "a", "x": 1}, "op": {"delete": true}}]})
            ),
            codes::INVALID_KEY
        );
        assert_eq!(
            code(
                json!({"participants": [{"participant": "accounts", "key": {"id": "a"}, "op": {"explode": true}}]})
            ),
            codes::INVALID_OPERATION
        );
        let mut t = transfer();
        t["timeoutMs"] = json!(10);
        assert_eq!(code(t), codes::INVALID_TIMEOUT);
        let dup = json!({"participants": [
            {"participant": "accounts", "key": {"id": "a"}, "op": {"add": {"balance": -1}}},
            {"participant": "accounts", "key": {"id": "a"}, "op": {"add": {"balance": 1}}}]});
        assert_eq!(code(dup), codes::DUPLICATE_ITEM);
        let many: Vec<Value> = (0..33).map(|i| json!({"participant": "accounts", "key": {"id": format!("a{i}")}, "op": {"add": {"b": 1}}})).collect();
        assert_eq!(
            code(json!({"participants": many})),
            codes::TOO_MANY_PARTICIPANTS
        );
    }

    #[test]
    fn one_table_under_two_services_is_one_table_to_the_duplicate_check() {
        let mut services = services();
        let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/accounts";
        services.insert(
            "accounts-by-arn".to_owned(),
            ServiceConfig::table(
                Target::Direct { table: arn.into() },
                KeySchema::string_hash("id"),
            ),
        );
        let body = json!({"participants": [
            {"participant": "accounts", "key": {"id": "a"}, "op": {"add": {"n": 1}}},
            {"participant": "accounts-by-arn", "key": {"id": "a"}, "op": {"add": {"n": 1}}}]});
        let e = TxRequest::parse(&body, &services, &Limits::default()).expect_err("one item");
        assert_eq!(e.code, codes::DUPLICATE_ITEM);
    }

    #[test]
    fn one_number_keyed_item_under_two_spellings_is_a_duplicate_item() {
        let mut services = services();
        services.insert(
            "ledger".to_owned(),
            ServiceConfig::table(
                Target::Direct {
                    table: "ledger".into(),
                },
                KeySchema {
                    hash: KeyAttribute {
                        name: "id".into(),
                        kind: KeyType::N,
                    },
                    range: None,
                },
            ),
        );
        let body = |a: &str, b: &str| -> Value {
            serde_json::from_str(&format!(
                r#"{{"participants": [
                    {{"participant": "ledger", "key": {{"id": {a}}}, "op": {{"add": {{"n": -1}}}}}},
                    {{"participant": "ledger", "key": {{"id": {b}}}, "op": {{"add": {{"n": 1}}}}}}]}}"#
            ))
            .expect("json")
        };
        let parse = |v: Value| TxRequest::parse(&v, &services, &Limits::default());
        for (a, b) in [("1", "1.0"), ("1", "10e-1"), ("1.50", "1.5"), ("0", "-0")] {
            let e = parse(body(a, b)).expect_err("one item");
            assert_eq!(e.code, codes::DUPLICATE_ITEM, "{a} and {b}");
            assert!(
                e.message.contains("participants[0]"),
                "names the first: {}",
                e.message
            );
        }
        let r = parse(body("1", "2")).expect("two items");
        assert_eq!(
            r.participants[0].key["id"].to_string(),
            "1",
            "keys keep their spelling"
        );
        let r = parse(body("1.0", "2")).expect("two items");
        assert_eq!(r.participants[0].key["id"].to_string(), "1.0");
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

    /// A transfer with two of its numbers spelled as given.
    fn spelled(one: &str, five: &str) -> Value {
        serde_json::from_str(&format!(
            r#"{{"participants": [
            {{"participant": "accounts", "key": {{"id": "a"}}, "op": {{"add": {{"balance": {one}}}, "require": {{"balance": {{"gte": {five}}}}}}}}},
            {{"participant": "accounts", "key": {{"id": "b"}}, "op": {{"add": {{"balance": 1}}}}}}]}}"#
        ))
        .expect("json")
    }

    #[test]
    fn hash_reads_numbers_by_value_as_dynamodb_stores_them() {
        let h = |one, five| parse(spelled(one, five)).expect("valid").hash();
        assert_eq!(h("-1", "5"), h("-1.0", "5.00"));
        assert_eq!(h("-1", "5"), h("-10e-1", "0.5E1"));
        assert_ne!(h("-1", "5"), h("-1.5", "5"));
        assert_ne!(h("-1", "5"), h("-1", "50"));
    }

    #[test]
    fn a_record_hashed_before_numbers_were_read_by_value_matches_a_retry_of_the_same_bytes() {
        // The digests `hash` gave these bodies before it read numbers by value (pinned: records
        // written then hold them).
        let before = [
            (
                ("-1.0", "5.00"),
                "4ce37c46f7f483bddf961410736867425ddd419042bd1fd8cea5b51b4f6f4fb7",
            ),
            (
                ("-1", "5"),
                "cccd65a44a509a2bf256aa50ff214b6d98e61ca2dc6c8f5592dd463922d552b7",
            ),
        ];
        for ((one, five), digest) in before {
            let r = parse(spelled(one, five)).expect("valid");
            let record = r.begin(TxId::random(), Some("k"), "c".into(), 1_000);
            assert_eq!(spelled_hash(&record), digest, "{one} {five}");
        }
        // Spelled canonically, the two hashes are one (older and newer coordinators agree).
        let canonical = parse(spelled("-1", "5")).expect("valid");
        assert_eq!(canonical.hash(), before[1].1);
    }

    #[test]
    fn idempotency_keys_are_checked() {
        assert!(check_idempotency_key("order-42").is_ok());
        assert!(check_idempotency_key("").is_err());
        assert!(check_idempotency_key("has space").is_err());
    }

    fn order(payload: Value) -> Value {
        json!({"participants": [
            {"participant": "accounts", "key": {"id": "a"}, "op": {"add": {"balance": -1}}},
            {"participant": "payments", "payload": payload}]})
    }

    #[test]
    fn a_custom_participant_is_given_its_payload_and_no_key_or_operation() {
        let payment = serde_json::from_str(r#"{"card": "4242", "amount": 12.50}"#).expect("json");
        let r = parse(order(payment)).expect("valid");
        let p = &r.participants[1];
        assert_eq!(p.service.kind, ServiceKind::Custom);
        assert!(p.key.is_empty() && p.op.is_empty());
        let payload = p.payload.as_ref().expect("payload");
        assert_eq!(
            payload["amount"].to_string(),
            "12.50",
            "numbers keep their text"
        );
        assert_eq!(r.participants[0].payload, None);
        let record = r.begin(TxId::random(), None, "me".into(), 1);
        assert_eq!(record.participants[1].payload.as_ref(), Some(payload));
        let back: TxRecord =
            serde_json::from_value(serde_json::to_value(&record).expect("ser")).expect("de");
        assert_eq!(back, record, "the payload is recorded with the participant");
        let stored = serde_json::to_value(&record).expect("ser");
        let text = stored["participants"][1]["payload"]
            .as_str()
            .expect("stored as its JSON text");
        assert!(text.contains("12.50"), "numbers exact: {text}");
    }

    #[test]
    fn the_participant_judges_its_payload_the_coordinator_only_its_size() {
        // Any JSON but null: a string or a list is the participant's to refuse.
        assert!(parse(order(json!("anything"))).is_ok());
        assert!(parse(order(json!([1, 2]))).is_ok());
        let code = |v| parse(v).unwrap_err().code;
        assert_eq!(code(order(Value::Null)), codes::INVALID_PAYLOAD);
        let missing = json!({"participants": [{"participant": "payments"}]});
        assert_eq!(code(missing), codes::INVALID_PAYLOAD);
        let big = "x".repeat(MAX_PAYLOAD_BYTES);
        assert_eq!(code(order(json!({"memo": big}))), codes::INVALID_PAYLOAD);
    }

    #[test]
    fn mixing_op_and_payload_against_the_services_kind_is_refused() {
        let code = |v| parse(v).unwrap_err();
        let e = code(json!({"participants": [
            {"participant": "payments", "payload": {"amount": 1}, "op": {"delete": true}}]}));
        assert_eq!(e.code, codes::WRONG_PARTICIPANT_KIND);
        assert!(e.message.contains("custom participant"), "{}", e.message);
        let e = code(json!({"participants": [
            {"participant": "payments", "key": {"id": "a"}, "payload": {"amount": 1}}]}));
        assert_eq!(e.code, codes::WRONG_PARTICIPANT_KIND);
        let e = code(json!({"participants": [
            {"participant": "payments", "op": {"delete": true}}]}));
        assert_eq!(e.code, codes::WRONG_PARTICIPANT_KIND);
        let e = code(json!({"participants": [
            {"participant": "accounts", "key": {"id": "a"}, "payload": {"amount": 1}}]}));
        assert_eq!(e.code, codes::WRONG_PARTICIPANT_KIND);
        assert!(e.message.contains("\"op\""), "{}", e.message);
        let e = code(json!({"participants": [
            {"participant": "payments", "payload": {"amount": 1}},
            {"participant": "payments", "payload": {"amount": 2}}]}));
        assert_eq!(e.code, codes::DUPLICATE_PARTICIPANT);
    }

    #[test]
    fn a_payload_hashes_apart_from_other_payloads() {
        let a = parse(order(json!({"amount": 1}))).expect("valid").hash();
        assert_eq!(a, parse(order(json!({"amount": 1}))).expect("valid").hash());
        assert_ne!(a, parse(order(json!({"amount": 2}))).expect("valid").hash());
    }
}
