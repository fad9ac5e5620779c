//! The stream processor: stream records in; rows to the lake and messages to subscribers out;
//! the records whose delivery failed reported back, so Lambda retries just those.

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use futures::future::join_all;
use tracing::{info, warn};

use crate::detect::{Change, Tables, change_of, detect};
use crate::ports::{Lake, Push, PushError, Subscriptions};
use crate::rows::{message, row};

/// What one batch did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Processed {
    /// Rows delivered to the lake.
    pub rows: usize,
    /// Messages delivered to connections.
    pub pushed: usize,
    /// Connections found gone and forgotten.
    pub gone: usize,
    /// Sequence numbers of the records to retry.
    pub failed: Vec<String>,
}

/// The processor over a lake, the subscriptions and a push channel.
pub struct Processor<K, S, P> {
    tables: Tables,
    lake: K,
    subscriptions: S,
    push: P,
}

impl<K: Lake, S: Subscriptions, P: Push> Processor<K, S, P> {
    /// Wires a processor for the tables it knows.
    pub fn new(tables: Tables, lake: K, subscriptions: S, push: P) -> Self {
        Processor {
            tables,
            lake,
            subscriptions,
            push,
        }
    }

    /// Handles a Lambda DynamoDB Streams event (also what the local stream poller sends).
    pub async fn handle(&self, event: &Event) -> DynamoDbEventResponse {
        let changes: Vec<Change> = event.records.iter().filter_map(change_of).collect();
        let done = self.process(&changes).await;
        let mut response = DynamoDbEventResponse::default();
        response.batch_item_failures = done
            .failed
            .into_iter()
            .map(|id| {
                let mut f = DynamoDbBatchItemFailure::default();
                f.item_identifier = Some(id);
                f
            })
            .collect();
        response
    }

    /// Processes changes in stream order.
    pub async fn process(&self, changes: &[Change]) -> Processed {
        let mut out = Processed::default();
        let detected: Vec<(usize, crate::detect::Detected)> = changes
            .iter()
            .enumerate()
            .filter_map(|(i, c)| detect(c, &self.tables).map(|d| (i, d)))
            .collect();
        let mut failed = vec![false; changes.len()];
        if !detected.is_empty() {
            let rows: Vec<serde_json::Value> = detected.iter().map(|(_, d)| row(d)).collect();
            match self.lake.put(&rows).await {
                Ok(lost) => {
                    out.rows = rows.len() - lost.len();
                    for i in lost {
                        if let Some((c, _)) = detected.get(i) {
                            failed[*c] = true;
                        }
                    }
                }
                Err(e) => {
                    warn!(error = %e, rows = rows.len(), "data lake delivery failed; the records will be retried");
                    for (c, _) in &detected {
                        failed[*c] = true;
                    }
                }
            }
        }
        for (c, d) in &detected {
            let (topics, msg) = message(d);
            let connections = match self.subscriptions.subscribers(&topics).await {
                Ok(c) => c,
                Err(e) => {
                    warn!(error = %e, "reading subscriptions failed; the record will be retried");
                    failed[*c] = true;
                    continue;
                }
            };
            let payload = msg.to_string();
            let results = join_all(connections.iter().map(|id| {
                let payload = &payload;
                async move { (id, self.push.post(id, payload).await) }
            }))
            .await;
            for (id, result) in results {
                match result {
                    Ok(()) => out.pushed += 1,
                    Err(PushError::Gone) => {
                        out.gone += 1;
                        if let Err(e) = self.subscriptions.forget(id).await {
                            warn!(connection = %id, error = %e, "could not forget a gone connection");
                        }
                    }
                    Err(PushError::Failed(e)) => {
                        warn!(connection = %id, error = %e, "push failed; the record will be retried");
                        failed[*c] = true;
                    }
                }
            }
        }
        out.failed = changes
            .iter()
            .zip(failed)
            .filter(|(_, f)| *f)
            .map(|(c, _)| c.sequence_number.clone())
            .collect();
        if out.rows > 0 || out.pushed > 0 || !out.failed.is_empty() {
            info!(
                records = changes.len(),
                rows = out.rows,
                pushed = out.pushed,
                gone = out.gone,
                failed = out.failed.len(),
                "stream batch processed"
            );
        }
        out
    }
}
