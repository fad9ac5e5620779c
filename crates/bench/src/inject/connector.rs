//! The SDK's HTTP client wrapped so that every DynamoDB request waits a sampled delay before it
//! goes to DynamoDB Local: the operation is read from the request's `X-Amz-Target` header
//! (`DynamoDB_20120810.UpdateItem`), a `TransactWriteItems`'s item count from its body, and the
//! delay drawn from that operation's distribution ([`LatencyModel::of`]) with one seeded
//! generator. The wait comes before the request is sent, so what the request does lands after
//! it, as it would over a network; DynamoDB Local's own time comes on top.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::counter::OPERATIONS;
use crate::inject::model::LatencyModel;

#[derive(Debug, Default)]
struct Counts {
    requests: [AtomicU64; OPERATIONS.len()],
    nanos: [AtomicU64; OPERATIONS.len()],
}

/// The delays injected so far, by [`OPERATIONS`] slot (subtract two to get a window's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Injected {
    /// Requests delayed.
    pub requests: [u64; OPERATIONS.len()],
    /// Their delays added up.
    pub total: [Duration; OPERATIONS.len()],
}

impl Injected {
    /// `self - earlier`.
    pub fn since(&self, earlier: &Injected) -> Injected {
        let mut out = Injected::default();
        for i in 0..OPERATIONS.len() {
            out.requests[i] = self.requests[i].saturating_sub(earlier.requests[i]);
            out.total[i] = self.total[i].saturating_sub(earlier.total[i]);
        }
        out
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
    rng: Arc<Mutex<SmallRng>>,
    counts: Arc<Counts>,
}

impl fmt::Debug for Injector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injector")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Injector {
    /// An injector of `model`'s delays, its generator seeded with `model.seed`.
    pub fn new(model: LatencyModel) -> Injector {
        Injector {
            rng: Arc::new(Mutex::new(SmallRng::seed_from_u64(model.seed))),
            model: Arc::new(model),
            counts: Arc::new(Counts::default()),
        }
    }

    /// The model.
    pub fn model(&self) -> &LatencyModel {
        &self.model
    }

    /// The delays injected so far.
    pub fn snapshot(&self) -> Injected {
        let mut out = Injected::default();
        for i in 0..OPERATIONS.len() {
            out.requests[i] = self.counts.requests[i].load(Ordering::Relaxed);
            out.total[i] = Duration::from_nanos(self.counts.nanos[i].load(Ordering::Relaxed));
        }
        out
    }

    /// Draws (and counts) the delay of `request`; `None` if its operation is not delayed.
    pub fn delay_for(&self, request: &HttpRequest) -> Option<Duration> {
        let op = request
            .headers()
            .get("x-amz-target")
            .and_then(|t| t.rsplit('.').next())
            .unwrap_or("other");
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
        let delay = Duration::from_secs_f64(ms / 1e3);
        let slot = OPERATIONS
            .iter()
            .position(|o| *o == op)
            .unwrap_or(OPERATIONS.len() - 1);
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

/// A connector that waits its request's delay, then sends it through the real one.
#[derive(Debug)]
pub struct InjectingConnector {
    inner: SharedHttpConnector,
    injector: Injector,
}

impl HttpConnector for InjectingConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let delay = self.injector.delay_for(&request);
        let inner = self.inner.clone();
        HttpConnectorFuture::new(async move {
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
    use aws_smithy_types::body::SdkBody;
    use tokio::time::Instant;

    /// A connector that answers at once and notes when it was called.
    #[derive(Debug, Default)]
    struct Answering(Arc<Mutex<Vec<Instant>>>);

    impl HttpConnector for Answering {
        fn call(&self, _request: HttpRequest) -> HttpConnectorFuture {
            self.0.lock().unwrap().push(Instant::now());
            HttpConnectorFuture::ready(Ok(HttpResponse::new(
                200.try_into().unwrap(),
                SdkBody::empty(),
            )))
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
    async fn a_delayed_request_reaches_dynamodb_after_its_sampled_delay() {
        // GIVEN a connector injecting the default model's delays in front of one that answers
        let model = LatencyModel::default();
        let expected = first_sample(&model, "UpdateItem", 1);
        let injector = Injector::new(model);
        let calls = Arc::new(Mutex::new(vec![]));
        let connector = injector.connector(SharedHttpConnector::new(Answering(calls.clone())));

        // WHEN an UpdateItem goes through it (the clock paused: tokio advances it when idle)
        let sent = Instant::now();
        let response = connector.call(request("UpdateItem", "{}")).await;

        // THEN it was forwarded only once its delay, the seeded sample of a single write, passed
        assert_eq!(response.expect("answered").status().as_u16(), 200);
        let forwarded = calls.lock().unwrap()[0];
        assert!(expected > Duration::from_millis(1));
        assert!(
            forwarded - sent >= expected,
            "{:?} < {expected:?}",
            forwarded - sent
        );
        assert!(forwarded - sent < expected + Duration::from_millis(1));
        assert_eq!(injector.snapshot().of("UpdateItem"), (1, expected));
    }

    #[tokio::test(start_paused = true)]
    async fn a_transaction_is_delayed_by_the_distribution_of_its_item_count() {
        let model = LatencyModel::default();
        let eight = first_sample(&model, "TransactWriteItems", 8);
        assert_ne!(eight, first_sample(&model, "TransactWriteItems", 2));
        let injector = Injector::new(model);
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
        let injector = Injector::new(LatencyModel::default());
        let connector = injector.connector(SharedHttpConnector::new(Answering::default()));
        let sent = Instant::now();
        connector
            .call(request("CreateTable", "{}"))
            .await
            .expect("answered");
        assert_eq!(sent.elapsed(), Duration::ZERO);
        assert_eq!(injector.snapshot(), Injected::default());
    }
}
