//! The functions' configuration, read once from the environment at start: what every function
//! shares ([`Shared`]) plus one settings type per [`Role`], each holding only what its function
//! reads and each read by its [`Settings::from_env`].
//!
//! - `protocol.rs`: the coordinator's, the participant's and the sweeper's settings.
//! - `fanout.rs`: the WebSocket routes' and the `$connect` authorizer's settings (the stream
//!   processor's live in its crate, beside the table map it reads).
//!
//! Every variable's name is a constant in `twopc_function::var`; `template.yaml` sets the same
//! names (a test in `tests/` checks it). A missing or malformed variable is refused with an
//! error that names it and says what to put there.

mod fanout;
mod protocol;

use twopc_function::env::{ConfigError, Env};
use twopc_function::var;

use crate::telemetry::Metrics;

pub use fanout::{
    CONNECTION_TTL_SECS, ConnectionsSettings, WsAuthorizerSettings, WsIssuer, WsJwt,
    connections_table,
};
pub use protocol::{
    Calls, CoordinatorSettings, ParticipantSettings, Protocol, RunsCoordinator, SweeperSettings,
};

/// Which function is starting: each reads its own settings type and needs a different subset
/// of the variables ([`Role::required`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// API Gateway → coordinator: needs the transactions table and the services.
    Coordinator,
    /// The generic participant: needs the transactions table and its own table.
    Participant,
    /// The scheduled recovery pass: needs the transactions table (and the lock tables to
    /// resolve orphan locks).
    Sweeper,
    /// DynamoDB Streams → the data lake and the WebSocket subscribers: needs the stream
    /// tables, the delivery stream, the connections table and the management endpoint.
    StreamProcessor,
    /// The WebSocket routes (`$connect`, `$disconnect`, `subscribe`): needs the connections
    /// table.
    Connections,
    /// The WebSocket `$connect` authorizer: needs nothing; the issuer, the audience and the
    /// JWKS URL together or none (some alone: it starts and refuses every connection).
    WsAuthorizer,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 6] = [
        Role::Coordinator,
        Role::Participant,
        Role::Sweeper,
        Role::StreamProcessor,
        Role::Connections,
        Role::WsAuthorizer,
    ];

    /// The function's name (its package, its metrics' `Function` dimension).
    pub fn function(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Participant => "participant",
            Role::Sweeper => "sweeper",
            Role::StreamProcessor => "stream-processor",
            Role::Connections => "connections",
            Role::WsAuthorizer => "ws-authorizer",
        }
    }

    /// The variables the function refuses to start without (others have defaults, or are
    /// required only with another: the WebSocket issuer and audience with its JWKS URL).
    pub fn required(self) -> &'static [&'static str] {
        match self {
            Role::Coordinator => &[var::TRANSACTIONS_TABLE, var::SERVICES],
            Role::Participant => &[var::TRANSACTIONS_TABLE, var::PARTICIPANT_TABLE],
            Role::Sweeper => &[var::TRANSACTIONS_TABLE],
            Role::StreamProcessor => &[
                var::STREAM_TABLES,
                var::DELIVERY_STREAM,
                var::CONNECTIONS_TABLE,
                var::WEBSOCKET_ENDPOINT,
            ],
            Role::Connections => &[var::CONNECTIONS_TABLE],
            Role::WsAuthorizer => &[],
        }
    }
}

/// One function's settings: its [`Role`], what it shares with every function, the resources it
/// names, and how it is read from the environment.
pub trait Settings: Sized {
    /// The function these settings are for.
    const ROLE: Role;

    /// Reads the settings through `env`, refusing a missing or malformed variable by name.
    fn read<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Self, ConfigError>;

    /// What every function reads.
    fn shared(&self) -> &Shared;

    /// Each resource these settings name, with the variable that named it (the record of AWS
    /// calls reads a request's resource back to its variable: `crate::record`).
    fn resources(&self) -> Vec<(String, &'static str)>;

    /// Reads the process environment.
    fn from_env() -> Result<Self, ConfigError> {
        Self::read(&Env::process())
    }

    /// Reads variables through `lookup` (tests pass a map).
    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::read(&Env::new(lookup))
    }
}

