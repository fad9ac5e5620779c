//! The poller: lists each stream's shards, reads them with `GetRecords`, delivers each batch as
//! Lambda's event and, like the mapping with `ReportBatchItemFailures`, redelivers from the first
//! failed record; [`Poller::run`] follows every stream in a loop of its own.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::DynamoDbEventResponse;
use aws_sdk_dynamodbstreams::Client;
use aws_sdk_dynamodbstreams::operation::get_records::GetRecordsOutput;
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use serde_json::json;
use tokio::sync::watch;
use tracing::{Instrument, warn};

use super::PollError;
use super::checkpoint::{CheckpointStore, Checkpointer};
use super::event::lambda_record;

/// How often a stream's shards are listed again when none closed or failed: new shards appear
/// when one closes (DynamoDB rolls them over every few hours), which the reading loop notices.
const DISCOVER_EVERY: Duration = Duration::from_secs(10);

/// One table's stream.
struct StreamSource {
    /// Its ARN.
    arn: String,
    iterators: BTreeMap<String, Option<String>>,
}

/// Polls streams and feeds batches to `deliver`.
pub struct Poller {
    client: Client,
    sources: Vec<StreamSource>,
    store: Arc<CheckpointStore>,
    /// Records per batch (Lambda's `BatchSize`).
    pub batch_size: i32,
}

/// What one read of a shard did.
enum Read {
    /// Delivered this many records (all of the batch).
    Delivered(usize),
    /// Nothing there (yet).
    Empty,
    /// The shard is closed and read to its end, or its iterator was lost (expired, trimmed, a
    /// failed read or a failed delivery, which is retried from its checkpoint): list the
    /// stream's shards again. Carries the records delivered before (a partial batch).
    Reopen(usize),
}

impl Poller {
    /// Polls the streams of `arns`; `checkpoint_file` (if any) keeps positions across restarts.
    pub fn new(client: Client, arns: Vec<String>, checkpoint_file: Option<PathBuf>) -> Self {
        Poller {
            client,
            sources: arns
                .into_iter()
                .map(|arn| StreamSource {
                    arn,
                    iterators: BTreeMap::new(),
                })
                .collect(),
            store: Arc::new(CheckpointStore::open(checkpoint_file)),
            batch_size: 100,
        }
    }

    /// Positions are no longer saved after each delivered batch but by the returned
    /// [`Checkpointer`], once what was delivered is durable (the local Parquet lake saves them
    /// after a roll). `None` without a checkpoint file.
    pub fn defer_checkpoints(&self) -> Option<Checkpointer> {
        self.store.defer()
    }

    /// One pass over every shard: reads what is there (all of it, batch by batch) and delivers
    /// it. Returns how many records were delivered. A batch with failures is retried from its
    /// first failed record on the next pass.
    pub async fn poll_once<F, Fut>(&mut self, deliver: &F) -> Result<usize, PollError>
    where
        F: Fn(Event) -> Fut,
        Fut: std::future::Future<Output = DynamoDbEventResponse>,
    {
        let mut delivered = 0;
        for src in &mut self.sources {
            src.discover(&self.client, &self.store).await?;
            for shard in src.open_shards() {
                // GetRecords may answer empty while records lie further on in the shard: only
                // consecutive empty answers mean caught up.
                let mut empty = 0;
                while empty < 3 {
                    match src
                        .read(&self.client, &self.store, &shard, self.batch_size, deliver)
                        .await?
                    {
                        Read::Delivered(n) => {
                            delivered += n;
                            empty = 0;
                        }
                        Read::Empty => empty += 1,
                        Read::Reopen(n) => {
                            delivered += n;
                            break;
                        }
                    }
                }
            }
        }
        Ok(delivered)
    }

    /// Polls until `stop` turns true (or its sender is gone): every stream in its own loop,
    /// which reads again at once while a shard has a backlog, after `every / 4` when records
    /// came, and after `every` when none did. On stop, each loop first reads its shards to the
    /// end (a clean stop leaves nothing written before it undelivered), then returns.
    pub async fn run<F, Fut>(self, every: Duration, deliver: F, stop: watch::Receiver<bool>)
    where
        F: Fn(Event) -> Fut,
        Fut: std::future::Future<Output = DynamoDbEventResponse>,
    {
        let Poller {
            client,
            sources,
            store,
            batch_size,
        } = self;
        let loops: Vec<_> = sources
            .into_iter()
            .map(|src| {
                follow(
                    src,
                    &client,
                    &store,
                    batch_size,
                    every,
                    &deliver,
                    stop.clone(),
                )
            })
            .collect();
        futures::future::join_all(loops).await;
    }
}

