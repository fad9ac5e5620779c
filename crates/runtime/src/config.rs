//! The functions' configuration: one typed struct, read once from the environment at start,
//! with a [`Role`] for each function saying what it needs.
//!
//! Every variable's name is a constant in [`var`]; `template.yaml` sets the same names (a test
//! in `tests/` checks it). A missing or malformed variable is refused with an error that names
//! it and says what to put there.

use std::collections::BTreeMap;
use std::time::Duration;

use twopc_core::coordinator::CommitMode;
use twopc_core::participant::ParticipantConfig;
use twopc_core::request::Limits;
use twopc_core::service::{KeySchema, ServiceConfig};
use twopc_core::signing::Secret;
use twopc_core::sweeper::{LockTable, SweepConfig};
use twopc_function::env::Env;

pub use twopc_function::var;

/// Which function is starting: each needs a different subset of the variables
/// ([`Role::required`]).
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
    /// The WebSocket `$connect` authorizer: needs nothing; with `TWOPC_WS_JWKS_URL`, the
    /// issuer and the audience too.
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

    /// Whether the function runs the protocol (and so reads the transactions table).
    fn runs_protocol(self) -> bool {
        matches!(self, Role::Coordinator | Role::Participant | Role::Sweeper)
    }
}

pub use twopc_function::env::ConfigError;

/// The stream processor's settings ([`Role::StreamProcessor`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSettings {
    /// The tables whose streams arrive, as JSON (`TWOPC_STREAM_TABLES`: table →
    /// `"transactions"` or `{"participant", "key"}`; the stream processor reads it into its
    /// own types and refuses it naming the variable).
    pub tables_json: String,
    /// The Firehose delivery stream of the data lake.
    pub delivery_stream: String,
    /// The WebSocket API's management endpoint.
    pub websocket_endpoint: String,
    /// Firehose's endpoint when it is not AWS's (a local emulator).
    pub firehose_endpoint: Option<String>,
}

/// The `$connect` authorizer's settings ([`Role::WsAuthorizer`]).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WsSettings {
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

/// The configuration of a function.
#[derive(Clone, Debug)]
pub struct Config {
    /// Which function this is.
    pub role: Role,
    /// The transactions table.
    pub transactions_table: String,
    /// Participant services by name (the coordinator's; others may leave it empty: recovery
    /// reads each participant's target from the record).
    pub services: BTreeMap<String, ServiceConfig>,
    /// The participant function's own table (participant only).
    pub participant_table: Option<String>,
    /// Participant tables whose expired locks the sweeper resolves.
    pub lock_tables: Vec<LockTable>,
    /// Bounds of one sweep.
    pub sweep: SweepConfig,
    /// DynamoDB Local's URL, when running locally.
    pub dynamodb_endpoint: Option<String>,
    /// `cargo lambda watch`'s URL, when running locally.
    pub lambda_endpoint: Option<String>,
    /// Who this coordinator is.
    pub coordinator_id: String,
    /// How long one call to a participant may take.
    pub call_timeout: Duration,
    /// The secret the `http` transport signs requests with, when set.
    pub http_signing_secret: Option<Secret>,
    /// Request limits.
    pub limits: Limits,
    /// The largest accepted request body (bytes).
    pub max_body_bytes: usize,
    /// The CloudWatch namespace of the metrics.
    pub metrics_namespace: String,
    /// The participant logic's tunables.
    pub participant: ParticipantConfig,
    /// How the coordinator commits.
    pub commit_mode: CommitMode,
    /// The WebSocket subscriptions table (stream processor, connections).
    pub connections_table: Option<String>,
    /// The stream processor's settings (set for [`Role::StreamProcessor`], checked at load).
    pub stream: Option<StreamSettings>,
    /// The `$connect` authorizer's settings (set for [`Role::WsAuthorizer`]).
    pub ws: Option<WsSettings>,
}

