//! `docs/participant-openapi.json` against the Rust types, in both directions: every call, vote,
//! reason, mode, result and error code the code has is in the document (under the status it
//! answers with, with the same meaning) and the document has nothing the code lacks; every
//! example the document gives deserializes into the type it stands for; the signing scheme it
//! spells out computes the signature `twopc_core::signing` does. A change on either side fails
//! here until the other follows.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use twopc_core::ids::TxId;
use twopc_core::message::{CompleteReply, InquireReply, ParticipantCall, PrepareReply};
use twopc_core::op::Mode;
use twopc_core::record::VoteReason;
use twopc_core::signing::{self, SignatureError};
use twopc_participant_sdk::conformance;
use twopc_participant_sdk::http::codes;

const DOC: &str = include_str!("../../../docs/participant-openapi.json");

fn doc() -> Value {
    serde_json::from_str(DOC).expect("docs/participant-openapi.json is JSON")
}

/// The node a local `$ref` points to.
fn resolve<'a>(doc: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let target = doc
                .pointer(r.trim_start_matches('#'))
                .unwrap_or_else(|| panic!("dangling $ref {r}"));
            resolve(doc, target)
        }
        None => node,
    }
}

/// The `const`s (and `enum` members) a schema admits, with their descriptions.
fn consts(doc: &Value, node: &Value) -> Vec<(String, String)> {
    let node = resolve(doc, node);
    let mut out = vec![];
    if let Some(c) = node.get("const").and_then(Value::as_str) {
        let description = node["description"].as_str().unwrap_or_default();
        out.push((c.to_owned(), description.to_owned()));
    }
    for e in node
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push((e.as_str().expect("a string enum").to_owned(), String::new()));
    }
    for k in ["allOf", "oneOf", "anyOf"] {
        for b in node.get(k).and_then(Value::as_array).into_iter().flatten() {
            out.extend(consts(doc, b));
        }
    }
    out
}

fn names(found: &[(String, String)]) -> BTreeSet<String> {
    found.iter().map(|(c, _)| c.clone()).collect()
}

/// The codes a body schema admits in its top-level `code`.
fn body_codes(doc: &Value, node: &Value) -> Vec<(String, String)> {
    let node = resolve(doc, node);
    let mut out = vec![];
    if let Some(code) = node.pointer("/properties/code") {
        out.extend(consts(doc, code));
    }
    for k in ["allOf", "oneOf", "anyOf"] {
        for b in node.get(k).and_then(Value::as_array).into_iter().flatten() {
            out.extend(body_codes(doc, b));
        }
    }
    out
}

/// The calls the document has: its paths, each `/<action>`.
fn paths(doc: &Value) -> BTreeSet<String> {
    doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .map(|p| p.trim_start_matches('/').to_owned())
        .collect()
}

/// Every participant call, one of each kind. The `match` makes a call added to
/// `ParticipantCall` fail to compile here until it is listed (and so documented).
fn every_call() -> Vec<ParticipantCall> {
    let request = json!({"txId": TxId::random(), "deadline": 2, "began": 1, "key": {},
        "coordinator": "c"});
    let calls: Vec<ParticipantCall> = ["prepare", "commit", "abort", "inquire"]
        .into_iter()
        .map(|action| {
            ParticipantCall::from_json(json!({"action": action, "request": request}))
                .expect("a call")
        })
        .collect();
    for c in &calls {
        match c {
            ParticipantCall::Prepare(_)
            | ParticipantCall::Commit(_)
            | ParticipantCall::Abort(_)
            | ParticipantCall::Inquire(_) => {}
        }
    }
    calls
}

#[test]
fn the_paths_are_the_participant_calls() {
    let doc = doc();
    let actions: BTreeSet<String> = every_call().iter().map(|c| c.action().to_owned()).collect();
    assert_eq!(paths(&doc), actions, "a path per ParticipantCall action");
    for path in paths(&doc) {
        let op = &doc["paths"][format!("/{path}")]["post"];
        assert_eq!(op["operationId"], json!(path), "/{path}: its operationId");
        let params: BTreeSet<String> = op["parameters"]
            .as_array()
            .expect("parameters")
            .iter()
            .map(|p| resolve(&doc, p)["name"].as_str().expect("name").to_owned())
            .collect();
        let signed: BTreeSet<String> = [
            signing::TIMESTAMP_HEADER,
            signing::TX_HEADER,
            signing::SIGNATURE_HEADER,
        ]
        .map(str::to_owned)
        .into();
        assert_eq!(params, signed, "/{path}: every call is signed");
    }
}

