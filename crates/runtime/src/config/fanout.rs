//! The settings of the WebSocket side's functions: the routes (`connections`) and the
//! `$connect` authorizer.

use twopc_function::env::{ConfigError, Env};
use twopc_function::var;

use super::{Role, Settings, Shared};

/// How long a WebSocket connection's entry is kept (s): API Gateway closes a connection after
/// two hours.
pub const CONNECTION_TTL_SECS: u64 = 7_200;

/// The connections function's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionsSettings {
    /// What every function reads.
    pub shared: Shared,
    /// The WebSocket subscriptions table.
    pub table: String,
}

/// The `$connect` authorizer's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsAuthorizerSettings {
    /// What every function reads.
    pub shared: Shared,
    /// The opt-in shared demo token.
    pub shared_token: Option<String>,
    /// Tokens from an OIDC issuer, when its JWKS URL is set.
    pub jwt: Option<WsJwt>,
}

/// Where WebSocket JWTs come from and what they must say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsJwt {
    /// The issuer's https JWKS URL.
    pub jwks_url: String,
    /// The issuer, the tokens' `iss`.
    pub issuer: String,
    /// The audience the tokens name in `aud`.
    pub audience: String,
    /// The accepted algorithms (unset: the verifier's default).
    pub algorithms: Option<Vec<String>>,
}

/// `TWOPC_CONNECTIONS_TABLE`, which the connections function and the stream processor require.
pub fn connections_table<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
) -> Result<String, ConfigError> {
    env.required(
        var::CONNECTIONS_TABLE,
        "set it to the name of the WebSocket connections table (the template's ConnectionsTable)",
    )
}

impl Settings for ConnectionsSettings {
    const ROLE: Role = Role::Connections;

    fn read<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Self, ConfigError> {
        Ok(ConnectionsSettings {
            shared: Shared::read(Self::ROLE, env),
            table: connections_table(env)?,
        })
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }

    fn resources(&self) -> Vec<(String, &'static str)> {
        vec![(self.table.clone(), var::CONNECTIONS_TABLE)]
    }
}

impl Settings for WsAuthorizerSettings {
    const ROLE: Role = Role::WsAuthorizer;

    fn read<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Self, ConfigError> {
        Ok(WsAuthorizerSettings {
            shared: Shared::read(Self::ROLE, env),
            shared_token: env.get(var::WS_TOKEN),
            jwt: env
                .get(var::WS_JWKS_URL)
                .map(|url| jwt(env, url))
                .transpose()?,
        })
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }

    fn resources(&self) -> Vec<(String, &'static str)> {
        vec![]
    }
}

fn jwt<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
    jwks_url: String,
) -> Result<WsJwt, ConfigError> {
    Ok(WsJwt {
        jwks_url,
        issuer: env.required(
            var::WS_ISSUER,
            "set it to the issuer (the tokens' iss) whose keys TWOPC_WS_JWKS_URL serves",
        )?,
        audience: env.required(
            var::WS_AUDIENCE,
            "set it to the audience the tokens name in aud (an app client id), with TWOPC_WS_JWKS_URL",
        )?,
        algorithms: env.get(var::WS_ALGORITHMS).map(|names| {
            names
                .split(',')
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::lookup;
    use super::*;

    #[test]
    fn the_connections_function_reads_its_table() {
        let c = ConnectionsSettings::from_lookup(lookup(&[(var::CONNECTIONS_TABLE, "c")]))
            .expect("valid");
        assert_eq!(c.table, "c");
    }

    #[test]
    fn the_ws_authorizer_needs_the_issuer_and_audience_only_with_a_jwks_url() {
        let ws = WsAuthorizerSettings::from_lookup(lookup(&[(var::WS_TOKEN, "demo")]))
            .expect("a shared token alone");
        assert_eq!((ws.shared_token.as_deref(), ws.jwt), (Some("demo"), None));
        let e = WsAuthorizerSettings::from_lookup(lookup(&[
            (var::WS_JWKS_URL, "https://issuer.example/jwks.json"),
            (var::WS_AUDIENCE, "app"),
        ]))
        .expect_err("no issuer");
        assert!(
            matches!(
                e,
                ConfigError::Missing {
                    var: var::WS_ISSUER,
                    ..
                }
            ),
            "{e}"
        );
        let ws = WsAuthorizerSettings::from_lookup(lookup(&[
            (var::WS_JWKS_URL, "https://issuer.example/jwks.json"),
            (var::WS_ISSUER, "https://issuer.example"),
            (var::WS_AUDIENCE, "app"),
            (var::WS_ALGORITHMS, "RS256, ES256,"),
        ]))
        .expect("valid");
        let jwt = ws.jwt.expect("jwt");
        assert_eq!(
            jwt.algorithms,
            Some(vec!["RS256".to_owned(), "ES256".to_owned()])
        );
    }
}