/// Default participant call timeout: below the coordinator function's own timeout (30 s in the
/// template) with room for the decision and completion.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default request body limit (64 KiB): a transaction of 32 participants fits many times over.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;
pub use twopc_function::env::MIN_SIGNING_SECRET_BYTES;
/// Default fence margin (ms), for clock skew: how long past the largest timeout a fence entry
/// stays fresh (`ParticipantConfig::fence_window_ms` is the two together), and how far ahead
/// of a participant's clock a prepare's `began` may lie (`ParticipantConfig::clock_margin_ms`).
pub const DEFAULT_FENCE_MARGIN_MS: u64 = 10_000;
/// How long a WebSocket connection's entry is kept (s): API Gateway closes a connection after
/// two hours.
pub const CONNECTION_TTL_SECS: u64 = 7_200;
/// Default CloudWatch namespace.
pub const DEFAULT_METRICS_NAMESPACE: &str = "dynamo-2pc";

const SERVICES_EXAMPLE: &str = r#"{"accounts":{"target":{"transport":"lambda","function":"accounts-participant"},"key":{"hash":{"name":"id","type":"S"}}}}"#;

impl Config {
    /// Reads the process environment.
    pub fn from_env(role: Role) -> Result<Config, ConfigError> {
        Config::from_lookup(role, |name| std::env::var(name).ok())
    }

