//! The SDK's HTTP client wrapped so that every DynamoDB request takes a sampled time: the
//! operation is read from the request's `X-Amz-Target` header (`DynamoDB_20120810.UpdateItem`),
//! a `TransactWriteItems`'s item count from its body, and the delay drawn from that operation's
//! distribution ([`LatencyModel::of`]) with one seeded generator, times the dilation factor.
//!
//! The request waits half its delay (the way there), goes to the engine, and its response is
//! held until the whole delay has passed since it was sent (the way back): what the request
//! writes lands midway, as over a network, and the engine's own time (which the published
//! figures already contain, as DynamoDB's) stays hidden unless it is longer than the second
//! half; such requests are counted late ([`Injected::overruns`]).
//!
//! Under the production model ([`Service`]), a write that reaches the service (halfway) is
//! admitted by it first: a transaction cancelled on a held item or an over-rate partition, a
//! single write refused or throttled, is answered as DynamoDB answers it
//! (`TransactionCanceledException` with `TransactionConflict` or `ThrottlingError`,
//! `TransactionConflictException`, `ProvisionedThroughputExceededException` with its throttling
//! reason) without reaching the engine. A served single write's units, as the engine reports
//! them, correct its partition's charge ([`Service::settle`]).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::json;

use crate::counter::OPERATIONS;
use crate::inject::model::LatencyModel;
use crate::inject::service::{Admission, Service, Writes, writes_of};

#[derive(Debug, Default)]
struct Counts {
    requests: [AtomicU64; OPERATIONS.len()],
    nanos: [AtomicU64; OPERATIONS.len()],
    overruns: AtomicU64,
    conflicts: AtomicU64,
    throttles: AtomicU64,
}

/// The delays injected so far, by [`OPERATIONS`] slot (subtract two to get a window's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Injected {
    /// Requests delayed.
    pub requests: [u64; OPERATIONS.len()],
    /// Their delays added up.
    pub total: [Duration; OPERATIONS.len()],
    /// Requests that the engine answered later than their delay allowed (their time was half
    /// the delay plus the engine's, longer than sampled).
    pub overruns: u64,
    /// Writes the production model's service answered with a transaction conflict (a
    /// transaction cancelled, a single write refused).
    pub conflicts: u64,
    /// Writes it rejected over a partition's rate (throttled).
    pub throttles: u64,
}

impl Injected {
    /// `self - earlier`.
    pub fn since(&self, earlier: &Injected) -> Injected {
        let mut out = Injected::default();
        for i in 0..OPERATIONS.len() {
            out.requests[i] = self.requests[i].saturating_sub(earlier.requests[i]);
            out.total[i] = self.total[i].saturating_sub(earlier.total[i]);
        }
        out.overruns = self.overruns.saturating_sub(earlier.overruns);
        out.conflicts = self.conflicts.saturating_sub(earlier.conflicts);
        out.throttles = self.throttles.saturating_sub(earlier.throttles);
        out
    }

    /// `self + other`.
    pub fn plus(&self, other: &Injected) -> Injected {
        let mut out = *self;
        for i in 0..OPERATIONS.len() {
            out.requests[i] += other.requests[i];
            out.total[i] += other.total[i];
        }
        out.overruns += other.overruns;
        out.conflicts += other.conflicts;
        out.throttles += other.throttles;
        out
    }

    /// Requests delayed, every operation.
    pub fn requests(&self) -> u64 {
        self.requests.iter().sum()
    }

    /// Requests and delay of one operation.
    pub fn of(&self, op: &str) -> (u64, Duration) {
        OPERATIONS
            .iter()
            .position(|o| *o == op)
            .map_or((0, Duration::ZERO), |i| (self.requests[i], self.total[i]))
    }
}

/// Draws the delays; clones share the generator and the counts.
#[derive(Clone)]
pub struct Injector {
    model: Arc<LatencyModel>,
    dilation: u32,
    rng: Arc<Mutex<SmallRng>>,
    counts: Arc<Counts>,
    service: Option<Arc<Service>>,
}

/// One request's fate: its delay, and what it writes (for the production model).
struct Plan {
    delay: Duration,
    transaction: bool,
    writes: Option<Writes>,
}

impl fmt::Debug for Injector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injector")
            .field("model", &self.model)
            .field("dilation", &self.dilation)
            .finish_non_exhaustive()
    }
}

