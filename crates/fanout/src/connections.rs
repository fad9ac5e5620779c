//! The WebSocket routes (`$connect`, `$disconnect`, `subscribe`): one handler, used by the
//! connections Lambda and by the local stack's gateway.
//!
//! `{"action": "subscribe", "entities": [{"participant": "accounts", "key": {"id": "alice"}}],
//!   "transactions": ["<txId>"]}` or `{"action": "subscribe", "all": true}`. A malformed message
//! is answered with an error frame (`{"type": "error", "code": "invalid_subscription", ...}`);
//! the connection stays open.

use std::future::Future;

use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use aws_lambda_events::encodings::Body;
use serde_json::{Map, Value, json};
use tracing::warn;
use twopc_core::ports::PortError;
use twopc_dynamo::connections::DynamoConnections;

use crate::rows::{ALL, entity_topic, tx_topic};

/// Most topics one subscribe message may name.
pub const MAX_TOPICS: usize = 100;

/// Where subscriptions are kept.
pub trait ConnectionStore: Send + Sync {
    /// Adds subscriptions (and the connection's marker).
    fn subscribe(
        &self,
        connection: &str,
        topics: &[String],
        now_secs: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
    /// Removes every subscription of the connection.
    fn forget(&self, connection: &str) -> impl Future<Output = Result<(), PortError>> + Send;
}

impl ConnectionStore for DynamoConnections {
    async fn subscribe(
        &self,
        connection: &str,
        topics: &[String],
        now_secs: u64,
    ) -> Result<(), PortError> {
        DynamoConnections::subscribe(self, connection, topics, now_secs).await
    }
    async fn forget(&self, connection: &str) -> Result<(), PortError> {
        DynamoConnections::forget(self, connection).await
    }
}

impl crate::ports::Subscriptions for DynamoConnections {
    async fn subscribers(&self, topics: &[String]) -> Result<Vec<String>, crate::ports::SinkError> {
        DynamoConnections::subscribers(self, topics)
            .await
            .map_err(sink_error)
    }
    async fn forget(&self, connection: &str) -> Result<(), crate::ports::SinkError> {
        DynamoConnections::forget(self, connection)
            .await
            .map_err(sink_error)
    }
}

fn sink_error(e: PortError) -> crate::ports::SinkError {
    let retryable = !matches!(e, PortError::Invalid { .. });
    crate::ports::SinkError {
        message: e.to_string(),
        retryable,
    }
}

/// The topics a subscribe message asks for, or what is wrong with it.
pub fn parse_subscribe(body: &str) -> Result<Vec<String>, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("expected a JSON object")?;
    match obj.get("action").and_then(Value::as_str) {
        Some("subscribe") => {}
        Some(other) => {
            return Err(format!(
                "unknown action {other:?}; the only action is \"subscribe\""
            ));
        }
        None => return Err("missing \"action\": send {\"action\": \"subscribe\", ...}".into()),
    }
    for field in obj.keys() {
        if !["action", "entities", "transactions", "all"].contains(&field.as_str()) {
            return Err(format!(
                "unknown field {field:?}; use entities, transactions or all"
            ));
        }
    }
    let mut topics = vec![];
    match obj.get("all") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => topics.push(ALL.to_owned()),
        Some(_) => return Err("\"all\" must be true or false".into()),
    }
    for (i, e) in obj
        .get("entities")
        .map(|e| e.as_array().ok_or("\"entities\" must be a list"))
        .transpose()?
        .into_iter()
        .flatten()
        .enumerate()
    {
        let participant = e.get("participant").and_then(Value::as_str).ok_or(format!(
            "entities[{i}].participant: expected a service name"
        ))?;
        let key: &Map<String, Value> = e
            .get("key")
            .and_then(Value::as_object)
            .ok_or(format!("entities[{i}].key: expected the item's key object"))?;
        topics.push(entity_topic(participant, key));
    }
    for (i, t) in obj
        .get("transactions")
        .map(|t| t.as_array().ok_or("\"transactions\" must be a list of ids"))
        .transpose()?
        .into_iter()
        .flatten()
        .enumerate()
    {
        let id = t
            .as_str()
            .ok_or(format!("transactions[{i}]: expected a transaction id"))?;
        let id = twopc_core::ids::TxId::parse(id).map_err(|e| format!("transactions[{i}]: {e}"))?;
        topics.push(tx_topic(id.as_str()));
    }
    if topics.is_empty() {
        return Err("nothing to subscribe to: give entities, transactions or \"all\": true".into());
    }
    if topics.len() > MAX_TOPICS {
        return Err(format!(
            "{} topics; at most {MAX_TOPICS} per message",
            topics.len()
        ));
    }
    Ok(topics)
}