    /// Reads variables through `lookup` (tests pass a map).
    pub fn from_lookup(
        role: Role,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let env = Env::new(lookup);
        let transactions_table = match env.get(var::TRANSACTIONS_TABLE) {
            Some(table) => table,
            None if role.runs_protocol() => {
                return Err(ConfigError::Missing {
                    var: var::TRANSACTIONS_TABLE,
                    what: "set it to the name of the transactions table (the template's TransactionsTable)",
                });
            }
            // Not read by the functions that do not run the protocol.
            None => String::new(),
        };
        let services = match (role, env.get(var::SERVICES)) {
            (Role::Coordinator, None) => {
                return Err(ConfigError::Missing {
                    var: var::SERVICES,
                    what: "set it to a JSON object naming each participant service, e.g. \
                           {\"accounts\":{\"target\":{\"transport\":\"lambda\",\"function\":\"accounts-participant\"},\"key\":{\"hash\":{\"name\":\"id\",\"type\":\"S\"}}}}",
                });
            }
            (_, Some(json)) => parse_services(&json)?,
            (_, None) => BTreeMap::new(),
        };
        let participant_table = match (role, env.get(var::PARTICIPANT_TABLE)) {
            (Role::Participant, None) => {
                return Err(ConfigError::Missing {
                    var: var::PARTICIPANT_TABLE,
                    what: "set it to the name of the table this participant function serves",
                });
            }
            (_, table) => table,
        };
        let lock_tables = match env.get(var::LOCK_TABLES) {
            None => vec![],
            Some(json) => parse_lock_tables(&json)?,
        };
        let sweep_defaults = SweepConfig::default();
        let sweep = SweepConfig {
            max_transactions: env
                .number(var::SWEEP_MAX_TRANSACTIONS, sweep_defaults.max_transactions)?,
            max_locks_per_table: env
                .number(var::SWEEP_MAX_LOCKS, sweep_defaults.max_locks_per_table)?,
            concurrency: env
                .number(var::SWEEP_CONCURRENCY, sweep_defaults.concurrency)?
                .max(1),
            ..sweep_defaults
        };
        let defaults = Limits::default();
        let max_participants = env.number(var::MAX_PARTICIPANTS, defaults.max_participants)?;
        let default_timeout_ms =
            env.number(var::DEFAULT_TIMEOUT_MS, defaults.default_timeout_ms)?;
        let max_timeout_ms = env.number(var::MAX_TIMEOUT_MS, defaults.max_timeout_ms)?;
        if max_participants == 0 {
            return Err(ConfigError::Invalid {
                var: var::MAX_PARTICIPANTS,
                problem: "must be at least 1".into(),
            });
        }
        if max_timeout_ms < defaults.min_timeout_ms {
            return Err(ConfigError::Invalid {
                var: var::MAX_TIMEOUT_MS,
                problem: format!("must be at least {} ms", defaults.min_timeout_ms),
            });
        }
        if !(defaults.min_timeout_ms..=max_timeout_ms).contains(&default_timeout_ms) {
            return Err(ConfigError::Invalid {
                var: var::DEFAULT_TIMEOUT_MS,
                problem: format!(
                    "{default_timeout_ms} ms is outside {}..={max_timeout_ms} ms ({} bounds it)",
                    defaults.min_timeout_ms,
                    var::MAX_TIMEOUT_MS
                ),
            });
        }
        let call_timeout_ms = env.number(
            var::CALL_TIMEOUT_MS,
            DEFAULT_CALL_TIMEOUT.as_millis() as u64,
        )?;
        if call_timeout_ms == 0 {
            return Err(ConfigError::Invalid {
                var: var::CALL_TIMEOUT_MS,
                problem: "must be at least 1 ms".into(),
            });
        }
        let max_body_bytes = env.number(var::MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES)?;
        let participant_defaults = ParticipantConfig::default();
        let margin_ms = env.number(var::FENCE_MARGIN_MS, DEFAULT_FENCE_MARGIN_MS)?;
        let participant = ParticipantConfig {
            fence_capacity: env.number(var::FENCE_CAPACITY, participant_defaults.fence_capacity)?,
            // An entry stays fresh for the largest timeout a transaction may have, plus the margin.
            fence_window_ms: max_timeout_ms.saturating_add(margin_ms),
            // And a prepare may begin at most the margin ahead of the participant's clock.
            clock_margin_ms: margin_ms,
            max_reservations: env
                .number(var::MAX_RESERVATIONS, participant_defaults.max_reservations)?,
            ..participant_defaults
        };
        if participant.max_reservations == 0 {
            return Err(ConfigError::Invalid {
                var: var::MAX_RESERVATIONS,
                problem: "must be at least 1 (0 would refuse every commuting change)".into(),
            });
        }
        if participant.fence_capacity == 0 {
            return Err(ConfigError::Invalid {
                var: var::FENCE_CAPACITY,
                problem: "must be at least 1 (the entry of the transaction that writes it)".into(),
            });
        }
        let commit_mode = match env.get(var::COMMIT_MODE) {
            None => CommitMode::default(),
            Some(name) => CommitMode::parse(name.trim()).ok_or_else(|| ConfigError::Invalid {
                var: var::COMMIT_MODE,
                problem: format!(
                    "{name:?} is not a commit mode: use {}",
                    CommitMode::ALL.map(CommitMode::as_str).join(" or ")
                ),
            })?,
        };
        // An empty secret is unset: a template leaves it `""` when no secret is configured.
        let http_signing_secret = env.secret(var::HTTP_SIGNING_SECRET)?;
        let coordinator_id = env
            .get(var::COORDINATOR_ID)
            .or_else(|| env.get(var::FUNCTION_NAME))
            .unwrap_or_else(|| "twopc-coordinator".to_owned());
        let connections_table = match role {
            Role::StreamProcessor | Role::Connections => Some(env.required(
                var::CONNECTIONS_TABLE,
                "set it to the name of the WebSocket connections table (the template's ConnectionsTable)",
            )?),
            _ => env.get(var::CONNECTIONS_TABLE),
        };
        let stream = match role {
            Role::StreamProcessor => Some(StreamSettings {
                tables_json: env.required(
                    var::STREAM_TABLES,
                    r#"set it to a JSON object of table → role, e.g. {"twopc-transactions": "transactions", "twopc-accounts": {"participant": "accounts", "key": {"hash": {"name": "id", "type": "S"}}}}"#,
                )?,
                delivery_stream: env.required(
                    var::DELIVERY_STREAM,
                    "set it to the data lake's Firehose delivery stream name",
                )?,
                websocket_endpoint: env.required(
                    var::WEBSOCKET_ENDPOINT,
                    "set it to the WebSocket API's management endpoint, https://{api-id}.execute-api.{region}.amazonaws.com/{stage}",
                )?,
                firehose_endpoint: env.get(var::FIREHOSE_ENDPOINT),
            }),
            _ => None,
        };
        let ws = match role {
            Role::WsAuthorizer => Some(ws_settings(&env)?),
            _ => None,
        };
        Ok(Config {
            role,
            transactions_table,
            services,
            participant_table,
            lock_tables,
            sweep,
            dynamodb_endpoint: env.get(var::DYNAMODB_ENDPOINT),
            lambda_endpoint: env.get(var::LAMBDA_ENDPOINT),
            coordinator_id,
            call_timeout: Duration::from_millis(call_timeout_ms),
            http_signing_secret,
            limits: Limits {
                max_participants,
                default_timeout_ms,
                min_timeout_ms: defaults.min_timeout_ms,
                max_timeout_ms,
            },
            max_body_bytes,
            metrics_namespace: env
                .get(var::METRICS_NAMESPACE)
                .unwrap_or_else(|| DEFAULT_METRICS_NAMESPACE.to_owned()),
            participant,
            commit_mode,
            connections_table,
            stream,
            ws,
        })
    }