impl Injector {
    /// An injector of `model`'s delays times `dilation`, its generator seeded with `model.seed`.
    pub fn new(model: LatencyModel, dilation: u32) -> Injector {
        Injector {
            rng: Arc::new(Mutex::new(SmallRng::seed_from_u64(model.seed))),
            model: Arc::new(model),
            dilation: dilation.max(1),
            counts: Arc::new(Counts::default()),
            service: None,
        }
    }

    /// This injector, its writes admitted by `service` (the production model).
    pub fn with_service(mut self, service: Service) -> Injector {
        self.service = Some(Arc::new(service));
        self
    }

    /// The delays injected so far.
    pub fn snapshot(&self) -> Injected {
        let mut out = Injected::default();
        for i in 0..OPERATIONS.len() {
            out.requests[i] = self.counts.requests[i].load(Ordering::Relaxed);
            out.total[i] = Duration::from_nanos(self.counts.nanos[i].load(Ordering::Relaxed));
        }
        out.overruns = self.counts.overruns.load(Ordering::Relaxed);
        out.conflicts = self.counts.conflicts.load(Ordering::Relaxed);
        out.throttles = self.counts.throttles.load(Ordering::Relaxed);
        out
    }

    /// The plan of `request`: its delay, and under the production model what it writes.
    fn plan(&self, request: &HttpRequest) -> Option<Plan> {
        let delay = self.delay_for(request)?;
        let op = operation(request);
        let writes = self
            .service
            .as_ref()
            .and_then(|_| writes_of(op, request.body().bytes()?));
        Some(Plan {
            delay,
            transaction: op == "TransactWriteItems",
            writes,
        })
    }

    /// What the service does with `plan`'s writes, arriving now: `Ok(units)` charged per item
    /// to go on, `Err(response)` to answer with a conflict or a throttle.
    fn admit(&self, plan: &Plan) -> Result<u32, Box<HttpResponse>> {
        let (Some(service), Some(writes)) = (&self.service, &plan.writes) else {
            return Ok(0);
        };
        let (counter, refusal) = match service.admit(plan.transaction, writes, plan.delay) {
            Admission::Served(units) => return Ok(units),
            Admission::Cancelled { busy, throttled } => (
                if busy.is_empty() {
                    &self.counts.throttles
                } else {
                    &self.counts.conflicts
                },
                cancelled(writes.items.len(), &busy, &throttled),
            ),
            Admission::Refused => (&self.counts.conflicts, conflict_exception()),
            Admission::Throttled => (&self.counts.throttles, throttled(&writes.items[0])),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        Err(Box::new(refusal))
    }

    /// Draws (and counts) the delay of `request`; `None` if its operation is not delayed.
    pub fn delay_for(&self, request: &HttpRequest) -> Option<Duration> {
        let op = operation(request);
        let items = if op == "TransactWriteItems" {
            request
                .body()
                .bytes()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
                .and_then(|v| v.get("TransactItems")?.as_array().map(Vec::len))
                .unwrap_or(1)
        } else {
            1
        };
        let distribution = self.model.of(op, items)?;
        let ms = distribution.sample(&mut *self.rng.lock().unwrap_or_else(PoisonError::into_inner));
        let delay = Duration::from_secs_f64(ms / 1e3) * self.dilation;
        let slot = crate::counter::slot(op);
        self.counts.requests[slot].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.counts.nanos[slot].fetch_add(ns, Ordering::Relaxed);
        Some(delay)
    }

    /// `inner`, its every connector delaying requests.
    pub fn wrap(&self, inner: SharedHttpClient) -> SharedHttpClient {
        SharedHttpClient::new(InjectingClient {
            inner,
            injector: self.clone(),
        })
    }

    /// `inner`, delaying requests.
    pub fn connector(&self, inner: SharedHttpConnector) -> InjectingConnector {
        InjectingConnector {
            inner,
            injector: self.clone(),
        }
    }

    /// A served single write's response: its units as the engine reports them settle what its
    /// partition was charged. The body is read whole and put back.
    async fn settle(&self, plan: &Plan, charged: u32, response: HttpResponse) -> HttpResponse {
        let (Some(service), Some(writes)) = (&self.service, &plan.writes) else {
            return response;
        };
        if plan.transaction || response.status().as_u16() != 200 {
            return response;
        }
        let mut response = response;
        let body = response.take_body();
        let Ok(bytes) = ByteStream::new(body)
            .collect()
            .await
            .map(|b| b.into_bytes())
        else {
            return response;
        };
        let units = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v["ConsumedCapacity"]["CapacityUnits"].as_f64());
        if let Some(units) = units {
            service.settle(&writes.items[0], charged, units.ceil() as u32);
        }
        *response.body_mut() = SdkBody::from(bytes);
        response
    }
}

