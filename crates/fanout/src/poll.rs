//! Local stand-in for Lambda's DynamoDB Streams event source mapping: reads the tables' streams
//! (DynamoDB Local serves them) with `aws-sdk-dynamodbstreams`, turns each batch into the very
//! event Lambda would deliver (`aws_lambda_events::dynamodb::Event`), hands it to the
//! processor, and — like the mapping with `ReportBatchItemFailures` — redelivers from the first
//! failed record until it goes through. Positions are checkpointed after each delivered batch,
//! so a restart resumes where it stopped (at-least-once, never skipping).
//!
//! [`Poller::run`] reads every stream at once, each in its own loop that reads again at once
//! while a shard has a backlog (it filled a batch), soon after records came, and otherwise
//! waits `every`; it lists a stream's shards (`DescribeStream`, costly on DynamoDB Local) at
//! start, when a shard closes or fails, and otherwise every [`DISCOVER_EVERY`]. [`Poller::poll_once`] reads everything there is, once
//! (for tests and tools).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::DynamoDbEventResponse;
use aws_sdk_dynamodbstreams::Client;
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tracing::{Instrument, warn};

/// Where each shard was read up to (shard id → last delivered sequence number).
pub type Checkpoints = BTreeMap<String, String>;

/// The positions of a poller whose checkpoints are deferred ([`Poller::defer_checkpoints`]):
/// read them, make what was delivered up to them durable, then save them.
#[derive(Clone)]
pub struct Checkpointer {
    store: std::sync::Arc<CheckpointStore>,
    file: PathBuf,
}

impl Checkpointer {
    /// Where each shard's delivered records end now (in memory; not yet saved).
    pub fn positions(&self) -> Checkpoints {
        self.store.lock().clone()
    }

    /// Saves `positions` (a temporary file, then a rename): a restart resumes after them.
    pub fn save(&self, positions: &Checkpoints) -> std::io::Result<()> {
        save(&self.file, positions)
    }

    /// The file the positions are saved in.
    pub fn file(&self) -> &std::path::Path {
        &self.file
    }
}

fn save(file: &std::path::Path, positions: &Checkpoints) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(positions).map_err(std::io::Error::other)?;
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, file))
}

/// How often a stream's shards are listed again when none closed or failed: new shards appear
/// when one closes (DynamoDB rolls them over every few hours), which the reading loop notices.
pub const DISCOVER_EVERY: Duration = Duration::from_secs(10);

/// One table's stream.
pub struct StreamSource {
    /// Its ARN.
    pub arn: String,
    iterators: BTreeMap<String, Option<String>>,
}

/// Polls streams and feeds batches to `deliver`.
pub struct Poller {
    client: Client,
    sources: Vec<StreamSource>,
    store: std::sync::Arc<CheckpointStore>,
    /// Records per batch (Lambda's `BatchSize`).
    pub batch_size: i32,
}

/// The checkpoints of every shard, and the file that keeps them across restarts.
struct CheckpointStore {
    checkpoints: Mutex<Checkpoints>,
    file: Option<PathBuf>,
    /// Positions are kept in memory only; a [`Checkpointer`] saves them.
    deferred: std::sync::atomic::AtomicBool,
}

