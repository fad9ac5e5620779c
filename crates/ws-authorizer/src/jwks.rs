//! The issuer's key set, fetched over HTTPS (its `jwks_uri`, e.g. Cognito's
//! `https://cognito-idp.<region>.amazonaws.com/<pool>/.well-known/jwks.json`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use twopc_authorizer::KeySource;
use twopc_authorizer::verify::JwkSet;

/// A key set is a few KiB; anything much larger is not one.
const MAX_JWKS_BYTES: usize = 256 * 1024;
/// A fetch that takes longer refuses the connection (`keys_unavailable`) rather than hold it.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);

/// The key set at a URL.
pub struct HttpsJwks {
    url: hyper::Uri,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

impl HttpsJwks {
    /// Fetches from `url` (https only: the keys decide who is trusted).
    pub fn new(url: &str) -> Result<Self, String> {
        let uri: hyper::Uri = url.parse().map_err(|e| format!("{url:?}: {e}"))?;
        if uri.scheme_str() != Some("https") {
            return Err(format!("{url:?}: the JWKS URL must be https"));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(|e| format!("the system's root certificates: {e}"))?
            .https_only()
            .enable_http1()
            .build();
        Ok(HttpsJwks {
            url: uri,
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }
}

impl KeySource for HttpsJwks {
    async fn fetch(&self) -> Result<JwkSet, String> {
        let fetch = async {
            let response = self
                .client
                .get(self.url.clone())
                .await
                .map_err(|e| format!("GET {}: {e}", self.url))?;
            if !response.status().is_success() {
                return Err(format!("GET {}: HTTP {}", self.url, response.status()));
            }
            let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
                .collect()
                .await
                .map_err(|e| format!("GET {}: {e}", self.url))?
                .to_bytes();
            serde_json::from_slice::<JwkSet>(&body)
                .map_err(|e| format!("{}: not a JWK set: {e}", self.url))
        };
        tokio::time::timeout(FETCH_TIMEOUT, fetch)
            .await
            .map_err(|_| format!("GET {}: no answer within {FETCH_TIMEOUT:?}", self.url))?
    }
}
