//! The data lake in AWS: Kinesis Data Firehose `PutRecordBatch` (to S3, partitioned by day).
//!
//! Rows go out as newline-delimited JSON in batches within the service limits (500 records,
//! 4 MiB per call, 1,000 KiB per record). A partial failure (`FailedPutCount > 0`) is retried
//! for the failed records only, with exponential backoff; what still fails after the last try
//! is reported back, so the stream processor marks those records for Lambda to retry.

use std::time::Duration;

use aws_sdk_firehose::Client;
use aws_sdk_firehose::primitives::Blob;
use aws_sdk_firehose::types::Record;
use serde_json::Value;
use tracing::warn;

use crate::ports::{Lake, SinkError};

/// Records per `PutRecordBatch` call (service limit).
pub const MAX_RECORDS: usize = 500;
/// Bytes per call (service limit: 4 MiB).
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;
/// Bytes per record (service limit: 1,000 KiB).
pub const MAX_RECORD_BYTES: usize = 1_000 * 1024;

/// Firehose as the data lake.
#[derive(Clone, Debug)]
pub struct FirehoseLake {
    client: Client,
    stream: String,
    attempts: u32,
    backoff: Duration,
}

impl FirehoseLake {
    /// Puts into delivery stream `stream`: up to 4 attempts, backoff from 100 ms.
    pub fn new(client: Client, stream: impl Into<String>) -> Self {
        FirehoseLake {
            client,
            stream: stream.into(),
            attempts: 4,
            backoff: Duration::from_millis(100),
        }
    }

    /// Sets the attempts per batch and the first backoff.
    pub fn with_retries(mut self, attempts: u32, backoff: Duration) -> Self {
        self.attempts = attempts.max(1);
        self.backoff = backoff;
        self
    }

    /// Sends one batch (indexes into `lines`); returns the indexes that still failed.
    async fn send(&self, lines: &[Vec<u8>], batch: Vec<usize>) -> Vec<usize> {
        let mut pending = batch;
        for attempt in 0..self.attempts {
            if attempt > 0 {
                tokio::time::sleep(self.backoff * 2u32.pow(attempt - 1)).await; // service backoff, not test sync
            }
            let records: Vec<Record> = pending
                .iter()
                .filter_map(|i| {
                    Record::builder()
                        .data(Blob::new(lines[*i].clone()))
                        .build()
                        .ok()
                })
                .collect();
            match self
                .client
                .put_record_batch()
                .delivery_stream_name(&self.stream)
                .set_records(Some(records))
                .send()
                .await
            {
                Ok(out) if out.failed_put_count() == 0 => return vec![],
                Ok(out) => {
                    let responses = out.request_responses();
                    let failed: Vec<usize> = pending
                        .iter()
                        .enumerate()
                        .filter(|(pos, _)| {
                            responses.get(*pos).is_none_or(|r| r.error_code().is_some())
                        })
                        .map(|(_, i)| *i)
                        .collect();
                    warn!(stream = %self.stream, failed = failed.len(), attempt = attempt + 1, "Firehose rejected some records; retrying those");
                    pending = failed;
                }
                Err(e) => {
                    warn!(stream = %self.stream, attempt = attempt + 1, error = %aws_sdk_firehose::error::DisplayErrorContext(&e), "PutRecordBatch failed; retrying the batch");
                }
            }
        }
        pending
    }
}

/// Splits lines into batches within the call limits.
pub fn batches(lines: &[Vec<u8>]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = vec![];
    let mut bytes = 0;
    for (i, line) in lines.iter().enumerate() {
        let fits = out
            .last()
            .is_some_and(|b| b.len() < MAX_RECORDS && bytes + line.len() <= MAX_BATCH_BYTES);
        if !fits {
            out.push(vec![]);
            bytes = 0;
        }
        if let Some(b) = out.last_mut() {
            b.push(i);
        }
        bytes += line.len();
    }
    out
}

impl Lake for FirehoseLake {
    async fn put(&self, rows: &[Value]) -> Result<Vec<usize>, SinkError> {
        let lines: Vec<Vec<u8>> = rows.iter().map(|r| format!("{r}\n").into_bytes()).collect();
        let mut failed = vec![];
        for (i, line) in lines.iter().enumerate() {
            if line.len() > MAX_RECORD_BYTES {
                // Cannot go through Firehose at all: reported, so the record lands in the
                // event source mapping's on-failure destination instead of vanishing.
                warn!(
                    bytes = line.len(),
                    "row larger than Firehose's record limit"
                );
                failed.push(i);
            }
        }
        let sendable: Vec<usize> = (0..lines.len()).filter(|i| !failed.contains(i)).collect();
        let subset: Vec<Vec<u8>> = sendable.iter().map(|i| lines[*i].clone()).collect();
        for batch in batches(&subset) {
            for lost in self.send(&subset, batch).await {
                failed.push(sendable[lost]);
            }
        }
        failed.sort_unstable();
        Ok(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_respect_record_and_byte_limits() {
        let small = vec![vec![b'x'; 10]; 1_201];
        let b = batches(&small);
        assert_eq!(
            b.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![500, 500, 201]
        );
        let big = vec![vec![b'x'; 900 * 1024]; 10];
        let b = batches(&big);
        assert!(
            b.iter()
                .all(|batch| batch.len() * 900 * 1024 <= MAX_BATCH_BYTES)
        );
        assert_eq!(b.iter().map(Vec::len).sum::<usize>(), 10);
    }
}