impl CheckpointStore {
    fn get(&self, shard: &str) -> Option<String> {
        self.lock().get(shard).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Checkpoints> {
        // A panic while holding it leaves the map as it was: still the right positions.
        self.checkpoints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records `seq` as delivered on `shard` and, unless deferred, saves every position (a
    /// temporary file, then a rename: a crash leaves the old file or the new one).
    fn advance(&self, shard: &str, seq: &str) {
        let deferred = self.deferred.load(std::sync::atomic::Ordering::Acquire);
        let positions = {
            let mut c = self.lock();
            c.insert(shard.to_owned(), seq.to_owned());
            (!deferred && self.file.is_some()).then(|| c.clone())
        };
        if let (Some(f), Some(positions)) = (&self.file, positions)
            && save(f, &positions).is_err()
        {
            warn!(file = %f.display(), "could not save stream checkpoints");
        }
    }
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

fn attr_json(a: &AttributeValue) -> Value {
    match a {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(_) => json!({"NULL": true}),
        AttributeValue::M(m) => json!({"M": image(m)}),
        AttributeValue::L(l) => json!({"L": l.iter().map(attr_json).collect::<Vec<_>>()}),
        AttributeValue::Ss(v) => json!({"SS": v}),
        AttributeValue::Ns(v) => json!({"NS": v}),
        AttributeValue::B(b) => json!({"B": aws_smithy_types::base64::encode(b.as_ref())}),
        AttributeValue::Bs(v) => {
            json!({"BS": v.iter().map(|b| aws_smithy_types::base64::encode(b.as_ref())).collect::<Vec<_>>()})
        }
        _ => json!({"NULL": true}),
    }
}

fn image(m: &std::collections::HashMap<String, AttributeValue>) -> Map<String, Value> {
    m.iter().map(|(k, v)| (k.clone(), attr_json(v))).collect()
}

/// A stream record in the JSON Lambda delivers.
pub fn lambda_record(arn: &str, r: &Record) -> Value {
    let d = r.dynamodb();
    let mut change = Map::new();
    if let Some(t) = d.and_then(|d| d.approximate_creation_date_time()) {
        change.insert("ApproximateCreationDateTime".into(), json!(t.secs()));
    }
    if let Some(k) = d.and_then(|d| d.keys()) {
        change.insert("Keys".into(), Value::Object(image(k)));
    }
    if let Some(n) = d.and_then(|d| d.new_image()) {
        change.insert("NewImage".into(), Value::Object(image(n)));
    }
    if let Some(o) = d.and_then(|d| d.old_image()) {
        change.insert("OldImage".into(), Value::Object(image(o)));
    }
    change.insert(
        "SequenceNumber".into(),
        json!(d.and_then(|d| d.sequence_number()).unwrap_or_default()),
    );
    change.insert(
        "SizeBytes".into(),
        json!(d.and_then(|d| d.size_bytes()).unwrap_or(0)),
    );
    change.insert("StreamViewType".into(), json!("NEW_AND_OLD_IMAGES"));
    json!({
        "eventID": r.event_id().unwrap_or_default(),
        "eventName": r.event_name().map(|e| e.as_str()).unwrap_or_default(),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": r.aws_region().unwrap_or("us-east-1"),
        "eventSourceARN": arn,
        "dynamodb": change,
    })
}

impl Poller {
    /// Polls the streams of `arns`; `checkpoint_file` (if any) keeps positions across restarts.
    pub fn new(client: Client, arns: Vec<String>, checkpoint_file: Option<PathBuf>) -> Self {
        let checkpoints = checkpoint_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        Poller {
            client,
            sources: arns
                .into_iter()
                .map(|arn| StreamSource {
                    arn,
                    iterators: BTreeMap::new(),
                })
                .collect(),
            store: std::sync::Arc::new(CheckpointStore {
                checkpoints: Mutex::new(checkpoints),
                file: checkpoint_file,
                deferred: false.into(),
            }),
            batch_size: 100,
        }
    }

    /// Positions are no longer saved after each delivered batch but by the returned
    /// [`Checkpointer`], once what was delivered is durable (the local Parquet lake saves them
    /// after a roll). `None` without a checkpoint file.
    pub fn defer_checkpoints(&self) -> Option<Checkpointer> {
        let file = self.store.file.clone()?;
        self.store
            .deferred
            .store(true, std::sync::atomic::Ordering::Release);
        Some(Checkpointer {
            store: self.store.clone(),
            file,
        })
    }

    /// One pass over every shard: reads what is there (all of it, batch by batch) and delivers
    /// it. Returns how many records were delivered. A batch with failures is retried from its
    /// first failed record on the next pass.
    pub async fn poll_once<F, Fut>(&mut self, deliver: &F) -> Result<usize, String>
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
    async fn discover(&mut self, client: &Client, store: &CheckpointStore) -> Result<(), String> {
        let mut start = None;
        loop {
            let out = client
                .describe_stream()
                .stream_arn(&self.arn)
                .set_exclusive_start_shard_id(start)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "describing stream {}: {}",
                        self.arn,
                        aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e)
                    )
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
                    .map_err(|e| {
                        format!(
                            "iterator for {id}: {}",
                            aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e)
                        )
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
    ) -> Result<Read, String>
    where
        F: Fn(Event) -> Fut,
        Fut: std::future::Future<Output = DynamoDbEventResponse>,
    {
        let Some(Some(iterator)) = self.iterators.get(shard).cloned() else {
            return Ok(Read::Reopen(0));
        };
        let reading = Instant::now();
        let out = match client
            .get_records()
            .shard_iterator(&iterator)
            .limit(batch_size)
            .send()
            .await
        {
            Ok(o) => o,
            Err(e) => {
                // An expired iterator, or (DynamoDB Local) a shard with nothing in it yet: start
                // again from the checkpoint.
                let routine = e.as_service_error().is_some_and(|s| {
                    s.is_trimmed_data_access_exception() || s.is_expired_iterator_exception()
                });
                if routine {
                    tracing::debug!(shard, "re-opening the shard iterator");
                } else {
                    warn!(shard, error = %aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e), "reading the shard failed; re-opening it from its checkpoint");
                }
                self.iterators.remove(shard);
                return Ok(Read::Reopen(0));
            }
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
        let event: Event = serde_json::from_value(event_json)
            .map_err(|e| format!("building the stream event: {e}"))?;
        // The batch's log line carries how long `GetRecords` took (the stage before the
        // processor's own; docs/architecture.md).
        let read_ms = reading.elapsed().as_millis() as u64;
        let response = deliver(event)
            .instrument(tracing::info_span!("stream", read_ms))
            .await;
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
                Ok(if closed {
                    Read::Reopen(records.len())
                } else {
                    Read::Delivered(records.len())
                })
            }
            Some(first_failed) => {
                // Keep what went through, redeliver from the first failure.
                if first_failed > 0 {
                    store.advance(shard, seqs[first_failed - 1]);
                }
                self.iterators.remove(shard);
                Ok(Read::Reopen(first_failed))
            }
        }
    }
}

/// The stream ARN of a table.
pub async fn stream_arn(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<String, String> {
    let out = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| {
            format!(
                "describing {table}: {}",
                aws_sdk_dynamodb::error::DisplayErrorContext(&e)
            )
        })?;
    out.table()
        .and_then(|t| t.latest_stream_arn())
        .map(str::to_owned)
        .ok_or_else(|| format!("table {table} has no stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_maps_in_images_are_repaired_and_nothing_else_changes() {
        let body = br#"{"Records":[{"dynamodb":{"NewImage":{"txFence":{},"n":{"N":"0.10"},"m":{"M":{"e":{},"k":{"M":{}}}},"l":{"L":[{}]}}}}]}"#;
        let fixed: Value =
            serde_json::from_slice(&repair_records(body).expect("repaired")).expect("json");
        let image = &fixed["Records"][0]["dynamodb"]["NewImage"];
        assert_eq!(image["txFence"], json!({"M": {}}));
        assert_eq!(image["m"], json!({"M": {"e": {"M": {}}, "k": {"M": {}}}}));
        assert_eq!(image["l"], json!({"L": [{"M": {}}]}));
        assert_eq!(image["n"]["N"], "0.10");
        assert_eq!(
            repair_records(br#"{"Records":[{"dynamodb":{"NewImage":{"a":{"S":"x"}}}}]}"#),
            None
        );
    }

    #[test]
    fn binary_attributes_reach_the_lambda_event_as_standard_base64() {
        let value = attr_json(&AttributeValue::B(aws_smithy_types::Blob::new(b"hello")));
        assert_eq!(value, json!({"B": "aGVsbG8="}));
        let back: serde_dynamo::AttributeValue = serde_json::from_value(value).expect("event");
        assert_eq!(back, serde_dynamo::AttributeValue::B(b"hello".to_vec()));
    }
}

/// A streams client for a local endpoint (`twopc_dynamo::sdk_config`: it sees the same tables
/// as the DynamoDB client), with [`RepairEmptyMaps`].
pub async fn local_client(endpoint: &str) -> Client {
    let sdk = twopc_dynamo::sdk_config(Some(endpoint)).await;
    Client::from_conf(
        aws_sdk_dynamodbstreams::config::Builder::from(&sdk)
            .interceptor(RepairEmptyMaps)
            .build(),
    )
}

/// DynamoDB Local 3.3.0 writes an empty map attribute into stream records as `{}` instead of
/// `{"M": {}}`, which the SDK (rightly) refuses to parse, failing the whole `GetRecords`. This
/// interceptor rewrites such values in the images of a `GetRecords` answer before it is read.
/// Real DynamoDB Streams never send `{}`, so there it changes nothing.
#[derive(Debug)]
pub struct RepairEmptyMaps;

impl aws_smithy_runtime_api::client::interceptors::Intercept for RepairEmptyMaps {
    fn name(&self) -> &'static str {
        "RepairEmptyMaps"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextMut<'_>,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        // The body is still a stream here: wrap it so that it is repaired once read whole.
        let body = context.response_mut().body_mut();
        let inner = std::mem::replace(body, aws_smithy_types::body::SdkBody::taken());
        *body = aws_smithy_types::body::SdkBody::from_body_1_x(Repaired {
            inner,
            buf: Vec::new(),
            done: false,
        });
        Ok(())
    }
}

/// A response body read whole, then handed on repaired.
struct Repaired {
    inner: aws_smithy_types::body::SdkBody,
    buf: Vec<u8>,
    done: bool,
}

impl http_body::Body for Repaired {
    type Data = bytes::Bytes;
    type Error = aws_smithy_types::body::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        loop {
            match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.buf.extend_from_slice(&data);
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    this.done = true;
                    let whole = std::mem::take(&mut this.buf);
                    let out = repair_records(&whole).unwrap_or(whole);
                    return Poll::Ready(Some(Ok(http_body::Frame::data(bytes::Bytes::from(out)))));
                }
            }
        }
    }
}