fn reply(status: i64, body: Option<Value>) -> ApiGatewayProxyResponse {
    let mut r = ApiGatewayProxyResponse::default();
    r.status_code = status;
    r.body = body.map(|b| Body::Text(b.to_string()));
    r
}

/// Handles one WebSocket route event. `token`: when set, `$connect` requires `?token=` to
/// match it (otherwise 401, and API Gateway refuses the connection).
pub async fn handle<S: ConnectionStore>(
    store: &S,
    req: &ApiGatewayWebsocketProxyRequest,
    token: Option<&str>,
    now_secs: u64,
) -> ApiGatewayProxyResponse {
    let ctx = &req.request_context;
    let Some(connection) = ctx.connection_id.as_deref() else {
        return reply(
            400,
            Some(
                json!({"type": "error", "code": "invalid_request", "message": "no connection id in the request context"}),
            ),
        );
    };
    match ctx.route_key.as_deref().unwrap_or("$default") {
        "$connect" => {
            if let Some(expected) = token
                && req.query_string_parameters.first("token") != Some(expected)
            {
                return reply(
                    401,
                    Some(
                        json!({"type": "error", "code": "unauthorized", "message": "connect with ?token=<the configured token>"}),
                    ),
                );
            }
            match store.subscribe(connection, &[], now_secs).await {
                Ok(()) => reply(200, None),
                Err(e) => {
                    warn!(connection, error = ?e, "could not record the connection");
                    reply(500, None)
                }
            }
        }
        "$disconnect" => {
            if let Err(e) = store.forget(connection).await {
                warn!(connection, error = %e, "could not forget the connection (its TTL will)");
            }
            reply(200, None)
        }
        _ => match parse_subscribe(req.body.as_deref().unwrap_or_default()) {
            Ok(topics) => match store.subscribe(connection, &topics, now_secs).await {
                Ok(()) => reply(
                    200,
                    Some(json!({"type": "subscribed", "topics": topics.len()})),
                ),
                Err(e) => {
                    warn!(connection, error = %e, "could not store subscriptions");
                    reply(
                        200,
                        Some(
                            json!({"type": "error", "code": "unavailable", "message": "subscriptions could not be stored; try again"}),
                        ),
                    )
                }
            },
            Err(message) => reply(
                200,
                Some(json!({"type": "error", "code": "invalid_subscription", "message": message})),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_name_their_topics() {
        let t = parse_subscribe(r#"{"action":"subscribe","entities":[{"participant":"accounts","key":{"id":"alice"}}],"transactions":["0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69"]}"#).expect("valid");
        assert_eq!(
            t,
            vec![
                r#"entity:accounts:{"id":"alice"}"#.to_owned(),
                "tx:0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69".to_owned()
            ]
        );
        assert_eq!(
            parse_subscribe(r#"{"action":"subscribe","all":true}"#).expect("all"),
            vec!["all".to_owned()]
        );
    }

    #[test]
    fn malformed_subscriptions_say_what_is_wrong() {
        for (body, says) in [
            ("nope", "not JSON"),
            (r#"{"action":"unsubscribe"}"#, "unknown action"),
            (r#"{"action":"subscribe"}"#, "nothing to subscribe"),
            (
                r#"{"action":"subscribe","transactions":["x"]}"#,
                "not a transaction id",
            ),
            (
                r#"{"action":"subscribe","entities":[{"participant":"a"}]}"#,
                "key",
            ),
            (
                r#"{"action":"subscribe","everything":true}"#,
                "unknown field",
            ),
        ] {
            let e = parse_subscribe(body).expect_err(body);
            assert!(e.contains(says), "{body}: {e}");
        }
    }
}
