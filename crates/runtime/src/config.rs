//! The functions' configuration: one typed struct, read once from the environment at start.
//!
//! Every variable's name is a constant in [`var`]; `template.yaml` sets the same names (a test
//! in `tests/` checks it). A missing or malformed variable is refused with an error that names
//! it and says what to put there.

use std::collections::BTreeMap;
use std::time::Duration;

use twopc_core::coordinator::CommitMode;
use twopc_core::participant::ParticipantConfig;
use twopc_core::request::{KeySchema, Limits, ServiceConfig};
use twopc_core::signing::Secret;
use twopc_core::sweeper::{LockTable, SweepConfig};

/// The environment variables, each named once.
pub mod var {
    /// The transactions table (every function).
    pub const TRANSACTIONS_TABLE: &str = "TWOPC_TRANSACTIONS_TABLE";
    /// The participant services as JSON: name → `{"target": {...}, "key": {...}}` for a table's
    /// participant, or `{"kind": "custom", "target": {...}}` for a custom participant (one built
    /// on `twopc-participant-sdk`, given an opaque `payload`) (coordinator).
    pub const SERVICES: &str = "TWOPC_SERVICES";
    /// The participant function's own table (participant).
    pub const PARTICIPANT_TABLE: &str = "TWOPC_PARTICIPANT_TABLE";
    /// The participant tables whose expired locks the sweeper resolves, as JSON: table name →
    /// key schema, e.g. `{"accounts":{"hash":{"name":"id","type":"S"}}}` (sweeper; optional).
    pub const LOCK_TABLES: &str = "TWOPC_LOCK_TABLES";
    /// A DynamoDB endpoint URL (DynamoDB Local); unset in AWS.
    pub const DYNAMODB_ENDPOINT: &str = "TWOPC_DYNAMODB_ENDPOINT";
    /// A Lambda Invoke API endpoint URL (`cargo lambda watch`); unset in AWS.
    pub const LAMBDA_ENDPOINT: &str = "TWOPC_LAMBDA_ENDPOINT";
    /// The secret shared with the `http` participants (custom participants on
    /// `twopc-participant-sdk`, whose router refuses unsigned requests): when set, the `http`
    /// transport signs every request with it (`twopc_core::signing`); at least 16 bytes.
    /// Coordinator and sweeper (optional; unset, requests go unsigned).
    pub const HTTP_SIGNING_SECRET: &str = "TWOPC_HTTP_SIGNING_SECRET";
    /// Who this coordinator is (written into locks, logged). Default: the function's name.
    pub const COORDINATOR_ID: &str = "TWOPC_COORDINATOR_ID";
    /// How long one call to a participant may take, in ms (lambda and http transports).
    pub const CALL_TIMEOUT_MS: &str = "TWOPC_CALL_TIMEOUT_MS";
    /// Most participants in one transaction.
    pub const MAX_PARTICIPANTS: &str = "TWOPC_MAX_PARTICIPANTS";
    /// The prepare timeout when a request gives none, in ms.
    pub const DEFAULT_TIMEOUT_MS: &str = "TWOPC_DEFAULT_TIMEOUT_MS";
    /// The largest prepare timeout a request may ask for, in ms.
    pub const MAX_TIMEOUT_MS: &str = "TWOPC_MAX_TIMEOUT_MS";
    /// The largest accepted request body, in bytes (coordinator).
    pub const MAX_BODY_BYTES: &str = "TWOPC_MAX_BODY_BYTES";
    /// Most overdue transactions one sweep drives.
    pub const SWEEP_MAX_TRANSACTIONS: &str = "TWOPC_SWEEP_MAX_TRANSACTIONS";
    /// Most expired locks one sweep examines per table.
    pub const SWEEP_MAX_LOCKS: &str = "TWOPC_SWEEP_MAX_LOCKS";
    /// How many transactions one sweep drives at once.
    pub const SWEEP_CONCURRENCY: &str = "TWOPC_SWEEP_CONCURRENCY";
    /// Most entries an item's fence keeps after a pruning write (participant logic: every
    /// function that runs it). Default 32; at least 1. Liveness only, see
    /// `ParticipantConfig::fence_capacity`.
    pub const FENCE_CAPACITY: &str = "TWOPC_FENCE_CAPACITY";
    /// `ParticipantConfig::max_reservations`.
    pub const MAX_RESERVATIONS: &str = "TWOPC_MAX_RESERVATIONS";
    /// How the coordinator commits: `auto` (the default: a transaction of `direct` tables, none
    /// hot, no delete, as one native `TransactWriteItems`; any other staged), `staged` (the
    /// record written with the prepares, answered after one round, finished after the answer)
    /// or `classic` (begin, prepare, decide, complete, finalize, then answer). Coordinator.
    pub const COMMIT_MODE: &str = "TWOPC_COMMIT_MODE";
    /// How long past its deadline a fence entry is kept when the fence has room, in ms.
    /// Default 10000. Liveness only, see `ParticipantConfig::fence_margin_ms`.
    pub const FENCE_MARGIN_MS: &str = "TWOPC_FENCE_MARGIN_MS";
    /// The CloudWatch namespace of the EMF metrics.
    pub const METRICS_NAMESPACE: &str = "TWOPC_METRICS_NAMESPACE";
    /// The log filter (`tracing-subscriber` directives, e.g. `info,twopc_core=debug`).
    pub const LOG: &str = "RUST_LOG";
    /// Set by Lambda: the function's name (the default coordinator id).
    pub const FUNCTION_NAME: &str = "AWS_LAMBDA_FUNCTION_NAME";
    /// Set by Lambda when the function's application log level is configured (`LoggingConfig`,
    /// JSON log format): `TRACE` … `FATAL`. It sets the level of the project's own crates,
    /// over `RUST_LOG`.
    pub const LAMBDA_LOG_LEVEL: &str = "AWS_LAMBDA_LOG_LEVEL";
    /// Set by the Lambda runtime for the invocation in progress: its X-Ray trace header
    /// (`crate::trace`'s fallback).
    pub const LAMBDA_TRACE_ID: &str = "_X_AMZN_TRACE_ID";

