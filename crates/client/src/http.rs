//! One HTTP exchange: a request out, the status and JSON body back, within a time limit. HTTPS
//! through rustls with the system's roots; plain HTTP for a local stack.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::error::Error;

/// The largest answer read: the API's are a few KiB.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// The pooled HTTP(S) client.
#[derive(Clone, Debug)]
pub(crate) struct Http {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl Http {
    /// A client for `https` (the system's root certificates) or `http` URLs (no certificates
    /// needed, none loaded), each exchange abandoned after `timeout`.
    pub(crate) fn new(https: bool, timeout: Duration) -> Result<Http, Error> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = if https {
            builder
                .with_provider_and_native_roots(provider)
                .map_err(|e| Error::Transport {
                    message: "cannot load the system's root certificates".into(),
                    maybe_received: false,
                    source: Some(Box::new(e)),
                })?
        } else {
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| Error::Invalid(format!("TLS configuration: {e}")))?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            builder.with_tls_config(config)
        };
        let connector = builder.https_or_http().enable_http1().build();
        Ok(Http {
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout,
        })
    }

    /// Sends `request`; its status and JSON body (`Null` when empty, a string when not JSON).
    pub(crate) async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<(u16, Value), Error> {
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| {
                let maybe_received = !e.is_connect();
                Error::Transport {
                    message: format!("the request failed: {e}"),
                    maybe_received,
                    source: Some(Box::new(e)),
                }
            })?;
            let status = response.status().as_u16();
            let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| Error::Transport {
                    message: format!("reading the answer failed: {e}"),
                    maybe_received: true,
                    source: Some(e),
                })?
                .to_bytes();
            Ok((status, json_or_text(&bytes)))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| Error::Timeout {
                after: self.timeout,
            })?
    }
}

/// JSON numbers keep their text (serde_json's `arbitrary_precision`): never an f64.
fn json_or_text(bytes: &[u8]) -> Value {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}
