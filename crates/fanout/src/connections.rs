//! The WebSocket routes (`$connect`, `$disconnect`, `subscribe`): one handler, used by the
//! connections Lambda and by the local stack's gateway.
//!
//! `$connect` records the principal the authorizer verified (`requestContext.authorizer`; none
//! means the connection is refused: closed, not open). `{"action": "subscribe", "entities":
//! [{"participant": "accounts", "key": {"id": "alice"}}], "transactions": ["<txId>"]}` or
//! `{"action": "subscribe", "all": true}` is checked topic by topic against the principal's
//! grants (`twopc_authorizer::grants`): one topic not granted refuses the whole message
//! (`topic_forbidden`), nothing stored. A malformed message is answered with an error frame
//! (`invalid_subscription`); the connection stays open. An admitted one is answered once it is
//! stored, `{"type": "subscribed", "topics": N, "from": <epoch ms>}`: every change committed
//! after that answer is pushed (the stream processor reads subscriptions strongly consistent,
//! after the commit it pushes), `from` being when it took effect on this side's clock.

use std::future::Future;

use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use aws_lambda_events::encodings::Body;
use serde_json::{Map, Value, json};
use tracing::{info, warn};
use twopc_authorizer::{AccessRefusal, Grants, Wanted};
use twopc_core::ports::{Clock, PortError};
use twopc_dynamo::connections::{DynamoConnections, StoredConnection};

use crate::rows::{ALL, entity_topic, tx_topic};

/// Most topics one subscribe message may name.
pub const MAX_TOPICS: usize = 100;

/// Where connections and subscriptions are kept.
pub trait ConnectionStore: Send + Sync {
    /// Records a connection's principal and grants; returns when it expires.
    fn connect(
        &self,
        connection: &str,
        principal: &str,
        grants: &str,
        token_exp: u64,
        now_secs: u64,
    ) -> impl Future<Output = Result<u64, PortError>> + Send;
    /// The connection as recorded.
    fn connection(
        &self,
        connection: &str,
    ) -> impl Future<Output = Result<Option<StoredConnection>, PortError>> + Send;
    /// Adds subscriptions, expiring at `expire_at`.
    fn subscribe(
        &self,
        connection: &str,
        topics: &[String],
        expire_at: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
    /// Removes every subscription of the connection.
    fn forget(&self, connection: &str) -> impl Future<Output = Result<(), PortError>> + Send;
}

impl ConnectionStore for DynamoConnections {
    async fn connect(
        &self,
        connection: &str,
        principal: &str,
        grants: &str,
        token_exp: u64,
        now_secs: u64,
    ) -> Result<u64, PortError> {
        DynamoConnections::connect(self, connection, principal, grants, token_exp, now_secs).await
    }
    async fn connection(&self, connection: &str) -> Result<Option<StoredConnection>, PortError> {
        DynamoConnections::connection(self, connection).await
    }
    async fn subscribe(
        &self,
        connection: &str,
        topics: &[String],
        expire_at: u64,
    ) -> Result<(), PortError> {
        DynamoConnections::subscribe(self, connection, topics, expire_at).await
    }
    async fn forget(&self, connection: &str) -> Result<(), PortError> {
        DynamoConnections::forget(self, connection).await
    }
}

impl crate::ports::Subscriptions for DynamoConnections {
    async fn subscribers(
        &self,
        topics: &[String],
        now_secs: u64,
    ) -> Result<Vec<String>, crate::ports::SinkError> {
        DynamoConnections::subscribers(self, topics, now_secs)
            .await
            .map_err(sink_error)
    }
    async fn forget(&self, connection: &str) -> Result<(), crate::ports::SinkError> {
        DynamoConnections::forget(self, connection)
            .await
            .map_err(sink_error)
    }
}

/// One topic a subscribe message asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Asked {
    /// `{"all": true}`.
    All,
    /// One item.
    Entity {
        /// Its service.
        participant: String,
        /// Its key.
        key: Map<String, Value>,
    },
    /// One transaction's outcome.
    Transaction(String),
}

impl Asked {
    /// The topic its messages are published under.
    pub fn topic(&self) -> String {
        match self {
            Asked::All => ALL.to_owned(),
            Asked::Entity { participant, key } => entity_topic(participant, key),
            Asked::Transaction(id) => tx_topic(id),
        }
    }

    /// What the grants are asked for.
    pub fn wanted(&self) -> Wanted<'_> {
        match self {
            Asked::All => Wanted::All,
            Asked::Entity { participant, key } => Wanted::Entity { participant, key },
            Asked::Transaction(id) => Wanted::Transaction(id),
        }
    }
}

fn sink_error(e: PortError) -> crate::ports::SinkError {
    let retryable = !matches!(e, PortError::Invalid { .. });
    crate::ports::SinkError {
        message: e.to_string(),
        retryable,
    }
}