    /// The stream processor's tables as JSON: table → `"transactions"` or
    /// `{"participant": NAME, "key": {...}}` (stream-processor).
    pub const STREAM_TABLES: &str = "TWOPC_STREAM_TABLES";
    /// The Firehose delivery stream of the data lake (stream-processor).
    pub const DELIVERY_STREAM: &str = "TWOPC_DELIVERY_STREAM";
    /// The WebSocket subscriptions table (stream-processor, connections).
    pub const CONNECTIONS_TABLE: &str = "TWOPC_CONNECTIONS_TABLE";
    /// A Firehose endpoint URL (moto, a local emulator); unset in AWS (stream-processor).
    pub const FIREHOSE_ENDPOINT: &str = "TWOPC_FIREHOSE_ENDPOINT";
    /// The WebSocket API's management endpoint (stream-processor).
    pub const WEBSOCKET_ENDPOINT: &str = "TWOPC_WEBSOCKET_ENDPOINT";
    /// The opt-in shared demo token: when set, `$connect` also admits `?token=` equal to it
    /// (ws-authorizer).
    pub const WS_TOKEN: &str = "TWOPC_WS_TOKEN";
    /// The OIDC issuer WebSocket tokens must come from, their `iss` (ws-authorizer).
    pub const WS_ISSUER: &str = "TWOPC_WS_ISSUER";
    /// The audience WebSocket tokens must name in `aud` (ws-authorizer).
    pub const WS_AUDIENCE: &str = "TWOPC_WS_AUDIENCE";
    /// The issuer's https JWKS URL; unset, no JWT is accepted (ws-authorizer).
    pub const WS_JWKS_URL: &str = "TWOPC_WS_JWKS_URL";
    /// The accepted JWT algorithms, comma-separated (default RS256,ES256; ws-authorizer).
    pub const WS_ALGORITHMS: &str = "TWOPC_WS_ALGORITHMS";