#[test]
fn every_example_request_is_its_call_and_every_example_answer_its_reply() {
    let doc = doc();
    let mut seen = 0;
    for path in paths(&doc) {
        let op = &doc["paths"][format!("/{path}")]["post"];
        let examples = op["requestBody"]["content"]["application/json"]["examples"]
            .as_object()
            .expect("request examples");
        assert!(!examples.is_empty(), "/{path}: give an example request");
        for (name, ex) in examples {
            let wire = json!({"action": path, "request": ex["value"]});
            let call = ParticipantCall::from_json(wire.clone())
                .unwrap_or_else(|e| panic!("/{path} example {name}: {e}"));
            assert_eq!(call.action(), path);
            assert_eq!(call.to_json(), wire, "/{path} example {name} round-trips");
            seen += 1;
        }
        let answers = op["responses"]["200"]["content"]["application/json"]["examples"]
            .as_object()
            .expect("answer examples");
        for (name, ex) in answers {
            let value = ex["value"].clone();
            let back = match path.as_str() {
                "prepare" => {
                    serde_json::from_value::<PrepareReply>(value.clone()).map(|r| json!(r))
                }
                "inquire" => {
                    serde_json::from_value::<InquireReply>(value.clone()).map(|r| json!(r))
                }
                _ => serde_json::from_value::<CompleteReply>(value.clone()).map(|r| json!(r)),
            };
            let back = back.unwrap_or_else(|e| panic!("/{path} answer {name}: {e}"));
            assert_eq!(back, value, "/{path} answer {name} round-trips");
            seen += 1;
        }
    }
    for (name, response) in doc["components"]["responses"]
        .as_object()
        .expect("responses")
    {
        let ex = &response["content"]["application/json"]["example"];
        let code = ex["code"].as_str().expect("an example's code");
        let c = codes::ALL
            .iter()
            .find(|c| c.name == code)
            .unwrap_or_else(|| panic!("{name}: example code {code} is no code of http::codes"));
        assert_eq!(format!("Error{}", c.status), *name, "{code}'s status");
        seen += 1;
    }
    assert!(seen >= 10, "{seen} examples");
}

#[test]
fn every_error_code_is_declared_under_its_status_with_its_meaning_and_no_other() {
    let doc = doc();
    let mut declared: BTreeMap<String, (u16, String)> = BTreeMap::new();
    for path in paths(&doc) {
        let responses = &doc["paths"][format!("/{path}")]["post"]["responses"];
        for (status, response) in responses.as_object().expect("responses") {
            let status: u16 = status.parse().expect("a numeric status");
            let response = resolve(&doc, response);
            let Some(schema) = response.pointer("/content/application~1json/schema") else {
                continue;
            };
            for (code, meaning) in body_codes(&doc, schema) {
                let old = declared.insert(code.clone(), (status, meaning.clone()));
                assert!(
                    old.is_none_or(|o| o == (status, meaning)),
                    "{code} is declared twice, differently"
                );
            }
        }
    }
    let registry: BTreeMap<String, (u16, String)> = codes::ALL
        .iter()
        .map(|c| (c.name.to_owned(), (c.status, c.meaning.to_owned())))
        .collect();
    assert_eq!(
        declared, registry,
        "docs/participant-openapi.json's codes (status, description) against http::codes::ALL"
    );
}

#[test]
fn each_signature_refusal_has_its_registered_code() {
    let every = [
        SignatureError::Unsigned(signing::SIGNATURE_HEADER),
        SignatureError::Malformed(signing::TIMESTAMP_HEADER),
        SignatureError::Mismatch,
        SignatureError::Stale {
            signed: 1,
            skew: 2,
            max: 1,
        },
        SignatureError::OtherTransaction {
            signed: "a".into(),
            body: "b".into(),
        },
    ];
    let mut seen = BTreeSet::new();
    for e in &every {
        // A variant added to SignatureError fails to compile here until listed above.
        match e {
            SignatureError::Unsigned(_)
            | SignatureError::Malformed(_)
            | SignatureError::Mismatch
            | SignatureError::Stale { .. }
            | SignatureError::OtherTransaction { .. } => {}
        }
        let code = codes::of_signature(e);
        assert_eq!(code.name, e.code(), "{e}");
        assert_eq!(code.status, 401, "{e}");
        seen.insert(code.name);
    }
    assert_eq!(seen.len(), every.len(), "one code per refusal");
}

#[test]
fn the_votes_reasons_are_those_a_participant_may_send() {
    let doc = doc();
    let schemas = &doc["components"]["schemas"];
    let reasons = names(&consts(&doc, &schemas["VoteReason"]));
    let sent: BTreeSet<String> = VoteReason::ALL
        .iter()
        .filter(|r| **r != VoteReason::Unreachable) // the coordinator's own, for no answer
        .map(|r| {
            let spelled = json!(r).as_str().expect("a string").to_owned();
            assert_eq!(spelled, r.code());
            spelled
        })
        .collect();
    assert_eq!(reasons, sent, "components.schemas.VoteReason");
    for (reason, description) in consts(&doc, &schemas["VoteReason"]) {
        assert!(!description.is_empty(), "describe reason {reason}");
    }
    let votes = names(&consts(&doc, &schemas["YesVote"]["properties"]["vote"]))
        .union(&names(&consts(
            &doc,
            &schemas["NoVote"]["properties"]["vote"],
        )))
        .cloned()
        .collect::<BTreeSet<_>>();
    let yes = json!(PrepareReply {
        vote: twopc_core::record::Vote::yes(Mode::Exclusive),
        prune: None
    });
    let no = json!(PrepareReply::no(VoteReason::Invalid, "x"));
    assert_eq!(
        votes,
        BTreeSet::from(
            [yes["vote"].to_string(), no["vote"].to_string()].map(|v| v.replace('"', ""))
        )
    );
    let modes = names(&consts(&doc, &schemas["Mode"]));
    let every_mode = [Mode::Exclusive, Mode::Reserved].map(|m| {
        // A mode added fails to compile here until listed.
        match m {
            Mode::Exclusive | Mode::Reserved => json!(m).as_str().expect("a string").to_owned(),
        }
    });
    assert_eq!(modes, BTreeSet::from(every_mode), "components.schemas.Mode");
}