#[derive(Debug)]
struct InjectingClient {
    inner: SharedHttpClient,
    injector: Injector,
}

impl HttpClient for InjectingClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(
            self.injector
                .connector(self.inner.http_connector(settings, components)),
        )
    }

    fn connector_metadata(
        &self,
    ) -> Option<aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata> {
        self.inner.connector_metadata()
    }
}

/// A connector that holds each request and its response so that together they take the
/// request's delay (or the engine's time plus half of it, if longer).
#[derive(Debug)]
pub struct InjectingConnector {
    inner: SharedHttpConnector,
    injector: Injector,
}

impl HttpConnector for InjectingConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let plan = self.injector.plan(&request);
        let inner = self.inner.clone();
        let injector = self.injector.clone();
        HttpConnectorFuture::new(async move {
            let Some(plan) = plan else {
                return inner.call(request).await;
            };
            let due = tokio::time::Instant::now() + plan.delay;
            tokio::time::sleep(plan.delay / 2).await;
            let charged = match injector.admit(&plan) {
                Ok(units) => units,
                Err(refusal) => {
                    tokio::time::sleep_until(due).await;
                    return Ok(*refusal);
                }
            };
            let response = inner.call(request).await;
            if tokio::time::Instant::now() > due {
                injector.counts.overruns.fetch_add(1, Ordering::Relaxed);
            }
            let response = match response {
                Ok(r) if charged > 0 => Ok(injector.settle(&plan, charged, r).await),
                other => other,
            };
            tokio::time::sleep_until(due).await;
            response
        })
    }
}

/// The operation of a request, from `X-Amz-Target: DynamoDB_20120810.UpdateItem`.
fn operation(request: &HttpRequest) -> &str {
    request
        .headers()
        .get("x-amz-target")
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("other")
}

/// DynamoDB's message for a write over its partition's rate (on-demand).
const THROTTLED: &str = "Throughput exceeds the current capacity of your table or index. \
                         DynamoDB is automatically scaling your table or index so please try \
                         again shortly. If exceptions persist, check if you have a hot key: \
                         https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html";

/// DynamoDB's answer to a transaction of `items` items cancelled on the items at `busy` (a
/// conflict) and `throttled` (over their partition's rate).
fn cancelled(items: usize, busy: &[usize], throttled: &[usize]) -> HttpResponse {
    let reasons: Vec<_> = (0..items)
        .map(|i| {
            if busy.contains(&i) {
                json!({"Code": "TransactionConflict",
                    "Message": "Transaction is ongoing for the item"})
            } else if throttled.contains(&i) {
                json!({"Code": "ThrottlingError", "Message": THROTTLED})
            } else {
                json!({"Code": "None"})
            }
        })
        .collect();
    error_response(&json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons",
        "CancellationReasons": reasons,
    }))
}

/// DynamoDB's answer to a single write on an item a transaction holds.
fn conflict_exception() -> HttpResponse {
    error_response(&json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionConflictException",
        "message": "Transaction is ongoing for the item",
    }))
}

/// DynamoDB's answer to a single write over its partition's rate: the exception the SDK's
/// standard retry classifies as throttling, with its reason and the table.
fn throttled(item: &str) -> HttpResponse {
    let table = item.split('/').next().unwrap_or_default();
    error_response(&json!({
        "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
        "message": THROTTLED,
        "ThrottlingReasons": [{
            "reason": "TableWriteKeyRangeThroughputExceeded",
            "resource": format!("arn:aws:dynamodb:us-east-1:000000000000:table/{table}"),
        }],
    }))
}