    /// Every variable the functions read (for documentation and the template check).
    pub const ALL: &[&str] = &[
        TRANSACTIONS_TABLE,
        SERVICES,
        PARTICIPANT_TABLE,
        LOCK_TABLES,
        DYNAMODB_ENDPOINT,
        LAMBDA_ENDPOINT,
        HTTP_SIGNING_SECRET,
        COORDINATOR_ID,
        CALL_TIMEOUT_MS,
        COMMIT_MODE,
        MAX_PARTICIPANTS,
        DEFAULT_TIMEOUT_MS,
        MAX_TIMEOUT_MS,
        MAX_BODY_BYTES,
        SWEEP_MAX_TRANSACTIONS,
        SWEEP_MAX_LOCKS,
        SWEEP_CONCURRENCY,
        FENCE_CAPACITY,
        MAX_RESERVATIONS,
        FENCE_MARGIN_MS,
        METRICS_NAMESPACE,
        LOG,
        STREAM_TABLES,
        DELIVERY_STREAM,
        CONNECTIONS_TABLE,
        FIREHOSE_ENDPOINT,
        WEBSOCKET_ENDPOINT,
        WS_TOKEN,
        WS_ISSUER,
        WS_AUDIENCE,
        WS_JWKS_URL,
        WS_ALGORITHMS,
    ];
}

/// Which function is starting: each needs a different subset of the variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// API Gateway → coordinator: needs the transactions table and the services.
    Coordinator,
    /// The generic participant: needs the transactions table and its own table.
    Participant,
    /// The scheduled recovery pass: needs the transactions table (and the lock tables to
    /// resolve orphan locks).
    Sweeper,
}

/// A variable is missing or malformed; the message names it and says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is not set (or is empty).
    #[error("environment variable {var} is not set: {what}")]
    Missing {
        /// The variable.
        var: &'static str,
        /// What it should hold.
        what: &'static str,
    },
    /// A variable is set but cannot be used.
    #[error("environment variable {var} is invalid: {problem}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// What is wrong and what is expected.
        problem: String,
    },
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
}