/// The repaired `GetRecords` body, if anything needed repair.
pub fn repair_records(body: &[u8]) -> Option<Vec<u8>> {
    fn fix(v: &mut Value) -> bool {
        let Value::Object(m) = v else { return false };
        if m.is_empty() {
            m.insert("M".into(), Value::Object(Map::new()));
            return true;
        }
        let mut changed = false;
        if let Some(Value::Object(inner)) = m.get_mut("M") {
            for item in inner.values_mut() {
                changed |= fix(item);
            }
        }
        if let Some(Value::Array(items)) = m.get_mut("L") {
            for item in items {
                changed |= fix(item);
            }
        }
        changed
    }
    let mut doc: Value = serde_json::from_slice(body).ok()?;
    let mut changed = false;
    for record in doc.get_mut("Records")?.as_array_mut()? {
        let Some(change) = record.get_mut("dynamodb") else {
            continue;
        };
        for image in ["Keys", "NewImage", "OldImage"] {
            if let Some(Value::Object(attrs)) = change.get_mut(image) {
                for v in attrs.values_mut() {
                    changed |= fix(v);
                }
            }
        }
    }
    changed.then(|| serde_json::to_vec(&doc).ok()).flatten()
}

/// Pushes through a local gateway's management API (`POST {url}/@connections/{id}`) with the
/// same SDK client code the Lambda uses.
pub async fn local_push(url: &str) -> crate::sinks::ApiGatewayPush {
    let sdk = twopc_dynamo::sdk_config(Some(url)).await;
    crate::sinks::ApiGatewayPush::new(aws_sdk_apigatewaymanagement::Client::new(&sdk))
}
