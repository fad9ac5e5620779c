//! The WebSocket API's `$connect` authorizer (a Lambda REQUEST authorizer; identity source
//! `route.request.querystring.token`, so a connection without `?token=` is refused by API
//! Gateway before this runs). It admits a JWT of the configured OIDC issuer
//! (`twopc_authorizer::verify`) or, when a deployment opts in, the shared demo token (compared
//! in constant time); with neither configured it admits nobody, and with the issuer's
//! configuration unusable (half set) it refuses everyone, saying why. The principal, its grants and
//! its expiry go to the `$connect` route as the authorizer's context
//! (`twopc_authorizer::context`), where the connections function records them.
//!
//! A refusal is a `Deny` policy (API Gateway answers 403), logged with its code (never the
//! token) and counted (`ConnectRefused` by `Code`).
#![warn(missing_docs)]

pub mod jwks;

use aws_lambda_events::apigw::{
    ApiGatewayCustomAuthorizerPolicy, ApiGatewayCustomAuthorizerRequestTypeRequest,
    ApiGatewayCustomAuthorizerResponse,
};
use aws_lambda_events::iam::{IamPolicyEffect, IamPolicyStatement};
use serde_json::Value;
use tracing::{error, info};
use twopc_authorizer::{AccessRefusal, KeySource, Principal, Verifier, VerifierConfig};
use twopc_function::env::ConfigError;
use twopc_function::var;
use twopc_runtime::config::{WsAuthorizerSettings, WsIssuer, WsJwt};
use twopc_runtime::telemetry::Metrics;

/// How long a connection admitted by the shared token lasts (API Gateway closes any at 2 h).
pub const SHARED_TOKEN_SECS: u64 = 7_200;

/// Whose tokens the authorizer admits besides the shared one.
pub enum Trust<K> {
    /// No issuer is configured: no JWT is admitted.
    Nobody,
    /// JWTs of the configured issuer.
    Issuer(Verifier<K>),
    /// The issuer's configuration is unusable (half set, a JWKS URL that is not https, an
    /// unknown algorithm): every connection is refused with this reason, the shared token's
    /// too, so the mistake shows on the first `$connect` rather than as a function failing at
    /// start.
    Misconfigured(String),
}

/// What the authorizer's settings trust; a configuration that cannot be used becomes
/// [`Trust::Misconfigured`], naming its variable.
pub fn trust(settings: &WsAuthorizerSettings) -> Trust<jwks::HttpsJwks> {
    match &settings.issuer {
        WsIssuer::Unset => Trust::Nobody,
        WsIssuer::HalfSet(problem) => Trust::Misconfigured(problem.clone()),
        WsIssuer::Trusted(jwt) => match verifier(jwt) {
            Ok(v) => Trust::Issuer(v),
            Err(e) => Trust::Misconfigured(e.to_string()),
        },
    }
}

fn verifier(jwt: &WsJwt) -> Result<Verifier<jwks::HttpsJwks>, ConfigError> {
    let mut verifier = VerifierConfig::new(&jwt.issuer, &jwt.audience);
    if let Some(names) = &jwt.algorithms {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        verifier = verifier
            .with_algorithms(&names)
            .map_err(|problem| ConfigError::Invalid {
                var: var::WS_ALGORITHMS,
                problem: format!("{problem}; a comma-separated list such as RS256,ES256"),
            })?;
    }
    let keys = jwks::HttpsJwks::new(&jwt.jwks_url).map_err(|problem| ConfigError::Invalid {
        var: var::WS_JWKS_URL,
        problem: format!("{problem}; the issuer's https JWKS URL"),
    })?;
    Ok(Verifier::new(verifier, keys))
}

/// What the authorizer trusts.
pub struct App<K> {
    /// The issuer whose tokens are admitted, if any.
    pub trust: Trust<K>,
    /// The shared demo token, when a deployment opts in.
    pub shared_token: Option<String>,
    /// Where refusals are counted.
    pub metrics: Metrics,
}

/// The answer: `Allow` on the route with the principal's context, or `Deny`.
pub type AuthorizerResponse = ApiGatewayCustomAuthorizerResponse<Value>;

fn policy(effect: IamPolicyEffect, method_arn: &str) -> ApiGatewayCustomAuthorizerPolicy {
    let mut statement = IamPolicyStatement::default();
    statement.action = vec!["execute-api:Invoke".into()];
    statement.effect = effect;
    statement.resource = vec![method_arn.to_owned()];
    let mut policy = ApiGatewayCustomAuthorizerPolicy::default();
    policy.version = Some("2012-10-17".into());
    policy.statement = vec![statement];
    policy
}

/// Who `token` names at `now`, or why not.
pub async fn authorize<K: KeySource>(
    app: &App<K>,
    token: Option<&str>,
    now: u64,
) -> Result<Principal, AccessRefusal> {
    let issuer = match &app.trust {
        Trust::Misconfigured(problem) => return Err(AccessRefusal::Misconfigured(problem.clone())),
        Trust::Issuer(v) => Some(v),
        Trust::Nobody => None,
    };
    if let (Some(expected), Some(given)) = (app.shared_token.as_deref(), token)
        && let Ok(p) = twopc_authorizer::shared::check(expected, given, now + SHARED_TOKEN_SECS)
    {
        return Ok(p);
    }
    match issuer {
        Some(v) => v.verify(token, now).await,
        None if app.shared_token.is_some() => Err(AccessRefusal::SharedToken),
        None => Err(AccessRefusal::NotConfigured),
    }
}

/// Handles one `$connect` authorization at `now` (unix seconds).
pub async fn handle<K: KeySource>(
    app: &App<K>,
    event: &ApiGatewayCustomAuthorizerRequestTypeRequest,
    now: u64,
) -> AuthorizerResponse {
    let method_arn = event.method_arn.as_deref().unwrap_or_default();
    let token = event.query_string_parameters.first("token");
    let mut answer = AuthorizerResponse::default();
    match authorize(app, token, now).await {
        Ok(p) => {
            info!(principal = %p.sub, exp = p.exp, "websocket connection authorized");
            answer.principal_id = Some(p.sub.clone());
            answer.policy_document = policy(IamPolicyEffect::Allow, method_arn);
            answer.context = Value::Object(twopc_authorizer::context::to_context(&p));
        }
        Err(r) => {
            if matches!(r, AccessRefusal::Misconfigured(_)) {
                error!(code = r.code(), reason = %r, "websocket connection refused");
            } else {
                info!(code = r.code(), reason = %r, "websocket connection refused");
            }
            app.metrics.connect_refused(r.code());
            answer.principal_id = Some("anonymous".into());
            answer.policy_document = policy(IamPolicyEffect::Deny, method_arn);
            answer.context = serde_json::json!({"code": r.code()});
        }
    }
    answer
}