/// Default participant call timeout: below the coordinator function's own timeout (30 s in the
/// template) with room for the decision and completion.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default request body limit (64 KiB): a transaction of 32 participants fits many times over.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;
/// The shortest accepted signing secret (bytes).
pub const MIN_SIGNING_SECRET_BYTES: usize = 16;
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
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let transactions_table = get(var::TRANSACTIONS_TABLE).ok_or(ConfigError::Missing {
            var: var::TRANSACTIONS_TABLE,
            what: "set it to the name of the transactions table (the template's TransactionsTable)",
        })?;
        let services = match (role, get(var::SERVICES)) {
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
        let participant_table = get(var::PARTICIPANT_TABLE);
        if role == Role::Participant && participant_table.is_none() {
            return Err(ConfigError::Missing {
                var: var::PARTICIPANT_TABLE,
                what: "set it to the name of the table this participant function serves",
            });
        }
        let lock_tables = match get(var::LOCK_TABLES) {
            None => vec![],
            Some(json) => parse_lock_tables(&json)?,
        };
        let sweep_defaults = SweepConfig::default();
        let sweep = SweepConfig {
            max_transactions: number(
                &get,
                var::SWEEP_MAX_TRANSACTIONS,
                sweep_defaults.max_transactions,
            )?,
            max_locks_per_table: number(
                &get,
                var::SWEEP_MAX_LOCKS,
                sweep_defaults.max_locks_per_table,
            )?,
            concurrency: number(&get, var::SWEEP_CONCURRENCY, sweep_defaults.concurrency)?.max(1),
            ..sweep_defaults
        };
        let defaults = Limits::default();
        let max_participants = number(&get, var::MAX_PARTICIPANTS, defaults.max_participants)?;
        let default_timeout_ms =
            number(&get, var::DEFAULT_TIMEOUT_MS, defaults.default_timeout_ms)?;
        let max_timeout_ms = number(&get, var::MAX_TIMEOUT_MS, defaults.max_timeout_ms)?;
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
        let call_timeout_ms = number(
            &get,
            var::CALL_TIMEOUT_MS,
            DEFAULT_CALL_TIMEOUT.as_millis() as u64,
        )?;
        if call_timeout_ms == 0 {
            return Err(ConfigError::Invalid {
                var: var::CALL_TIMEOUT_MS,
                problem: "must be at least 1 ms".into(),
            });
        }
        let max_body_bytes = number(&get, var::MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES)?;
        let participant_defaults = ParticipantConfig::default();
        let participant = ParticipantConfig {
            fence_capacity: number(
                &get,
                var::FENCE_CAPACITY,
                participant_defaults.fence_capacity,
            )?,
            fence_margin_ms: number(
                &get,
                var::FENCE_MARGIN_MS,
                participant_defaults.fence_margin_ms,
            )?,
            max_reservations: number(
                &get,
                var::MAX_RESERVATIONS,
                participant_defaults.max_reservations,
            )?,
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
        let commit_mode = match get(var::COMMIT_MODE) {
            None => CommitMode::default(),
            Some(name) => CommitMode::parse(name.trim()).ok_or_else(|| ConfigError::Invalid {
                var: var::COMMIT_MODE,
                problem: format!(
                    "{name:?} is not a commit mode: use {}",
                    CommitMode::ALL.map(CommitMode::as_str).join(" or ")
                ),
            })?,
        };
        // Read as is (not trimmed): the secret is whatever bytes the services were given. Empty
        // is unset: a template leaves it `""` when no secret is configured (SAM turns an absent
        // value into an empty one).
        let http_signing_secret = match lookup(var::HTTP_SIGNING_SECRET).filter(|s| !s.is_empty()) {
            None => None,
            Some(s) if s.len() < MIN_SIGNING_SECRET_BYTES => {
                return Err(ConfigError::Invalid {
                    var: var::HTTP_SIGNING_SECRET,
                    problem: format!(
                        "{} bytes; a signing secret has at least {MIN_SIGNING_SECRET_BYTES} (e.g. `openssl rand -hex 32`), or leave it unset",
                        s.len()
                    ),
                });
            }
            Some(s) => Some(Secret::new(s)),
        };
        let coordinator_id = get(var::COORDINATOR_ID)
            .or_else(|| get(var::FUNCTION_NAME))
            .unwrap_or_else(|| "twopc-coordinator".to_owned());
        Ok(Config {
            role,
            transactions_table,
            services,
            participant_table,
            lock_tables,
            sweep,
            dynamodb_endpoint: get(var::DYNAMODB_ENDPOINT),
            lambda_endpoint: get(var::LAMBDA_ENDPOINT),
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
            metrics_namespace: get(var::METRICS_NAMESPACE)
                .unwrap_or_else(|| DEFAULT_METRICS_NAMESPACE.to_owned()),
            participant,
            commit_mode,
        })
    }

    /// The participant table (set for [`Role::Participant`], checked at load).
    pub fn participant_table(&self) -> &str {
        self.participant_table.as_deref().unwrap_or_default()
    }

    /// Whether any endpoint points at a local emulator (then static dummy credentials are used).
    pub fn is_local(&self) -> bool {
        self.dynamodb_endpoint.is_some() || self.lambda_endpoint.is_some()
    }
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

fn number<T: std::str::FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    default: T,
) -> Result<T, ConfigError> {
    match get(name) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| ConfigError::Invalid {
            var: name,
            problem: format!("{v:?} is not a whole non-negative number"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use twopc_core::record::Target;
    use twopc_core::request::ServiceKind;

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
            c.participant.fence_margin_ms,
            ParticipantConfig::default().fence_margin_ms
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
}