fn error_response(body: &serde_json::Value) -> HttpResponse {
    let mut response = HttpResponse::new(
        400.try_into().expect("a status code"),
        SdkBody::from(body.to_string()),
    );
    response
        .headers_mut()
        .insert("content-type", "application/x-amz-json-1.0");
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    /// A connector that notes when it was called and answers after `takes`.
    #[derive(Debug, Default)]
    struct Answering {
        calls: Arc<Mutex<Vec<Instant>>>,
        takes: Duration,
    }

    impl HttpConnector for Answering {
        fn call(&self, _request: HttpRequest) -> HttpConnectorFuture {
            self.calls.lock().unwrap().push(Instant::now());
            let takes = self.takes;
            HttpConnectorFuture::new(async move {
                tokio::time::sleep(takes).await;
                Ok(HttpResponse::new(200.try_into().unwrap(), SdkBody::empty()))
            })
        }
    }

    fn request(op: &str, body: &str) -> HttpRequest {
        let mut r = HttpRequest::new(SdkBody::from(body));
        r.headers_mut()
            .insert("x-amz-target", format!("DynamoDB_20120810.{op}"));
        r
    }

    fn first_sample(model: &LatencyModel, op: &str, items: usize) -> Duration {
        let d = model.of(op, items).expect("a delayed operation");
        let ms = d.sample(&mut SmallRng::seed_from_u64(model.seed));
        Duration::from_secs_f64(ms / 1e3)
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_request_takes_its_sampled_delay_and_lands_midway() {
        // GIVEN a connector injecting the default model's delays in front of one that answers
        // at once
        let model = LatencyModel::default();
        let expected = first_sample(&model, "UpdateItem", 1);
        let injector = Injector::new(model, 1);
        let calls = Arc::new(Mutex::new(vec![]));
        let connector = injector.connector(SharedHttpConnector::new(Answering {
            calls: calls.clone(),
            takes: Duration::ZERO,
        }));

        // WHEN an UpdateItem goes through it (the clock paused: tokio advances it when idle)
        let sent = Instant::now();
        let response = connector.call(request("UpdateItem", "{}")).await;

        // THEN its answer came once its delay, the seeded sample of a single write, had passed
        assert_eq!(response.expect("answered").status().as_u16(), 200);
        assert!(expected > Duration::from_millis(1));
        assert!(
            sent.elapsed() >= expected,
            "{:?} < {expected:?}",
            sent.elapsed()
        );
        assert!(sent.elapsed() < expected + Duration::from_millis(1));
        // AND it reached DynamoDB halfway through
        let forwarded = calls.lock().unwrap()[0] - sent;
        assert!(forwarded >= expected / 2 && forwarded < expected / 2 + Duration::from_millis(1));
        let injected = injector.snapshot();
        assert_eq!(injected.of("UpdateItem"), (1, expected));
        assert_eq!(injected.overruns, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_dynamodb_answers_late_is_not_held_further_and_is_counted() {
        let model = LatencyModel::default();
        let expected = first_sample(&model, "PutItem", 1);
        let injector = Injector::new(model, 1);
        let slow = expected * 2;
        let connector = injector.connector(SharedHttpConnector::new(Answering {
            calls: Arc::default(),
            takes: slow,
        }));

        let sent = Instant::now();
        connector
            .call(request("PutItem", "{}"))
            .await
            .expect("answered");

        let took = sent.elapsed();
        assert!(
            took >= expected / 2 + slow && took < expected / 2 + slow + Duration::from_millis(1)
        );
        assert_eq!(injector.snapshot().overruns, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_transaction_is_delayed_by_the_distribution_of_its_item_count() {
        let model = LatencyModel::default();
        let eight = first_sample(&model, "TransactWriteItems", 8);
        assert_ne!(eight, first_sample(&model, "TransactWriteItems", 2));
        let injector = Injector::new(model, 1);
        let connector = injector.connector(SharedHttpConnector::new(Answering::default()));
        let items = vec![serde_json::json!({"Update": {}}); 8];
        let body = serde_json::json!({ "TransactItems": items }).to_string();

        let sent = Instant::now();
        connector
            .call(request("TransactWriteItems", &body))
            .await
            .expect("answered");

        assert!(sent.elapsed() >= eight);
        assert_eq!(injector.snapshot().of("TransactWriteItems"), (1, eight));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_off_the_transaction_path_is_not_delayed() {
        let injector = Injector::new(LatencyModel::default(), 1);
        let connector = injector.connector(SharedHttpConnector::new(Answering::default()));
        let sent = Instant::now();
        connector
            .call(request("CreateTable", "{}"))
            .await
            .expect("answered");
        assert_eq!(sent.elapsed(), Duration::ZERO);
        assert_eq!(injector.snapshot(), Injected::default());
    }

    #[tokio::test(start_paused = true)]
    async fn dilation_multiplies_every_delay() {
        let model = LatencyModel::default();
        let expected = first_sample(&model, "UpdateItem", 1) * 8;
        let connector =
            Injector::new(model, 8).connector(SharedHttpConnector::new(Answering::default()));
        let sent = Instant::now();
        connector
            .call(request("UpdateItem", "{}"))
            .await
            .expect("answered");
        assert!(sent.elapsed() >= expected && sent.elapsed() < expected + Duration::from_millis(1));
    }

    /// A client of DynamoDB whose requests go through `injector` to a connector that would
    /// answer every request at once with an empty success.
    fn client_over(
        injector: &Injector,
        calls: Arc<Mutex<Vec<Instant>>>,
    ) -> aws_sdk_dynamodb::Client {
        let inner = SharedHttpConnector::new(Answering {
            calls,
            takes: Duration::ZERO,
        });
        let connector = SharedHttpConnector::new(injector.connector(inner));
        let http =
            aws_smithy_runtime_api::client::http::http_client_fn(move |_, _| connector.clone());
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "a", "b", None, None, "test",
            ))
            .http_client(http)
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_write_is_retried_by_the_sdk_then_surfaces_with_its_reason() {
        // GIVEN a service whose partitions absorb nothing over their rate
        let production = crate::inject::service::Production {
            partition_burst_ms: 0,
            ..Default::default()
        };
        let injector =
            Injector::new(LatencyModel::default(), 1).with_service(Service::new(production, 1));
        let calls = Arc::new(Mutex::new(vec![]));
        let client = client_over(&injector, calls.clone());

        // WHEN an UpdateItem is sent
        let err = client
            .update_item()
            .table_name("accounts")
            .key(
                "id",
                aws_sdk_dynamodb::types::AttributeValue::S("acct-00001".into()),
            )
            .update_expression("SET b = :b")
            .expression_attribute_values(
                ":b",
                aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
            )
            .send()
            .await
            .expect_err("throttled");

        // THEN the SDK's standard retry sent it three times, each rejected before the engine
        assert_eq!(injector.snapshot().throttles, 3);
        assert_eq!(injector.snapshot().of("UpdateItem").0, 3);
        assert!(calls.lock().unwrap().is_empty());
        // AND the error is DynamoDB's, with its reason
        let service = err.into_service_error();
        let aws_sdk_dynamodb::operation::update_item::UpdateItemError::ProvisionedThroughputExceededException(e) = service else {
            panic!("{service:?}");
        };
        assert_eq!(
            e.throttling_reasons()[0].reason(),
            Some("TableWriteKeyRangeThroughputExceeded")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_transaction_on_a_held_item_is_cancelled_with_every_reason_in_place() {
        let injector = Injector::new(LatencyModel::default(), 1).with_service(Service::new(
            crate::inject::service::Production::default(),
            1,
        ));
        let connector = injector.connector(SharedHttpConnector::new(Answering::default()));
        let tx = |ids: &[&str]| {
            let items: Vec<_> = ids
                .iter()
                .map(|id| serde_json::json!({"Update": {"TableName": "t", "Key": {"id": {"S": id}}}}))
                .collect();
            request(
                "TransactWriteItems",
                &serde_json::json!({"TransactItems": items}).to_string(),
            )
        };
        // A transaction holds a and b from half its delay to its end; one of c, b and a,
        // sent so that it arrives three quarters through, meets both holds at once.
        let model = LatencyModel::default();
        let mut rng = SmallRng::seed_from_u64(model.seed);
        let mut draw = |n| Duration::from_secs_f64(model.transact(n).sample(&mut rng) / 1e3);
        let (d1, d2) = (draw(2), draw(3));
        let start = (d1 * 3 / 4)
            .checked_sub(d2 / 2)
            .expect("the seed's draws allow it");
        let first = connector.call(tx(&["a", "b"]));
        let second = async {
            tokio::time::sleep(start).await;
            connector.call(tx(&["c", "b", "a"])).await
        };
        let (first, second) = tokio::join!(first, second);
        assert_eq!(first.expect("answered").status().as_u16(), 200);
        let mut second = second.expect("answered");
        let body = ByteStream::new(second.take_body())
            .collect()
            .await
            .unwrap()
            .into_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let codes: Vec<&str> = v["CancellationReasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["Code"].as_str().unwrap())
            .collect();
        assert_eq!(
            codes,
            ["None", "TransactionConflict", "TransactionConflict"]
        );
        assert_eq!(injector.snapshot().conflicts, 1);
    }
}
