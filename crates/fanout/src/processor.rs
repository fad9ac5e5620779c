//! The stream processor: stream records in; rows to the lake and messages to subscribers out;
//! the records whose delivery failed reported back, so Lambda retries just those.

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::future::join_all;
use futures::stream::{self, StreamExt};
use tracing::{info, warn};

use crate::detect::{Change, Detected, Tables, change_of, detect, written_ms};
use crate::ports::{Lake, Push, PushError, Subscriptions};
use crate::rows::{message, row};
use twopc_core::ports::{Clock, SystemClock};

/// How many subscription lookups a batch makes at once.
const LOOKUPS_AT_ONCE: usize = 16;

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
    /// Where the batch's time went.
    pub stages: Stages,
}

/// Where a batch's time went (logged with each batch; `docs/architecture.md` has the
/// breakdown measured with them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stages {
    /// How old the batch's oldest transaction record was when the processor got it (written by
    /// the coordinator → through the stream → here); `None` without one.
    pub age: Option<Duration>,
    /// The lake write.
    pub lake: Duration,
    /// The subscription lookups.
    pub lookup: Duration,
    /// The WebSocket sends, after the lookups.
    pub push: Duration,
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
        self.handle_reporting(event).await.0
    }

    /// [`Processor::handle`], with what the batch did (for its metrics).
    pub async fn handle_reporting(&self, event: &Event) -> (DynamoDbEventResponse, Processed) {
        let changes: Vec<Change> = event.records.iter().filter_map(change_of).collect();
        let done = self.process(&changes).await;
        let mut response = DynamoDbEventResponse::default();
        response.batch_item_failures = done
            .failed
            .iter()
            .cloned()
            .map(|id| {
                let mut f = DynamoDbBatchItemFailure::default();
                f.item_identifier = Some(id);
                f
            })
            .collect();
        (response, done)
    }

    /// The connections subscribed to `topic` (`None`: the lookup failed, and said so).
    async fn listeners(&self, topic: String) -> (String, Option<Vec<String>>) {
        let found = self
            .subscriptions
            .subscribers(std::slice::from_ref(&topic), now_ms() / 1_000)
            .await;
        if let Err(e) = &found {
            warn!(%topic, error = %e, "reading subscriptions failed; the records will be retried");
        }
        (topic, found.ok())
    }

    /// Processes changes in stream order: the lake write and the pushes at the same time (they
    /// are independent; a subscriber need not wait for Firehose), each timed.
    pub async fn process(&self, changes: &[Change]) -> Processed {
        let received = now_ms();
        let mut out = Processed {
            stages: Stages {
                age: changes
                    .iter()
                    .filter_map(|c| written_ms(c, &self.tables))
                    .map(|w| Duration::from_millis(received.saturating_sub(w)))
                    .max(),
                ..Stages::default()
            },
            ..Processed::default()
        };
        let detected: Vec<(usize, crate::detect::Detected)> = changes
            .iter()
            .enumerate()
            .filter_map(|(i, c)| detect(c, &self.tables).map(|d| (i, d)))
            .collect();
        let mut failed = vec![false; changes.len()];
        let ((lake_failed, rows, lake_took), pushed) =
            futures::future::join(self.deliver_rows(&detected), self.push_all(&detected)).await;
        out.rows = rows;
        out.stages.lake = lake_took;
        for c in lake_failed {
            failed[c] = true;
        }
        let Pushed {
            pushed,
            gone,
            failed: push_failed,
            lookup,
            push,
        } = pushed;
        (out.pushed, out.gone, out.stages.lookup, out.stages.push) = (pushed, gone, lookup, push);
        for c in push_failed {
            failed[c] = true;
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
                age_ms = out.stages.age.map(|a| a.as_millis() as u64),
                lake_ms = out.stages.lake.as_millis() as u64,
                lookup_ms = out.stages.lookup.as_millis() as u64,
                push_ms = out.stages.push.as_millis() as u64,
                "stream batch processed"
            );
        }
        out
    }

    /// The batch's rows to the lake in one write: (changes to retry, rows delivered, time).
    async fn deliver_rows(&self, detected: &[(usize, Detected)]) -> (Vec<usize>, usize, Duration) {
        if detected.is_empty() {
            return (vec![], 0, Duration::ZERO);
        }
        let started = Instant::now();
        let rows: Vec<serde_json::Value> = detected.iter().map(|(_, d)| row(d)).collect();
        let retry: Vec<usize> = match self.lake.put(&rows).await {
            Ok(lost) => lost
                .into_iter()
                .filter_map(|i| detected.get(i).map(|(c, _)| *c))
                .collect(),
            Err(e) => {
                warn!(error = %e, rows = rows.len(), "data lake delivery failed; the records will be retried");
                detected.iter().map(|(c, _)| *c).collect()
            }
        };
        let delivered = rows.len() - retry.len().min(rows.len());
        (retry, delivered, started.elapsed())
    }

    /// The batch's messages to their subscribers: one lookup per distinct topic, several at a
    /// time; then each connection's messages in stream order, connections all at once.
    async fn push_all(&self, detected: &[(usize, Detected)]) -> Pushed {
        let mut out = Pushed::default();
        if detected.is_empty() {
            return out;
        }
        let started = Instant::now();
        let messages: Vec<(usize, Vec<String>, String)> = detected
            .iter()
            .map(|(c, d)| {
                let (topics, msg) = message(d);
                (*c, topics, msg.to_string())
            })
            .collect();
        let distinct: BTreeSet<String> = messages
            .iter()
            .flat_map(|(_, t, _)| t.iter().cloned())
            .collect();
        let lookups = distinct.into_iter().map(|topic| self.listeners(topic));
        let listeners: BTreeMap<String, Option<Vec<String>>> = stream::iter(lookups)
            .buffer_unordered(LOOKUPS_AT_ONCE)
            .collect()
            .await;
        out.lookup = started.elapsed();
        let mut queues: BTreeMap<String, Vec<(usize, &str)>> = BTreeMap::new();
        for (c, topics, payload) in &messages {
            let mut to: BTreeSet<&String> = BTreeSet::new();
            let mut known = true;
            for topic in topics {
                match listeners.get(topic) {
                    Some(Some(connections)) => to.extend(connections),
                    _ => known = false,
                }
            }
            if !known {
                out.failed.push(*c);
                continue;
            }
            for connection in to {
                queues
                    .entry(connection.clone())
                    .or_default()
                    .push((*c, payload.as_str()));
            }
        }
        let sent = join_all(queues.iter().map(|(id, queue)| async move {
            let mut results = vec![];
            for (c, payload) in queue {
                let result = self.push.post(id, payload).await;
                let gone = matches!(result, Err(PushError::Gone));
                results.push((*c, result));
                if gone {
                    break; // nothing more reaches it
                }
            }
            (id, results)
        }))
        .await;
        for (id, results) in sent {
            for (c, result) in results {
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
                        out.failed.push(c);
                    }
                }
            }
        }
        out.push = started.elapsed() - out.lookup;
        out
    }
}

/// What [`Processor::push_all`] did.
#[derive(Default)]
struct Pushed {
    pushed: usize,
    gone: usize,
    /// Changes whose messages must be retried.
    failed: Vec<usize>,
    lookup: Duration,
    push: Duration,
}

fn now_ms() -> u64 {
    SystemClock.now_ms()
}