/// What a subscribe message asks for, or what is wrong with it.
pub fn parse_subscribe(body: &str) -> Result<Vec<Asked>, String> {
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
        Some(Value::Bool(true)) => topics.push(Asked::All),
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
        topics.push(Asked::Entity {
            participant: participant.to_owned(),
            key: key.clone(),
        });
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
        topics.push(Asked::Transaction(id.as_str().to_owned()));
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

fn error(status: i64, code: &str, message: impl std::fmt::Display) -> ApiGatewayProxyResponse {
    reply(
        status,
        Some(json!({"type": "error", "code": code, "message": message.to_string()})),
    )
}

fn refused(status: i64, connection: &str, r: &AccessRefusal) -> ApiGatewayProxyResponse {
    // Logged by code, never with the token (which this handler never sees).
    info!(connection, code = r.code(), "websocket request refused");
    error(status, r.code(), r)
}

/// Handles one WebSocket route event, reading the time from `clock`. `$connect` needs the
/// principal an authorizer put in the request context (otherwise 401: closed, not open).
pub async fn handle<S: ConnectionStore, C: Clock>(
    store: &S,
    req: &ApiGatewayWebsocketProxyRequest,
    clock: &C,
) -> ApiGatewayProxyResponse {
    let now_secs = clock.now_secs();
    let ctx = &req.request_context;
    let Some(connection) = ctx.connection_id.as_deref() else {
        return error(
            400,
            "invalid_request",
            "no connection id in the request context",
        );
    };
    match ctx.route_key.as_deref().unwrap_or("$default") {
        "$connect" => connect(store, connection, &ctx.authorizer.fields, now_secs).await,
        "$disconnect" => {
            if let Err(e) = store.forget(connection).await {
                warn!(connection, error = %e, "could not forget the connection (its TTL will)");
            }
            reply(200, None)
        }
        _ => {
            subscribe(
                store,
                connection,
                req.body.as_deref().unwrap_or_default(),
                clock,
            )
            .await
        }
    }
}

/// `$connect`: records the connection with the principal the authorizer admitted, unless
/// expired.
async fn connect<S: ConnectionStore>(
    store: &S,
    connection: &str,
    authorizer: &std::collections::HashMap<String, serde_json::Value>,
    now_secs: u64,
) -> ApiGatewayProxyResponse {
    let principal = match twopc_authorizer::context::from_fields(authorizer) {
        Ok(p) => p,
        Err(r) => return refused(401, connection, &r),
    };
    if principal.exp <= now_secs {
        return refused(401, connection, &AccessRefusal::Expired(principal.exp));
    }
    let grants = serde_json::to_string(&principal.grants).unwrap_or_else(|_| "{}".into());
    match store
        .connect(connection, &principal.sub, &grants, principal.exp, now_secs)
        .await
    {
        Ok(_) => reply(200, None),
        Err(e) => {
            warn!(connection, error = ?e, "could not record the connection");
            reply(500, None)
        }
    }
}

/// `subscribe`: the topics `body` asks for, each within the grants the connection was admitted
/// with, stored until the connection expires, and answered with when that took effect.
async fn subscribe<S: ConnectionStore, C: Clock>(
    store: &S,
    connection: &str,
    body: &str,
    clock: &C,
) -> ApiGatewayProxyResponse {
    let now_secs = clock.now_secs();
    let asked = match parse_subscribe(body) {
        Ok(asked) => asked,
        Err(message) => return error(200, "invalid_subscription", message),
    };
    let stored = match store.connection(connection).await {
        Ok(Some(stored)) => stored,
        Ok(None) => return refused(200, connection, &AccessRefusal::NoPrincipal),
        Err(e) => {
            warn!(connection, error = %e, "could not read the connection");
            return error(
                200,
                "unavailable",
                "the connection could not be read; try again",
            );
        }
    };
    if stored.expire_at <= now_secs {
        return refused(200, connection, &AccessRefusal::ConnectionExpired);
    }
    let grants: Grants = match serde_json::from_str(&stored.grants) {
        Ok(g) => g,
        Err(_) => return refused(200, connection, &AccessRefusal::NoPrincipal),
    };
    if let Err(r) = grants.check_all(asked.iter().map(Asked::wanted)) {
        return refused(200, connection, &r);
    }
    let topics: Vec<String> = asked.iter().map(Asked::topic).collect();
    match store.subscribe(connection, &topics, stored.expire_at).await {
        // Read after the write: a change committed from then on finds the subscription when
        // the stream processor looks its topic up (a later, strongly consistent read).
        Ok(()) => reply(
            200,
            Some(json!({"type": "subscribed", "topics": topics.len(), "from": clock.now_ms()})),
        ),
        Err(e) => {
            warn!(connection, error = %e, "could not store subscriptions");
            error(
                200,
                "unavailable",
                "subscriptions could not be stored; try again",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_name_their_topics() {
        let t: Vec<String> = parse_subscribe(r#"{"action":"subscribe","entities":[{"participant":"accounts","key":{"id":"alice"}}],"transactions":["0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69"]}"#).expect("valid").iter().map(Asked::topic).collect();
        assert_eq!(
            t,
            vec![
                r#"entity:accounts:{"id":"alice"}"#.to_owned(),
                "tx:0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69".to_owned()
            ]
        );
        assert_eq!(
            parse_subscribe(r#"{"action":"subscribe","all":true}"#).expect("all"),
            vec![Asked::All]
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
