//! Item browsing for people and the `twopc` command line (`/local/items/...`): the business
//! view of a service's items (protocol attributes removed, placeholders and tombstones absent),
//! and who holds each lock.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use twopc_core::api::codes;
use twopc_core::ports::ParticipantStore;
use twopc_core::service::KeyType;

use super::answers::{json_response, refusal, refusal_as};
use super::stack::Stack;

fn item_view(state: &twopc_core::item::ItemState) -> Option<Value> {
    let item = twopc_dynamo::items::business_view(state)?;
    Some(json!({"item": item, "lockedBy": state.lock.as_ref().map(|l| l.tx_id.to_string())}))
}

/// `GET /local/items/{participant}`: every item of a service, sorted by key.
pub async fn list_items(
    State(stack): State<Arc<Stack>>,
    UrlPath(participant): UrlPath<String>,
) -> Response {
    match stack.settings.coordinator.services.get(&participant) {
        None => return unknown_participant(&stack, &participant),
        Some(s) if s.key.is_none() => return custom_participant(&participant),
        Some(_) => {}
    }
    let table = stack.demo.table(&participant);
    let client = &stack.client;
    let scanned = client
        .scan()
        .table_name(&table)
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await;
    let scanned = match scanned {
        Ok(items) => items,
        Err(e) => {
            let e = twopc_dynamo::error::classify(format!("scanning {table}"), e);
            return refusal(codes::UNAVAILABLE, e.to_string());
        }
    };
    let mut items: Vec<Value> = scanned
        .iter()
        .filter_map(|raw| twopc_dynamo::items::item_state(raw).ok())
        .filter_map(|state| item_view(&state))
        .collect();
    let key_name = stack
        .settings
        .coordinator
        .services
        .get(&participant)
        .and_then(|s| s.key.as_ref())
        .map(|k| k.hash.name.clone())
        .unwrap_or_default();
    items.sort_by_key(|v| v["item"].get(&key_name).map(Value::to_string));
    json_response(
        StatusCode::OK,
        json!({"participant": participant, "items": items}),
    )
}

/// `GET /local/items/{participant}/{id}`: one item.
pub async fn get_item(
    State(stack): State<Arc<Stack>>,
    UrlPath((participant, id)): UrlPath<(String, String)>,
) -> Response {
    let Some(schema) = stack
        .settings
        .coordinator
        .services
        .get(&participant)
        .and_then(|s| s.key.as_ref())
    else {
        return match stack.settings.coordinator.services.get(&participant) {
            Some(_) => custom_participant(&participant),
            None => unknown_participant(&stack, &participant),
        };
    };
    let value = match schema.hash.kind {
        KeyType::S => Value::String(id.clone()),
        KeyType::N => match id.parse::<serde_json::Number>() {
            Ok(n) => Value::Number(n),
            Err(_) => {
                return refusal(
                    codes::INVALID_KEY,
                    format!("{participant} is keyed by a number; {id:?} is not one"),
                );
            }
        },
    };
    let key = [(schema.hash.name.clone(), value)].into();
    match stack
        .participant
        .store()
        .read(&stack.demo.table(&participant), &key)
        .await
    {
        Ok(Some(state)) => match item_view(&state) {
            Some(v) => json_response(StatusCode::OK, v),
            None => not_found(&participant, &id),
        },
        Ok(None) => not_found(&participant, &id),
        Err(e) => refusal(codes::UNAVAILABLE, e.to_string()),
    }
}

fn not_found(participant: &str, id: &str) -> Response {
    refusal(codes::NOT_FOUND, format!("no item {id:?} in {participant}"))
}

fn unknown_participant(stack: &Stack, participant: &str) -> Response {
    let known: Vec<&String> = stack.settings.coordinator.services.keys().collect();
    // A path naming no service is a missing resource here (404), where a request body naming
    // one is a bad request (400).
    refusal_as(
        StatusCode::NOT_FOUND,
        codes::UNKNOWN_PARTICIPANT,
        format!("no service {participant:?}; configured: {known:?}"),
    )
}

fn custom_participant(participant: &str) -> Response {
    refusal(
        codes::WRONG_PARTICIPANT_KIND,
        format!(
            "{participant} is a custom participant: it keeps its own state, not items here \
             (the demo's payments lists its card authorisations at GET /services/payments/authorisations)"
        ),
    )
}
