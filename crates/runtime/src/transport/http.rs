//! The `http` transport: an external service that speaks the participant JSON. `POST
//! {url}/prepare`, `{url}/commit` or `{url}/abort` with the request as body; a 2xx answer
//! carries the reply.
//!
//! `undetermined` is set when the service may have acted: a timeout or a broken connection
//! after the request was sent, a 5xx, or a 2xx whose body is not a reply. A connection that
//! could not be opened, or a 4xx, did nothing.
//!
//! With a signing secret, every request carries the headers of `twopc_core::signing`
//! (HMAC-SHA256 over the transaction id, the time and the body), which the participant SDK's
//! router checks. Every request carries the caller's X-Ray trace header, if any
//! ([`crate::trace`]).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;
use twopc_core::ids::TxId;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::ports::{Clock, SystemClock, Transport, TransportError};
use twopc_core::record::Target;
use twopc_core::signing;

/// The largest reply read from a participant service: replies are a few hundred bytes.
const MAX_REPLY_BYTES: usize = 1024 * 1024;

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Calls participant services over HTTP(S).
#[derive(Debug)]
pub struct HttpTransport {
    // Built on first use: loading the system's root certificates costs a few ms that a
    // deployment without http participants should not pay at cold start.
    client: OnceCell<HttpsClient>,
    timeout: Duration,
    secret: Option<signing::Secret>,
}

impl HttpTransport {
    /// Each call (connect, send, read) is abandoned after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        HttpTransport {
            client: OnceCell::new(),
            timeout,
            secret: None,
        }
    }

    /// Signs every request with `secret` (shared with the participant services).
    pub fn with_signing_secret(mut self, secret: signing::Secret) -> Self {
        self.secret = Some(secret);
        self
    }

    async fn client(&self) -> std::io::Result<&HttpsClient> {
        self.client
            .get_or_try_init(|| async {
                let https = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_provider_and_native_roots(rustls::crypto::aws_lc_rs::default_provider())?
                    .https_or_http()
                    .enable_http1()
                    .build();
                Ok(Client::builder(TokioExecutor::new()).build(https))
            })
            .await
    }

    /// POSTs `body` (a request of transaction `tx`) to `{url}/{action}` and reads the reply.
    pub async fn call<B: Serialize, R: DeserializeOwned>(
        &self,
        url: &str,
        action: &str,
        tx: &TxId,
        body: &B,
    ) -> Result<R, TransportError> {
        let endpoint = format!("{}/{action}", url.trim_end_matches('/'));
        let fail = |message: String, undetermined: bool| TransportError {
            target: format!("http:{url}"),
            message,
            undetermined,
            source: None,
        };
        let payload = serde_json::to_vec(body)
            .map_err(|e| fail(format!("cannot encode the {action} request: {e}"), false))?;
        let mut request = Request::post(&endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json");
        if let Some(secret) = &self.secret {
            for (name, value) in signing::sign(secret.expose(), tx, SystemClock.now_ms(), &payload)
            {
                request = request.header(name, value);
            }
        }
        if let Some(trace) = crate::trace::current() {
            request = request.header(crate::trace::HEADER, trace);
        }
        let request = request
            .body(Full::new(Bytes::from(payload)))
            .map_err(|e| fail(format!("{endpoint:?} is not a usable URL: {e}"), false))?;
        let client = self.client().await.map_err(|e| TransportError {
            source: Some(Box::new(e)),
            ..fail("cannot load the system's root certificates".into(), false)
        })?;
        let exchange = async {
            let response = client.request(request).await.map_err(|e| {
                // A connection that could not be opened carried nothing.
                let undetermined = !e.is_connect();
                TransportError {
                    source: Some(Box::new(e)),
                    ..fail(
                        format!("{action}: request to {endpoint} failed"),
                        undetermined,
                    )
                }
            })?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_REPLY_BYTES)
                .collect()
                .await
                .map_err(|e| fail(format!("{action}: reading the reply failed: {e}"), true))?
                .to_bytes();
            Ok::<_, TransportError>((status, body))
        };
        let (status, body) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                fail(
                    format!("{action}: no reply within {} ms", self.timeout.as_millis()),
                    true,
                )
            })??;
        if !status.is_success() {
            let text: String = String::from_utf8_lossy(&body).chars().take(200).collect();
            return Err(fail(
                format!("{action}: {endpoint} answered {status}: {text}"),
                status.is_server_error(),
            ));
        }
        serde_json::from_slice(&body)
            .map_err(|e| fail(format!("{action}: unreadable reply: {e}"), true))
    }
}

fn url(target: &Target) -> Result<&str, TransportError> {
    match target {
        Target::Http { url } => Ok(url),
        other => Err(TransportError {
            target: format!("{other:?}"),
            message: "the http transport reaches only http targets".into(),
            undetermined: false,
            source: None,
        }),
    }
}

impl Transport for HttpTransport {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        self.call(url(target)?, "prepare", &req.tx_id, req).await
    }

    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        self.call(url(target)?, "commit", &req.tx_id, req).await
    }

    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        self.call(url(target)?, "abort", &req.tx_id, req).await
    }

    async fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        self.call(url(target)?, "inquire", &req.tx_id, req).await
    }
}