    /// The participant table (set for [`Role::Participant`], checked at load).
    pub fn participant_table(&self) -> &str {
        self.participant_table.as_deref().unwrap_or_default()
    }

    /// The connections table (set for [`Role::StreamProcessor`] and [`Role::Connections`],
    /// checked at load).
    pub fn connections_table(&self) -> &str {
        self.connections_table.as_deref().unwrap_or_default()
    }

    /// Whether any endpoint points at a local emulator (then static dummy credentials are used).
    pub fn is_local(&self) -> bool {
        self.dynamodb_endpoint.is_some() || self.lambda_endpoint.is_some()
    }
}

fn ws_settings<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<WsSettings, ConfigError> {
    let jwt = match env.get(var::WS_JWKS_URL) {
        None => None,
        Some(jwks_url) => Some(WsJwt {
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
        }),
    };
    Ok(WsSettings {
        shared_token: env.get(var::WS_TOKEN),
        jwt,
    })
}

fn parse_services(json: &str) -> Result<BTreeMap<String, ServiceConfig>, ConfigError> {
    let services: BTreeMap<String, ServiceConfig> =
        serde_json::from_str(json).map_err(|e| ConfigError::Invalid {
            var: var::SERVICES,
            problem: format!(
                "{e}; expected a JSON object of service name → {{\"target\", \"key\"}}, e.g. {SERVICES_EXAMPLE}"
            ),
        })?;
    if services.is_empty() {
        return Err(ConfigError::Invalid {
            var: var::SERVICES,
            problem: format!("names no service; e.g. {SERVICES_EXAMPLE}"),
        });
    }
    if let Some((name, problem)) = services
        .iter()
        .find_map(|(name, s)| Some((name, s.problem()?)))
    {
        return Err(ConfigError::Invalid {
            var: var::SERVICES,
            problem: format!("service {name:?}: {problem}"),
        });
    }
    if let Some(bad) = services
        .keys()
        .find(|k| k.is_empty() || k.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        return Err(ConfigError::Invalid {
            var: var::SERVICES,
            problem: format!("{bad:?} is not a usable service name (no blanks, not empty)"),
        });
    }
    Ok(services)
}