/// What every function reads: where the AWS services are and where its metrics go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shared {
    /// Which function this is.
    pub role: Role,
    /// DynamoDB Local's URL, when running locally.
    pub dynamodb_endpoint: Option<String>,
    /// `cargo lambda watch`'s URL, when running locally.
    pub lambda_endpoint: Option<String>,
    /// The CloudWatch namespace of the metrics.
    pub metrics_namespace: String,
}

/// Default CloudWatch namespace.
pub(crate) const DEFAULT_METRICS_NAMESPACE: &str = "dynamo-2pc";

impl Shared {
    /// Reads what every function shares, for `role`.
    pub fn read<F: Fn(&str) -> Option<String>>(role: Role, env: &Env<F>) -> Shared {
        Shared {
            role,
            dynamodb_endpoint: env.get(var::DYNAMODB_ENDPOINT),
            lambda_endpoint: env.get(var::LAMBDA_ENDPOINT),
            metrics_namespace: env
                .get(var::METRICS_NAMESPACE)
                .unwrap_or_else(|| DEFAULT_METRICS_NAMESPACE.to_owned()),
        }
    }

    /// Whether any endpoint points at a local emulator (then static dummy credentials are used).
    pub(crate) fn is_local(&self) -> bool {
        self.dynamodb_endpoint.is_some() || self.lambda_endpoint.is_some()
    }

    /// The function's metrics, in its namespace and under its name.
    pub fn metrics(&self) -> Metrics {
        Metrics::new(&self.metrics_namespace, self.role.function())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A lookup over `pairs`.
    pub(crate) fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    /// Asserts that `e` refuses the variable `name` as invalid.
    pub(crate) fn assert_invalid(e: &ConfigError, name: &str) {
        assert!(
            matches!(e, ConfigError::Invalid { var, .. } if *var == name),
            "{e}"
        );
    }

    /// A plausible value for each variable a role requires.
    pub(crate) fn sample(name: &str) -> &'static str {
        match name {
            var::SERVICES => protocol::tests::SERVICES,
            var::STREAM_TABLES => r#"{"tx": "transactions"}"#,
            var::WEBSOCKET_ENDPOINT => "https://ws.example/prod",
            _ => "a-table",
        }
    }

    /// Checks that `S` starts with what its role requires and names each one missing.
    pub(crate) fn starts_with_what_it_requires<S: Settings>() {
        let role = S::ROLE;
        let all: Vec<(&str, &str)> = role.required().iter().map(|v| (*v, sample(v))).collect();
        let s =
            S::from_lookup(lookup(&all)).unwrap_or_else(|e| panic!("{role:?} with {all:?}: {e}"));
        assert_eq!(s.shared().role, role);
        for missing in role.required() {
            let some: Vec<_> = all.iter().copied().filter(|(n, _)| n != missing).collect();
            let Err(e) = S::from_lookup(lookup(&some)) else {
                panic!("{role:?} without {missing} started");
            };
            assert!(
                matches!(&e, ConfigError::Missing { var, .. } if var == missing),
                "{role:?} without {missing}: {e}"
            );
            assert!(e.to_string().contains("set it to"), "says what to set: {e}");
        }
    }

    #[test]
    fn each_role_starts_with_what_it_requires_and_names_what_is_missing() {
        starts_with_what_it_requires::<CoordinatorSettings>();
        starts_with_what_it_requires::<ParticipantSettings>();
        starts_with_what_it_requires::<SweeperSettings>();
        starts_with_what_it_requires::<ConnectionsSettings>();
        starts_with_what_it_requires::<WsAuthorizerSettings>();
    }

    #[test]
    fn empty_endpoints_are_aws_own_and_local_ones_are_read() {
        let env = Env::new(lookup(&[
            (var::DYNAMODB_ENDPOINT, ""),
            (var::LAMBDA_ENDPOINT, ""),
        ]));
        assert!(!Shared::read(Role::Sweeper, &env).is_local());
        let env = Env::new(lookup(&[(var::DYNAMODB_ENDPOINT, "http://127.0.0.1:8000")]));
        let shared = Shared::read(Role::Sweeper, &env);
        assert!(shared.is_local());
        assert_eq!(shared.metrics_namespace, DEFAULT_METRICS_NAMESPACE);
    }
}