#[test]
fn the_complete_results_are_the_replys() {
    let doc = doc();
    let results = names(&consts(
        &doc,
        &json!({"oneOf": doc["components"]["schemas"]["CompleteReply"]["oneOf"]
            .as_array().expect("oneOf").iter()
            .map(|b| b["properties"]["result"].clone()).collect::<Vec<_>>()}),
    ));
    let every = [
        CompleteReply::Done,
        CompleteReply::AlreadyDone,
        CompleteReply::Violation {
            message: "x".into(),
        },
    ];
    let spelled: BTreeSet<String> = every
        .iter()
        .map(|r| {
            match r {
                CompleteReply::Done
                | CompleteReply::AlreadyDone
                | CompleteReply::Violation { .. } => {}
            }
            json!(r)["result"].as_str().expect("result").to_owned()
        })
        .collect();
    assert_eq!(results, spelled, "components.schemas.CompleteReply");
}

#[test]
fn the_documented_string_to_sign_gives_the_signature_the_coordinator_sends() {
    let doc = doc();
    let scheme = &doc["x-twopc-signing"];
    assert_eq!(scheme["algorithm"], "HMAC-SHA256");
    assert_eq!(scheme["headers"]["timestamp"], signing::TIMESTAMP_HEADER);
    assert_eq!(scheme["headers"]["txId"], signing::TX_HEADER);
    assert_eq!(scheme["headers"]["signature"], signing::SIGNATURE_HEADER);
    assert_eq!(scheme["maxSkewMs"], json!(signing::DEFAULT_MAX_SKEW_MS));
    let tx = TxId::random();
    let body = br#"{"txId": "x", "amount": 12.50}"#;
    let sent = signing::sign(b"shared secret", &tx, 1_764_091_234_567, body);
    let header = |name: &str| {
        sent.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
            .expect("header")
    };
    // The document's template, filled in as a reader of it would.
    let text = scheme["stringToSign"]
        .as_str()
        .expect("stringToSign")
        .replace(
            &format!("{{{}}}", signing::TIMESTAMP_HEADER),
            &header(signing::TIMESTAMP_HEADER),
        )
        .replace(&format!("{{{}}}", signing::TX_HEADER), tx.as_str())
        .replace("{body}", std::str::from_utf8(body).expect("utf-8"));
    let hex = hmac_sha256_hex(b"shared secret", text.as_bytes());
    let format = scheme["signatureFormat"].as_str().expect("format");
    assert!(format.starts_with("v1="), "{format}");
    assert_eq!(header(signing::SIGNATURE_HEADER), format!("v1={hex}"));
}

/// HMAC-SHA256 of `message`, computed here (not by the signing module under test).
fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> String {
    use hmac::{KeyInit, Mac};
    let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).expect("any key");
    m.update(message);
    m.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn participants_md_names_every_check_and_what_it_guards_against() {
    let text = include_str!("../../../docs/participants.md");
    for check in conformance::CHECKS {
        assert!(
            text.contains(&format!("`{}`", check.name)),
            "docs/participants.md does not name the check `{}`",
            check.name
        );
    }
}

/// Every request ignores fields it does not know, in the document and in the types (a later
/// coordinator may send more): no request schema closes its properties, each says so, and
/// each call's request with a field no version sends still reads.
#[test]
fn every_request_ignores_unknown_fields_in_the_document_and_the_types() {
    let doc = doc();
    for name in ["PrepareRequest", "CompleteRequest", "InquireRequest"] {
        let schema = &doc["components"]["schemas"][name];
        assert_ne!(
            schema.get("additionalProperties"),
            Some(&json!(false)),
            "{name}"
        );
        let description = schema["description"].as_str().unwrap_or_default();
        assert!(
            description.contains("Unknown fields are ignored"),
            "{name}: {description}"
        );
    }
    for action in ["prepare", "commit", "abort", "inquire"] {
        let request = json!({"txId": TxId::random(), "deadline": 2, "began": 1, "key": {},
            "coordinator": "c", "payload": {}, "prevent": true, "aFieldOfLater": {"x": 1}});
        let call = ParticipantCall::from_json(json!({"action": action, "request": request}));
        assert!(call.is_ok(), "{action}: {call:?}");
    }
}
