//! Where committed changes go: the data lake, the subscriptions, the push channel.

use std::future::Future;

use serde_json::Value;

/// A delivery that failed; `retryable` says whether trying again may help.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SinkError {
    /// What happened.
    pub message: String,
    /// Whether a retry may succeed.
    pub retryable: bool,
}

/// The data lake (Firehose in AWS, files locally).
pub trait Lake: Send + Sync {
    /// Delivers rows; returns the indexes of rows that could not be delivered.
    fn put(&self, rows: &[Value]) -> impl Future<Output = Result<Vec<usize>, SinkError>> + Send;
}

/// A shared lake (the local stack keeps one to roll it beside the processor).
impl<L: Lake> Lake for std::sync::Arc<L> {
    async fn put(&self, rows: &[Value]) -> Result<Vec<usize>, SinkError> {
        self.as_ref().put(rows).await
    }
}

/// Who listens to what (the connections table).
pub trait Subscriptions: Send + Sync {
    /// The connections subscribed to any of `topics` (each once) whose subscription has not
    /// expired at `now_secs` (a connection's token expiry ends its pushes).
    fn subscribers(
        &self,
        topics: &[String],
        now_secs: u64,
    ) -> impl Future<Output = Result<Vec<String>, SinkError>> + Send;
    /// Forgets a connection that is gone.
    fn forget(&self, connection_id: &str) -> impl Future<Output = Result<(), SinkError>> + Send;
}

/// Why a push failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PushError {
    /// The connection no longer exists (API Gateway's `GoneException`, HTTP 410).
    #[error("connection gone")]
    Gone,
    /// Anything else; retried.
    #[error("{0}")]
    Failed(String),
}

/// Pushes a message to one WebSocket connection (API Gateway's `PostToConnection`).
pub trait Push: Send + Sync {
    /// Sends `payload` to the connection.
    fn post(
        &self,
        connection_id: &str,
        payload: &str,
    ) -> impl Future<Output = Result<(), PushError>> + Send;
}
