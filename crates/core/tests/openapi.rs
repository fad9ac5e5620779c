//! `docs/openapi.json` against the registry of codes (`twopc_core::api::codes`): every code is
//! declared, under the status it answers with and with the meaning the registry gives, and the
//! document declares no code the registry lacks. A new code fails here until the document has it.
//!
//! Where a code is declared: the error bodies' `code` of the responses of the document's
//! operations and of its `x-other-answers` (the coordinator's answers to requests that match no
//! operation) for the API's codes, of its `x-local-answers` for the local gateway's own.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use twopc_core::api::codes::{self, Code};

const DOC: &str = include_str!("../../../docs/openapi.json");

/// A code the document declares: (code, status, description).
type Declared = (String, u16, String);

fn doc() -> Value {
    serde_json::from_str(DOC).expect("docs/openapi.json is JSON")
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

fn branches(node: &Value) -> impl Iterator<Item = &Value> {
    ["allOf", "oneOf", "anyOf"]
        .into_iter()
        .filter_map(|k| node.get(k).and_then(Value::as_array))
        .flatten()
}

/// The `const`s a code schema admits, with their descriptions.
fn consts(doc: &Value, node: &Value, out: &mut Vec<(String, String)>) {
    let node = resolve(doc, node);
    if let Some(c) = node.get("const").and_then(Value::as_str) {
        let description = node["description"].as_str().unwrap_or_default();
        out.push((c.to_owned(), description.to_owned()));
    }
    for b in branches(node) {
        consts(doc, b, out);
    }
}

/// The codes a body schema admits in its top-level `code`.
fn body_codes(doc: &Value, node: &Value, out: &mut Vec<(String, String)>) {
    let node = resolve(doc, node);
    if let Some(code) = node.pointer("/properties/code") {
        consts(doc, code, out);
    }
    for b in branches(node) {
        body_codes(doc, b, out);
    }
}

/// Every code a responses object declares.
fn declared(doc: &Value, responses: &Value) -> Vec<Declared> {
    let mut out = vec![];
    for (status, response) in responses.as_object().expect("responses") {
        let status: u16 = status.parse().expect("a numeric status");
        let response = resolve(doc, response);
        let Some(schema) = response.pointer("/content/application~1json/schema") else {
            continue;
        };
        let mut found = vec![];
        body_codes(doc, schema, &mut found);
        out.extend(found.into_iter().map(|(c, d)| (c, status, d)));
    }
    out
}

/// Every code the document declares for the API (`api`) and for the local gateway (`local`).
fn declared_codes(doc: &Value) -> (Vec<Declared>, Vec<Declared>) {
    let mut api = vec![];
    for item in doc["paths"].as_object().expect("paths").values() {
        for op in item.as_object().expect("a path item").values() {
            if let Some(responses) = op.get("responses") {
                api.extend(declared(doc, responses));
            }
        }
    }
    api.extend(declared(doc, &doc["x-other-answers"]["responses"]));
    let local = declared(doc, &doc["x-local-answers"]["responses"]);
    (api, local)
}

/// What the document should say of a code, to paste.
fn entry(c: &Code) -> String {
    format!(
        "\"code.{}\": {{\"const\": \"{}\", \"description\": \"{}\"}} in components.schemas, \
         referenced from a {} response",
        c.name, c.name, c.meaning, c.status
    )
}

#[test]
fn every_code_of_the_registry_is_declared_under_its_status() {
    let doc = doc();
    let (api, local) = declared_codes(&doc);
    let statuses = |found: &[Declared], name: &str| -> BTreeSet<u16> {
        found
            .iter()
            .filter(|(c, ..)| c == name)
            .map(|(_, s, _)| *s)
            .collect()
    };
    for c in codes::REFUSALS.iter().chain(codes::ABORTS) {
        assert_eq!(
            statuses(&api, c.name),
            BTreeSet::from([c.status]),
            "{c} is an answer of the API: declare it under {} only\n  {}",
            c.status,
            entry(c)
        );
    }
    for c in codes::LOCAL {
        assert_eq!(
            statuses(&local, c.name),
            BTreeSet::from([c.status]),
            "{c} is the local gateway's: declare it in x-local-answers under {}\n  {}",
            c.status,
            entry(c)
        );
        // On the API's paths too when the local gateway answers it there (a bad query string).
        let on_api = statuses(&api, c.name);
        assert!(
            on_api.is_empty() || on_api == BTreeSet::from([c.status]),
            "{c}"
        );
    }
}

#[test]
fn the_document_declares_no_code_the_registry_lacks_and_describes_each_as_it_does() {
    let doc = doc();
    let (api, local) = declared_codes(&doc);
    let registry: BTreeMap<&str, Code> = codes::all().map(|c| (c.name, c)).collect();
    for (name, status, description) in api.iter().chain(&local) {
        let c = registry.get(name.as_str()).unwrap_or_else(|| {
            panic!("the document declares {name} ({status}), which twopc_core::api::codes lacks")
        });
        assert_eq!(
            description, c.meaning,
            "the document's description of {name}"
        );
    }
}

#[test]
fn the_votes_reasons_are_the_abort_codes_but_aborted() {
    let doc = doc();
    let mut reasons = vec![];
    consts(
        &doc,
        &doc["components"]["schemas"]["VoteReason"],
        &mut reasons,
    );
    let names: Vec<&str> = reasons.iter().map(|(c, _)| c.as_str()).collect();
    let want: Vec<&str> = codes::ABORTS
        .iter()
        .filter(|c| **c != codes::ABORTED)
        .map(|c| c.name)
        .collect();
    assert_eq!(names, want, "components.schemas.VoteReason");
}