fn parse_lock_tables(json: &str) -> Result<Vec<LockTable>, ConfigError> {
    let tables: BTreeMap<String, KeySchema> =
        serde_json::from_str(json).map_err(|e| ConfigError::Invalid {
            var: var::LOCK_TABLES,
            problem: format!(
                "{e}; expected a JSON object of table name → key schema, e.g. \
                 {{\"accounts\":{{\"hash\":{{\"name\":\"id\",\"type\":\"S\"}}}}}}"
            ),
        })?;
    Ok(tables
        .into_iter()
        .map(|(table, key)| LockTable { table, key })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use twopc_core::record::Target;
    use twopc_core::service::ServiceKind;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    const SERVICES: &str = r#"{"accounts":{"target":{"transport":"lambda","function":"arn:aws:lambda:us-east-1:123456789012:function:accounts"},"key":{"hash":{"name":"id","type":"S"}}},
        "wallets":{"target":{"transport":"http","url":"https://wallets.example"},"key":{"hash":{"name":"id","type":"S"},"range":{"name":"n","type":"N"}}}}"#;

    #[test]
    fn a_coordinator_reads_tables_services_and_defaults() {
        let c = Config::from_lookup(
            Role::Coordinator,
            lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::SERVICES, SERVICES),
                (var::FUNCTION_NAME, "stack-Coordinator-1"),
            ]),
        )
        .expect("valid");
        assert_eq!(c.transactions_table, "tx");
        assert_eq!(
            c.services["accounts"].target,
            Target::Lambda {
                function: "arn:aws:lambda:us-east-1:123456789012:function:accounts".into()
            }
        );
        assert_eq!(
            c.services["wallets"].target,
            Target::Http {
                url: "https://wallets.example".into()
            }
        );
        assert_eq!(c.coordinator_id, "stack-Coordinator-1");
        assert_eq!(c.limits, Limits::default());
        assert_eq!(c.call_timeout, DEFAULT_CALL_TIMEOUT);
        assert_eq!(c.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        assert!(c.http_signing_secret.is_none(), "unsigned unless set");
        assert!(!c.is_local());
    }

    #[test]
    fn missing_variables_are_named_with_what_to_set() {
        let e = Config::from_lookup(Role::Coordinator, lookup(&[])).unwrap_err();
        assert!(matches!(
            e,
            ConfigError::Missing {
                var: "TWOPC_TRANSACTIONS_TABLE",
                ..
            }
        ));
        assert!(e.to_string().contains("TWOPC_TRANSACTIONS_TABLE"), "{e}");

        let e = Config::from_lookup(
            Role::Coordinator,
            lookup(&[(var::TRANSACTIONS_TABLE, "tx")]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("TWOPC_SERVICES"), "{e}");

        let e = Config::from_lookup(
            Role::Participant,
            lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::PARTICIPANT_TABLE, " "),
            ]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("TWOPC_PARTICIPANT_TABLE"), "{e}");
    }

    #[test]
    fn a_service_is_a_table_or_a_custom_participant() {
        let services = r#"{"accounts":{"target":{"transport":"direct","table":"accounts"},"key":{"hash":{"name":"id","type":"S"}}},
            "payments":{"kind":"custom","target":{"transport":"http","url":"http://127.0.0.1:3001"}}}"#;
        let c = Config::from_lookup(
            Role::Coordinator,
            lookup(&[(var::TRANSACTIONS_TABLE, "tx"), (var::SERVICES, services)]),
        )
        .expect("valid");
        assert_eq!(c.services["accounts"].kind, ServiceKind::Table);
        assert_eq!(c.services["payments"].kind, ServiceKind::Custom);
        assert_eq!(c.services["payments"].key, None);
        for (bad, says) in [
            (
                r#"{"payments":{"kind":"custom","target":{"transport":"http","url":"http://p"},"key":{"hash":{"name":"id","type":"S"}}}}"#,
                "has no \"key\"",
            ),
            (
                r#"{"accounts":{"target":{"transport":"direct","table":"accounts"}}}"#,
                "needs \"key\"",
            ),
        ] {
            let e = Config::from_lookup(
                Role::Coordinator,
                lookup(&[(var::TRANSACTIONS_TABLE, "tx"), (var::SERVICES, bad)]),
            )
            .expect_err(bad);
            assert!(
                matches!(
                    e,
                    ConfigError::Invalid {
                        var: "TWOPC_SERVICES",
                        ..
                    }
                ),
                "{e}"
            );
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[test]
    fn an_empty_signing_secret_is_unset_as_a_template_leaves_it() {
        for role in [Role::Coordinator, Role::Sweeper] {
            let c = Config::from_lookup(
                role,
                lookup(&[
                    (var::TRANSACTIONS_TABLE, "tx"),
                    (var::SERVICES, SERVICES),
                    (var::HTTP_SIGNING_SECRET, ""),
                    (var::DYNAMODB_ENDPOINT, ""),
                    (var::LAMBDA_ENDPOINT, ""),
                ]),
            )
            .expect("an empty secret and empty endpoints are accepted");
            assert!(c.http_signing_secret.is_none(), "{role:?}: unsigned");
            assert!(!c.is_local(), "{role:?}: empty endpoints are AWS's own");
        }
    }

    #[test]
    fn the_http_signing_secret_is_read_as_given_and_too_short_is_refused() {
        let secret = " 0123456789abcdef0123456789abcdef";
        let c = Config::from_lookup(
            Role::Sweeper,
            lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::HTTP_SIGNING_SECRET, secret),
            ]),
        )
        .expect("valid");
        assert_eq!(
            c.http_signing_secret.as_ref().map(Secret::expose),
            Some(secret.as_bytes())
        );
        assert!(
            !format!("{c:?}").contains("0123456789abcdef"),
            "never shown"
        );
        let e = Config::from_lookup(
            Role::Coordinator,
            lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::SERVICES, SERVICES),
                (var::HTTP_SIGNING_SECRET, "short"),
            ]),
        )
        .expect_err("too short");
        assert!(
            matches!(
                e,
                ConfigError::Invalid {
                    var: "TWOPC_HTTP_SIGNING_SECRET",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            !e.to_string().contains("short"),
            "the secret is not echoed: {e}"
        );
    }

    #[test]
    fn a_sweeper_needs_only_the_transactions_table() {
        let c = Config::from_lookup(Role::Sweeper, lookup(&[(var::TRANSACTIONS_TABLE, "tx")]))
            .expect("valid");
        assert!(c.lock_tables.is_empty());
        assert_eq!(
            c.sweep.max_transactions,
            SweepConfig::default().max_transactions
        );
        let e = Config::from_lookup(
            Role::Sweeper,
            lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::LOCK_TABLES, "accounts"),
            ]),
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::Invalid {
                    var: "TWOPC_LOCK_TABLES",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_participant_needs_no_services() {
        let c = Config::from_lookup(
            Role::Participant,
            lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::PARTICIPANT_TABLE, "accounts"),
            ]),
        )
        .expect("valid");
        assert_eq!(c.participant_table(), "accounts");
        assert!(c.services.is_empty());
    }

    #[test]
    fn malformed_values_say_what_is_expected() {
        let base = [(var::TRANSACTIONS_TABLE, "tx")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            Config::from_lookup(Role::Coordinator, lookup(&all)).unwrap_err()
        };
        let e = with(&[(var::SERVICES, "{\"accounts\": {\"target\": {}}}")]);
        assert!(
            matches!(
                e,
                ConfigError::Invalid {
                    var: "TWOPC_SERVICES",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("e.g."), "{e}");
        let e = with(&[(var::SERVICES, "{}")]);
        assert!(e.to_string().contains("names no service"), "{e}");
        let e = with(&[(var::SERVICES, SERVICES), (var::CALL_TIMEOUT_MS, "soon")]);
        assert!(
            matches!(
                e,
                ConfigError::Invalid {
                    var: "TWOPC_CALL_TIMEOUT_MS",
                    ..
                }
            ),
            "{e}"
        );
        let e = with(&[
            (var::SERVICES, SERVICES),
            (var::DEFAULT_TIMEOUT_MS, "120000"),
        ]);
        assert!(
            matches!(
                e,
                ConfigError::Invalid {
                    var: "TWOPC_DEFAULT_TIMEOUT_MS",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn local_endpoints_and_limits_are_read() {
        let c = Config::from_lookup(
            Role::Sweeper,
            lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::SERVICES, SERVICES),
                (
                    var::LOCK_TABLES,
                    r#"{"accounts": {"hash": {"name": "id", "type": "S"}}, "wallets": {"hash": {"name": "id", "type": "S"}}}"#,
                ),
                (var::SWEEP_CONCURRENCY, "0"),
                (var::DYNAMODB_ENDPOINT, "http://127.0.0.1:8000"),
                (var::MAX_PARTICIPANTS, "4"),
                (var::CALL_TIMEOUT_MS, "250"),
                (var::COORDINATOR_ID, "me"),
                (var::FENCE_CAPACITY, "8"),
                (var::MAX_RESERVATIONS, "5"),
            ]),
        )
        .expect("valid");
        assert_eq!(c.participant.fence_capacity, 8);
        assert_eq!(c.participant.max_reservations, 5);
        assert_eq!(
            c.participant.fence_window_ms,
            ParticipantConfig::default().fence_window_ms,
            "the largest timeout (60 s) plus the margin (10 s)"
        );
        assert_eq!(
            c.participant.clock_margin_ms, DEFAULT_FENCE_MARGIN_MS,
            "and a prepare may begin the margin ahead of the participant's clock"
        );
        let e = Config::from_lookup(
            Role::Participant,
            lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::PARTICIPANT_TABLE, "accounts"),
                (var::FENCE_CAPACITY, "0"),
            ]),
        )
        .expect_err("a fence of no entries");
        assert!(e.to_string().contains(var::FENCE_CAPACITY), "{e}");
        let e = Config::from_lookup(
            Role::Participant,
            lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::PARTICIPANT_TABLE, "accounts"),
                (var::MAX_RESERVATIONS, "0"),
            ]),
        )
        .expect_err("no room for any reservation");
        assert!(e.to_string().contains(var::MAX_RESERVATIONS), "{e}");
        let tables: Vec<&str> = c.lock_tables.iter().map(|t| t.table.as_str()).collect();
        assert_eq!(tables, ["accounts", "wallets"]);
        assert_eq!(c.lock_tables[0].key, KeySchema::string_hash("id"));
        assert_eq!(c.sweep.concurrency, 1, "at least one at a time");
        assert!(c.is_local());
        assert_eq!(c.limits.max_participants, 4);
        assert_eq!(c.call_timeout, Duration::from_millis(250));
        assert_eq!(c.coordinator_id, "me");
    }

    /// A plausible value for each variable a role requires.
    fn sample(name: &str) -> &'static str {
        match name {
            var::SERVICES => SERVICES,
            var::STREAM_TABLES => r#"{"tx": "transactions"}"#,
            var::WEBSOCKET_ENDPOINT => "https://ws.example/prod",
            _ => "a-table",
        }
    }

    #[test]
    fn each_role_starts_with_what_it_requires_and_names_what_is_missing() {
        for role in Role::ALL {
            let all: Vec<(&str, &str)> = role.required().iter().map(|v| (*v, sample(v))).collect();
            let c = Config::from_lookup(role, lookup(&all))
                .unwrap_or_else(|e| panic!("{role:?} with {all:?}: {e}"));
            assert_eq!(c.role, role);
            for missing in role.required() {
                let some: Vec<_> = all.iter().copied().filter(|(n, _)| n != missing).collect();
                let e = Config::from_lookup(role, lookup(&some)).expect_err(missing);
                assert!(
                    matches!(&e, ConfigError::Missing { var, .. } if var == missing),
                    "{role:?} without {missing}: {e}"
                );
                assert!(e.to_string().contains("set it to"), "says what to set: {e}");
            }
        }
    }

    #[test]
    fn the_fan_out_functions_read_their_own_sections() {
        let c = Config::from_lookup(
            Role::StreamProcessor,
            lookup(&[
                (var::STREAM_TABLES, r#"{"tx": "transactions"}"#),
                (var::DELIVERY_STREAM, "lake"),
                (var::CONNECTIONS_TABLE, "connections"),
                (var::WEBSOCKET_ENDPOINT, "https://ws.example/prod"),
                (var::FIREHOSE_ENDPOINT, "http://127.0.0.1:4566"),
                (var::DYNAMODB_ENDPOINT, "http://127.0.0.1:8000"),
            ]),
        )
        .expect("valid");
        let stream = c.stream.as_ref().expect("the stream section");
        assert_eq!(stream.delivery_stream, "lake");
        assert_eq!(
            stream.firehose_endpoint.as_deref(),
            Some("http://127.0.0.1:4566")
        );
        assert_eq!(c.connections_table(), "connections");
        assert!(c.is_local(), "DynamoDB Local, as every function reads it");
        let c = Config::from_lookup(Role::Connections, lookup(&[(var::CONNECTIONS_TABLE, "c")]))
            .expect("valid");
        assert_eq!((c.connections_table(), c.stream.is_none()), ("c", true));
    }

    #[test]
    fn the_ws_authorizer_needs_the_issuer_and_audience_only_with_a_jwks_url() {
        let c = Config::from_lookup(Role::WsAuthorizer, lookup(&[(var::WS_TOKEN, "demo")]))
            .expect("a shared token alone");
        let ws = c.ws.expect("the ws section");
        assert_eq!((ws.shared_token.as_deref(), ws.jwt), (Some("demo"), None));
        let e = Config::from_lookup(
            Role::WsAuthorizer,
            lookup(&[
                (var::WS_JWKS_URL, "https://issuer.example/jwks.json"),
                (var::WS_AUDIENCE, "app"),
            ]),
        )
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
        let c = Config::from_lookup(
            Role::WsAuthorizer,
            lookup(&[
                (var::WS_JWKS_URL, "https://issuer.example/jwks.json"),
                (var::WS_ISSUER, "https://issuer.example"),
                (var::WS_AUDIENCE, "app"),
                (var::WS_ALGORITHMS, "RS256, ES256,"),
            ]),
        )
        .expect("valid");
        let jwt = c.ws.and_then(|ws| ws.jwt).expect("jwt");
        assert_eq!(
            jwt.algorithms,
            Some(vec!["RS256".to_owned(), "ES256".to_owned()])
        );
    }
}