/// Reads one stream forever: again at once while a shard has a backlog (a full batch), after
/// a quarter of `every` when records came, after `every` when none did; its shards listed again
/// at [`DISCOVER_EVERY`], or sooner when one closed or failed.
async fn follow<F, Fut>(
    mut src: StreamSource,
    client: &Client,
    store: &CheckpointStore,
    batch_size: i32,
    every: Duration,
    deliver: &F,
    mut stop: watch::Receiver<bool>,
) where
    F: Fn(Event) -> Fut,
    Fut: std::future::Future<Output = DynamoDbEventResponse>,
{
    let mut listed: Option<Instant> = None;
    loop {
        if *stop.borrow() {
            catch_up(&mut src, client, store, batch_size, deliver).await;
            return;
        }
        if listed.is_none_or(|t| t.elapsed() >= DISCOVER_EVERY) {
            match src.discover(client, store).await {
                Ok(()) => listed = Some(Instant::now()),
                Err(e) => {
                    warn!(stream = %src.arn, error = %e, "listing the stream's shards failed; retrying")
                }
            }
        }
        // Read again at once only while a shard has a backlog (it filled a batch), as Lambda's
        // mappings do; soon (a quarter of `every`) after records came, since more usually
        // follow; after `every` when there were none. Each `GetRecords` occupies DynamoDB Local,
        // which serves one request at a time: reading again at once after every small batch
        // took the writes' turn (live bench: aged writes 2.9x slower than fresh).
        let mut backlog = false;
        let mut any = false;
        for shard in src.open_shards() {
            match src.read(client, store, &shard, batch_size, deliver).await {
                Ok(Read::Delivered(n)) => {
                    any = true;
                    backlog |= n >= batch_size.max(1) as usize
                }
                Ok(Read::Empty) => {}
                Ok(Read::Reopen(n)) => {
                    backlog |= n > 0;
                    listed = None;
                }
                Err(e) => {
                    warn!(stream = %src.arn, error = %e, "stream polling failed; retrying");
                    listed = None;
                }
            }
        }
        if !backlog {
            // The streams API has no long poll.
            tokio::select! {
                _ = tokio::time::sleep(if any { every / 4 } else { every }) => {}
                changed = stop.changed() => {
                    if changed.is_err() {
                        // The sender is gone: stop as if told to.
                        catch_up(&mut src, client, store, batch_size, deliver).await;
                        return;
                    }
                }
            }
        }
    }
}

/// The last pass of a stopping loop: every open shard read until it answers empty three times
/// in a row (`GetRecords` may answer empty with records further on), or fails.
async fn catch_up<F, Fut>(
    src: &mut StreamSource,
    client: &Client,
    store: &CheckpointStore,
    batch_size: i32,
    deliver: &F,
) where
    F: Fn(Event) -> Fut,
    Fut: std::future::Future<Output = DynamoDbEventResponse>,
{
    for shard in src.open_shards() {
        let mut empty = 0;
        while empty < 3 {
            match src.read(client, store, &shard, batch_size, deliver).await {
                Ok(Read::Delivered(_)) => empty = 0,
                Ok(Read::Empty) => empty += 1,
                Ok(Read::Reopen(_)) => break,
                Err(e) => {
                    warn!(stream = %src.arn, error = %e, "the last pass before stopping failed; the rest is redelivered at the next start");
                    break;
                }
            }
        }
    }
}

