//! SigV4 signing for API Gateway's IAM authorisation (service `execute-api`), with the SDK's own
//! signer (`aws-sigv4`) and credentials from the standard chain (`aws-config`: environment,
//! profile, web identity, ECS, IMDS) or given. The region is the configured one, else the one in
//! an `{api}.execute-api.{region}.amazonaws.com` host, else the chain's (`AWS_REGION`, profile).

use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use tokio::sync::Mutex;

use crate::error::Error;

/// The service name API Gateway's IAM authorisation verifies.
pub const SERVICE: &str = "execute-api";

/// Credentials this close to expiry are refreshed before signing.
const REFRESH_BEFORE: Duration = Duration::from_secs(5 * 60);

/// How to sign: the region and the credentials (each found by the standard chain when `None`).
#[derive(Clone, Debug, Default)]
pub struct SigV4 {
    /// The API's region.
    pub region: Option<String>,
    /// Where credentials come from.
    pub credentials: Option<SharedCredentialsProvider>,
}

impl SigV4 {
    /// Region and credentials from the standard chain (the region may also come from the host).
    pub fn from_env() -> Self {
        SigV4::default()
    }

    /// In this region.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// With these credentials (static keys, or any provider).
    pub fn credentials(mut self, provider: impl ProvideCredentials + 'static) -> Self {
        self.credentials = Some(SharedCredentialsProvider::new(provider));
        self
    }
}

/// Signs requests to one API: its region, its credentials, the last ones resolved.
#[derive(Debug)]
pub(crate) struct Signer {
    region: String,
    provider: SharedCredentialsProvider,
    cached: Mutex<Option<Credentials>>,
}

impl Signer {
    /// Resolves what `config` leaves to the standard chain, for the API at `host`.
    pub(crate) async fn new(config: &SigV4, host: &str) -> Result<Signer, Error> {
        let explicit = config.region.clone().or_else(|| region_from_host(host));
        let (region, provider) = match (explicit, config.credentials.clone()) {
            (Some(region), Some(provider)) => (Some(region), Some(provider)),
            (region, provider) => {
                let chain = aws_config::defaults(BehaviorVersion::latest()).load().await;
                (
                    region.or_else(|| chain.region().map(|r| r.to_string())),
                    provider.or_else(|| chain.credentials_provider()),
                )
            }
        };
        let region = region.ok_or_else(|| Error::Signing {
            message: format!(
                "no region for {host}: configure one, or set AWS_REGION (the host is not {{api}}.execute-api.{{region}}.amazonaws.com)"
            ),
            source: None,
        })?;
        let provider = provider.ok_or_else(|| Error::Signing {
            message: "no credentials provider".into(),
            source: None,
        })?;
        Ok(Signer {
            region,
            provider,
            cached: Mutex::new(None),
        })
    }

    /// Credentials to sign with: the cached ones unless they are about to expire.
    async fn credentials(&self) -> Result<Credentials, Error> {
        let mut cached = self.cached.lock().await;
        let fresh = |c: &Credentials| {
            c.expiry()
                .is_none_or(|at| at > SystemTime::now() + REFRESH_BEFORE)
        };
        if let Some(c) = cached.as_ref().filter(|c| fresh(c)) {
            return Ok(c.clone());
        }
        let c = self
            .provider
            .provide_credentials()
            .await
            .map_err(|e| Error::Signing {
                message: "no credentials from the provider chain".into(),
                source: Some(Box::new(e)),
            })?;
        *cached = Some(c.clone());
        Ok(c)
    }

    /// Adds `x-amz-date`, `authorization` (and `x-amz-security-token`) to `request`.
    pub(crate) async fn sign(
        &self,
        request: &mut Request<Full<Bytes>>,
        body: &[u8],
    ) -> Result<(), Error> {
        let credentials = self.credentials().await?;
        sign_request(
            request,
            body,
            &credentials,
            &self.region,
            SERVICE,
            SystemTime::now(),
        )
        .map_err(|e| Error::Signing {
            message: "the request cannot be signed".into(),
            source: Some(e),
        })
    }
}

/// Signs `request` (whose body is `body`) with the SDK's SigV4 signer, default settings: every
/// header present is signed (`host` taken from the header or the URI), the signature in the
/// `authorization` header. `service` is `execute-api` for the API; the test vectors use others.
pub fn sign_request<B>(
    request: &mut Request<B>,
    body: &[u8],
    credentials: &Credentials,
    region: &str,
    service: &str,
    time: SystemTime,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()?
        .into();
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| Ok((name.as_str(), value.to_str()?)))
        .collect::<Result<Vec<_>, hyper::header::ToStrError>>()?;
    let signable = SignableRequest::new(
        request.method().as_str(),
        request.uri().to_string(),
        headers.into_iter(),
        SignableBody::Bytes(body),
    )?;
    let (instructions, _signature) = sign(signable, &params)?.into_parts();
    instructions.apply_to_request_http1x(request);
    Ok(())
}

/// The region of an API Gateway host (`abc123.execute-api.eu-west-1.amazonaws.com`, also
/// `.amazonaws.com.cn`); none for another host (a custom domain, a local stack).
pub fn region_from_host(host: &str) -> Option<String> {
    let host = host.split(':').next()?.to_ascii_lowercase();
    let mut labels = host.split('.');
    let _api = labels.next()?;
    if labels.next()? != "execute-api" {
        return None;
    }
    let region = labels.next()?;
    let rest: Vec<&str> = labels.collect();
    let aws = rest == ["amazonaws", "com"] || rest == ["amazonaws", "com", "cn"];
    (aws && !region.is_empty()).then(|| region.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_comes_from_an_api_gateway_host_only() {
        let r = |h| region_from_host(h);
        assert_eq!(
            r("a1b2c3.execute-api.eu-west-1.amazonaws.com").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            r("A1B2C3.execute-api.cn-north-1.amazonaws.com.cn:443").as_deref(),
            Some("cn-north-1")
        );
        assert_eq!(r("api.example.com"), None);
        assert_eq!(r("127.0.0.1:3000"), None);
        assert_eq!(r("x.execute-api.us-east-1.example.com"), None);
    }
}
