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
    /// Whether tokens of an OIDC issuer are admitted.
    pub issuer: WsIssuer,
}

/// The OIDC issuer's three variables (`TWOPC_WS_ISSUER`, `TWOPC_WS_AUDIENCE`,
/// `TWOPC_WS_JWKS_URL`): all set, none, or some, which is a mistake the authorizer reports on
/// every `$connect` rather than by failing to start (a function that fails at start answers
/// API Gateway with an error, not a refusal with a reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WsIssuer {
    /// None set: no JWT is admitted.
    Unset,
    /// All three set.
    Trusted(WsJwt),
    /// Some set, some not: what is wrong and what to do.
    HalfSet(String),
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
            issuer: issuer(env),
        })
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }

    fn resources(&self) -> Vec<(String, &'static str)> {
        vec![]
    }
}

/// The three OIDC variables: the issuer they describe, or which of them are missing.
fn issuer<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> WsIssuer {
    let names = [var::WS_ISSUER, var::WS_AUDIENCE, var::WS_JWKS_URL];
    match names.map(|n| env.get(n)) {
        [None, None, None] => WsIssuer::Unset,
        [Some(issuer), Some(audience), Some(jwks_url)] => WsIssuer::Trusted(WsJwt {
            jwks_url,
            issuer,
            audience,
            algorithms: env.get(var::WS_ALGORITHMS).map(|names| {
                names
                    .split(',')
                    .map(|n| n.trim().to_owned())
                    .filter(|n| !n.is_empty())
                    .collect()
            }),
        }),
        values => {
            let missing: Vec<&str> = names
                .iter()
                .zip(&values)
                .filter(|(_, v)| v.is_none())
                .map(|(n, _)| *n)
                .collect();
            WsIssuer::HalfSet(format!(
                "{} not set: the issuer (the tokens' iss, {}), the audience they name ({}) and \
                 the issuer's https key set ({}) are set together, or none of them (template.yaml: \
                 WebSocketIssuer, WebSocketAudience, WebSocketJwksUrl)",
                missing.join(" and "),
                var::WS_ISSUER,
                var::WS_AUDIENCE,
                var::WS_JWKS_URL,
            ))
        }
    }
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
    fn the_ws_authorizer_trusts_an_issuer_when_its_three_variables_are_set() {
        let ws = WsAuthorizerSettings::from_lookup(lookup(&[(var::WS_TOKEN, "demo")]))
            .expect("a shared token alone");
        assert_eq!(
            (ws.shared_token.as_deref(), ws.issuer),
            (Some("demo"), WsIssuer::Unset)
        );
        let ws = WsAuthorizerSettings::from_lookup(lookup(&[
            (var::WS_JWKS_URL, "https://issuer.example/jwks.json"),
            (var::WS_ISSUER, "https://issuer.example"),
            (var::WS_AUDIENCE, "app"),
            (var::WS_ALGORITHMS, "RS256, ES256,"),
        ]))
        .expect("valid");
        let WsIssuer::Trusted(jwt) = ws.issuer else {
            panic!("{:?}", ws.issuer)
        };
        assert_eq!(
            jwt.algorithms,
            Some(vec!["RS256".to_owned(), "ES256".to_owned()])
        );
    }

    /// A half-set issuer (the template's three parameters, one or two left empty) starts: the
    /// authorizer refuses every connection with what is missing, instead of failing at start.
    #[test]
    fn a_half_set_issuer_starts_and_names_what_is_missing() {
        let url = (var::WS_JWKS_URL, "https://issuer.example/jwks.json");
        let issuer = (var::WS_ISSUER, "https://issuer.example");
        let audience = (var::WS_AUDIENCE, "app");
        for (set, missing) in [
            (vec![url, audience], vec![var::WS_ISSUER]),
            (vec![url, issuer], vec![var::WS_AUDIENCE]),
            (vec![url], vec![var::WS_ISSUER, var::WS_AUDIENCE]),
            (vec![issuer, audience], vec![var::WS_JWKS_URL]),
            (
                vec![issuer, (var::WS_AUDIENCE, ""), (var::WS_JWKS_URL, "")],
                vec![var::WS_AUDIENCE, var::WS_JWKS_URL],
            ),
        ] {
            let ws = WsAuthorizerSettings::from_lookup(lookup(&set))
                .unwrap_or_else(|e| panic!("{set:?}: the authorizer does not start: {e}"));
            let WsIssuer::HalfSet(problem) = &ws.issuer else {
                panic!("{set:?}: {:?}", ws.issuer)
            };
            assert!(
                problem.starts_with(&format!("{} not set", missing.join(" and "))),
                "{set:?}: {problem}"
            );
            assert!(problem.contains("together, or none"), "{problem}");
        }
    }
}