impl StreamSource {
    /// The shards with an iterator to read.
    fn open_shards(&self) -> Vec<String> {
        self.iterators
            .iter()
            .filter(|(_, it)| it.is_some())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Lists the stream's shards and opens an iterator on each one not known yet: after its
    /// checkpoint, or from the oldest record.
    async fn discover(
        &mut self,
        client: &Client,
        store: &CheckpointStore,
    ) -> Result<(), PollError> {
        let mut start = None;
        loop {
            let out = client
                .describe_stream()
                .stream_arn(&self.arn)
                .set_exclusive_start_shard_id(start)
                .send()
                .await
                .map_err(|e| PollError::DescribeStream {
                    arn: self.arn.clone(),
                    source: Box::new(e),
                })?;
            let Some(desc) = out.stream_description() else {
                break;
            };
            for shard in desc.shards() {
                let Some(id) = shard.shard_id() else { continue };
                if self.iterators.contains_key(id) {
                    continue;
                }
                let (kind, seq) = match store.get(id) {
                    Some(seq) => (ShardIteratorType::AfterSequenceNumber, Some(seq)),
                    None => (ShardIteratorType::TrimHorizon, None),
                };
                let it = client
                    .get_shard_iterator()
                    .stream_arn(&self.arn)
                    .shard_id(id)
                    .shard_iterator_type(kind)
                    .set_sequence_number(seq)
                    .send()
                    .await
                    .map_err(|e| PollError::ShardIterator {
                        shard: id.to_owned(),
                        source: Box::new(e),
                    })?;
                self.iterators
                    .insert(id.to_owned(), it.shard_iterator().map(str::to_owned));
            }
            start = desc.last_evaluated_shard_id().map(str::to_owned);
            if start.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// One `GetRecords` on `shard` and, if it brought records, their delivery.
    async fn read<F, Fut>(
        &mut self,
        client: &Client,
        store: &CheckpointStore,
        shard: &str,
        batch_size: i32,
        deliver: &F,
    ) -> Result<Read, PollError>
    where
        F: Fn(Event) -> Fut,
        Fut: std::future::Future<Output = DynamoDbEventResponse>,
    {
        let Some(Some(iterator)) = self.iterators.get(shard).cloned() else {
            return Ok(Read::Reopen(0));
        };
        let reading = Instant::now();
        let Some(out) = self.get_records(client, shard, &iterator, batch_size).await else {
            return Ok(Read::Reopen(0));
        };
        let records = out.records();
        let next = out.next_shard_iterator().map(str::to_owned);
        if records.is_empty() {
            // A closed shard read to its end has no next iterator: it is forgotten (kept as
            // known, so that it is not opened again), and its children are listed.
            let closed = next.is_none();
            self.iterators.insert(shard.to_owned(), next);
            return Ok(if closed { Read::Reopen(0) } else { Read::Empty });
        }
        let event_json = json!({"Records": records.iter().map(|r| lambda_record(&self.arn, r)).collect::<Vec<_>>()});
        let event: Event =
            serde_json::from_value(event_json).map_err(|source| PollError::Event { source })?;
        // The batch's log line carries how long `GetRecords` took (the stage before the
        // processor's own; docs/architecture.md).
        let read_ms = reading.elapsed().as_millis() as u64;
        let response = deliver(event)
            .instrument(tracing::info_span!("stream", read_ms))
            .await;
        Ok(self.settle(store, shard, records, next, &response))
    }

    /// `GetRecords` from `iterator`; `None` when the shard is to be re-opened from its
    /// checkpoint (an expired iterator, or, on DynamoDB Local, a shard with nothing in it yet).
    async fn get_records(
        &mut self,
        client: &Client,
        shard: &str,
        iterator: &str,
        batch_size: i32,
    ) -> Option<GetRecordsOutput> {
        let sent = client
            .get_records()
            .shard_iterator(iterator)
            .limit(batch_size)
            .send()
            .await;
        match sent {
            Ok(o) => Some(o),
            Err(e) => {
                let routine = e.as_service_error().is_some_and(|s| {
                    s.is_trimmed_data_access_exception() || s.is_expired_iterator_exception()
                });
                if routine {
                    tracing::debug!(shard, "re-opening the shard iterator");
                } else {
                    warn!(shard, error = %aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e), "reading the shard failed; re-opening it from its checkpoint");
                }
                self.iterators.remove(shard);
                None
            }
        }
    }

    /// After a delivery: the checkpoint advanced past what went through; the shard read on
    /// from `next` if all did, else re-opened to redeliver from the first failure.
    fn settle(
        &mut self,
        store: &CheckpointStore,
        shard: &str,
        records: &[Record],
        next: Option<String>,
        response: &DynamoDbEventResponse,
    ) -> Read {
        let failed: Vec<&str> = response
            .batch_item_failures
            .iter()
            .filter_map(|f| f.item_identifier.as_deref())
            .collect();
        let seqs: Vec<&str> = records
            .iter()
            .filter_map(|r| r.dynamodb().and_then(|d| d.sequence_number()))
            .collect();
        match seqs.iter().position(|s| failed.contains(s)) {
            None => {
                if let Some(last) = seqs.last() {
                    store.advance(shard, last);
                }
                let closed = next.is_none();
                self.iterators.insert(shard.to_owned(), next);
                if closed {
                    Read::Reopen(records.len())
                } else {
                    Read::Delivered(records.len())
                }
            }
            Some(first_failed) => {
                // Keep what went through, redeliver from the first failure.
                if first_failed > 0 {
                    store.advance(shard, seqs[first_failed - 1]);
                }
                self.iterators.remove(shard);
                Read::Reopen(first_failed)
            }
        }
    }
}
