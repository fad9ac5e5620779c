//! Sinks: the data lake as local files, and pushes through API Gateway's management API (which
//! the local stack's gateway also serves, so the same client code runs in both places).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use aws_sdk_apigatewaymanagement::primitives::Blob;
use serde_json::Value;

use crate::ports::{Lake, Push, PushError, SinkError};
use crate::rows::partition_date;

/// The data lake as newline-delimited JSON files: `DIR/dt=YYYY-MM-DD/<file>.jsonl`.
pub struct FileLake {
    dir: PathBuf,
    file: String,
    lock: Mutex<()>,
}

impl FileLake {
    /// Rows go under `dir`, into files named after `file` (one per writer process).
    pub fn new(dir: impl Into<PathBuf>, file: impl Into<String>) -> Self {
        FileLake {
            dir: dir.into(),
            file: file.into(),
            lock: Mutex::new(()),
        }
    }
}

impl Lake for FileLake {
    async fn put(&self, rows: &[Value]) -> Result<Vec<usize>, SinkError> {
        let _guard = self.lock.lock().map_err(|_| SinkError {
            message: "lake writer poisoned".into(),
            retryable: false,
        })?;
        let mut by_day: std::collections::BTreeMap<String, String> = Default::default();
        for row in rows {
            let day = partition_date(row.get("committedAt").and_then(Value::as_u64).unwrap_or(0));
            let text = by_day.entry(day).or_default();
            text.push_str(&row.to_string());
            text.push('\n');
        }
        for (day, text) in by_day {
            let dir = self.dir.join(format!("dt={day}"));
            let io = |e: std::io::Error| SinkError {
                message: format!("writing {}: {e}", dir.display()),
                retryable: true,
            };
            std::fs::create_dir_all(&dir).map_err(io)?;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(format!("{}.jsonl", self.file)))
                .map_err(io)?;
            // One write per day and batch: a crash leaves whole lines or a torn last line, and
            // the redelivered batch rewrites rows whose eventId tells the duplicates apart.
            f.write_all(text.as_bytes()).map_err(io)?;
            f.flush().map_err(io)?;
        }
        Ok(vec![])
    }
}

/// `PostToConnection` through API Gateway's management API (or the local gateway's).
#[derive(Clone, Debug)]
pub struct ApiGatewayPush {
    client: aws_sdk_apigatewaymanagement::Client,
}

impl ApiGatewayPush {
    /// Pushes through `client` (its endpoint is the WebSocket API's stage URL).
    pub fn new(client: aws_sdk_apigatewaymanagement::Client) -> Self {
        ApiGatewayPush { client }
    }
}

impl Push for ApiGatewayPush {
    async fn post(&self, connection_id: &str, payload: &str) -> Result<(), PushError> {
        match self
            .client
            .post_to_connection()
            .connection_id(connection_id)
            .data(Blob::new(payload.as_bytes().to_vec()))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_gone_exception()) => {
                Err(PushError::Gone)
            }
            Err(e) => Err(PushError::Failed(
                aws_sdk_apigatewaymanagement::error::DisplayErrorContext(&e).to_string(),
            )),
        }
    }
}
