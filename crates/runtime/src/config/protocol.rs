//! The settings of the three functions that run the protocol: the coordinator, the participant
//! and the sweeper. Each reads the transactions table and the participant logic's tunables
//! ([`Protocol`]: the coordinator and the sweeper run the participant logic in-process for
//! `direct` participants); the coordinator and the sweeper also read how to call participants
//! ([`Calls`]) and the coordinator's own configuration (the sweeper's recovery runs the
//! coordinator's `recover`).

use std::collections::BTreeMap;
use std::time::Duration;

use twopc_core::coordinator::{CommitMode, CoordinatorConfig};
use twopc_core::participant::ParticipantConfig;
use twopc_core::record::Target;
use twopc_core::request::Limits;
use twopc_core::service::{KeySchema, ServiceConfig};
use twopc_core::signing::Secret;
use twopc_core::sweeper::{LockTable, SweepConfig};
use twopc_function::env::{ConfigError, Env};
use twopc_function::var;

use super::{Role, Settings, Shared};

/// Default participant call timeout: below the coordinator function's own timeout (30 s in the
/// template) with room for the decision and completion.
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default request body limit (64 KiB): a transaction of 32 participants fits many times over.
pub(crate) const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;
/// Default fence margin (ms), for clock skew: how long past the largest timeout a fence entry
/// stays fresh (`ParticipantConfig::fence_window_ms` is the two together), and how far ahead
/// of a participant's clock a prepare's `began` may lie (`ParticipantConfig::clock_margin_ms`).
pub(crate) const DEFAULT_FENCE_MARGIN_MS: u64 = 10_000;

const SERVICES_EXAMPLE: &str = r#"{"accounts":{"target":{"transport":"lambda","function":"accounts-participant"},"key":{"hash":{"name":"id","type":"S"}}}}"#;

/// What every function that runs the participant logic reads.
#[derive(Clone, Debug)]
pub struct Protocol {
    /// The transactions table.
    pub transactions_table: String,
    /// The participant logic's tunables.
    pub participant: ParticipantConfig,
}

/// How the coordinator logic calls participants.
#[derive(Clone, Debug)]
pub struct Calls {
    /// How long one call to a participant may take.
    pub timeout: Duration,
    /// The secret the `http` transport signs requests with, when set.
    pub signing_secret: Option<Secret>,
}

/// The coordinator function's settings.
#[derive(Clone, Debug)]
pub struct CoordinatorSettings {
    /// What every function reads.
    pub shared: Shared,
    /// The transactions table and the participant logic's tunables.
    pub protocol: Protocol,
    /// How participants are called.
    pub calls: Calls,
    /// Who it is, the services, the request limits and the commit mode.
    pub coordinator: CoordinatorConfig,
    /// The largest accepted request body (bytes).
    pub max_body_bytes: usize,
}

/// The participant function's settings.
#[derive(Clone, Debug)]
pub struct ParticipantSettings {
    /// What every function reads.
    pub shared: Shared,
    /// The transactions table and the participant logic's tunables.
    pub protocol: Protocol,
    /// The table this function serves.
    pub table: String,
}

/// The sweeper function's settings.
#[derive(Clone, Debug)]
pub struct SweeperSettings {
    /// What every function reads.
    pub shared: Shared,
    /// The transactions table and the participant logic's tunables.
    pub protocol: Protocol,
    /// How participants are called.
    pub calls: Calls,
    /// The coordinator its recovery runs (the services may be empty: recovery reads each
    /// participant's target from the record).
    pub coordinator: CoordinatorConfig,
    /// Participant tables whose expired locks it resolves.
    pub lock_tables: Vec<LockTable>,
    /// Bounds of one sweep.
    pub sweep: SweepConfig,
}

/// Settings a coordinator is built from: the coordinator function's, and the sweeper's.
pub trait RunsCoordinator: Settings {
    /// The transactions table and the participant logic's tunables.
    fn protocol(&self) -> &Protocol;
    /// How participants are called.
    fn calls(&self) -> &Calls;
    /// The coordinator's own configuration.
    fn coordinator_config(&self) -> &CoordinatorConfig;
}

impl Settings for CoordinatorSettings {
    const ROLE: Role = Role::Coordinator;

    fn read<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Self, ConfigError> {
        let (protocol, calls, coordinator) = coordinating(env, true)?;
        Ok(CoordinatorSettings {
            shared: Shared::read(Self::ROLE, env),
            max_body_bytes: env.number(var::MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES)?,
            protocol,
            calls,
            coordinator,
        })
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }

    fn resources(&self) -> Vec<(String, &'static str)> {
        let mut names = self.protocol.resources();
        names.extend(direct_tables(&self.coordinator));
        names
    }
}

impl Settings for ParticipantSettings {
    const ROLE: Role = Role::Participant;

    fn read<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Self, ConfigError> {
        let transactions_table = transactions_table(env)?;
        let table = env.required(
            var::PARTICIPANT_TABLE,
            "set it to the name of the table this participant function serves",
        )?;
        Ok(ParticipantSettings {
            shared: Shared::read(Self::ROLE, env),
            protocol: Protocol::read(env, transactions_table, max_timeout_ms(env)?)?,
            table,
        })
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }

    fn resources(&self) -> Vec<(String, &'static str)> {
        let mut names = self.protocol.resources();
        names.push((self.table.clone(), var::PARTICIPANT_TABLE));
        names
    }
}

impl Settings for SweeperSettings {
    const ROLE: Role = Role::Sweeper;

    fn read<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Self, ConfigError> {
        let (protocol, calls, coordinator) = coordinating(env, false)?;
        Ok(SweeperSettings {
            shared: Shared::read(Self::ROLE, env),
            protocol,
            calls,
            coordinator,
            lock_tables: match env.get(var::LOCK_TABLES) {
                None => vec![],
                Some(json) => parse_lock_tables(&json)?,
            },
            sweep: sweep(env)?,
        })
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }

    fn resources(&self) -> Vec<(String, &'static str)> {
        let mut names = self.protocol.resources();
        names.extend(direct_tables(&self.coordinator));
        names.extend(
            self.lock_tables
                .iter()
                .map(|lock| (lock.table.clone(), var::LOCK_TABLES)),
        );
        names
    }
}

/// The two settings a coordinator is built from hold its parts under the same names.
macro_rules! runs_coordinator {
    ($($settings:ty),*) => {$(
        impl RunsCoordinator for $settings {
            fn protocol(&self) -> &Protocol {
                &self.protocol
            }
            fn calls(&self) -> &Calls {
                &self.calls
            }
            fn coordinator_config(&self) -> &CoordinatorConfig {
                &self.coordinator
            }
        }
    )*};
}

runs_coordinator!(CoordinatorSettings, SweeperSettings);

impl Protocol {
    /// Reads the participant logic's tunables; an entry of the fence stays fresh for
    /// `max_timeout_ms` (the largest timeout a transaction may have) plus the margin.
    fn read<F: Fn(&str) -> Option<String>>(
        env: &Env<F>,
        transactions_table: String,
        max_timeout_ms: u64,
    ) -> Result<Protocol, ConfigError> {
        let defaults = ParticipantConfig::default();
        let margin_ms = env.number(var::FENCE_MARGIN_MS, DEFAULT_FENCE_MARGIN_MS)?;
        let participant = ParticipantConfig {
            fence_capacity: env.number(var::FENCE_CAPACITY, defaults.fence_capacity)?,
            fence_window_ms: max_timeout_ms.saturating_add(margin_ms),
            // And a prepare may begin at most the margin ahead of the participant's clock.
            clock_margin_ms: margin_ms,
            max_reservations: env.number(var::MAX_RESERVATIONS, defaults.max_reservations)?,
            ..defaults
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
        Ok(Protocol {
            transactions_table,
            participant,
        })
    }

    fn resources(&self) -> Vec<(String, &'static str)> {
        vec![(self.transactions_table.clone(), var::TRANSACTIONS_TABLE)]
    }
}

/// The tables of the services reached `direct`, as `TWOPC_SERVICES` names them.
fn direct_tables(config: &CoordinatorConfig) -> impl Iterator<Item = (String, &'static str)> {
    config
        .services
        .values()
        .filter_map(|service| match &service.target {
            Target::Direct { table } => Some((table.clone(), crate::record::DIRECT)),
            _ => None,
        })
}

/// What a coordinator is built from, read alike by the coordinator and the sweeper (to which
/// `TWOPC_SERVICES` is optional, `services_required` false).
fn coordinating<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
    services_required: bool,
) -> Result<(Protocol, Calls, CoordinatorConfig), ConfigError> {
    let transactions_table = transactions_table(env)?;
    let services = services(env, services_required)?;
    let limits = limits(env)?;
    let calls = calls(env)?;
    let protocol = Protocol::read(env, transactions_table, limits.max_timeout_ms)?;
    Ok((protocol, calls, coordinator_config(env, services, limits)?))
}

fn transactions_table<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<String, ConfigError> {
    env.required(
        var::TRANSACTIONS_TABLE,
        "set it to the name of the transactions table (the template's TransactionsTable)",
    )
}

/// `TWOPC_SERVICES`: required by the coordinator; to the sweeper, empty when unset.
fn services<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
    required: bool,
) -> Result<BTreeMap<String, ServiceConfig>, ConfigError> {
    match env.get(var::SERVICES) {
        Some(json) => parse_services(&json),
        None if required => Err(ConfigError::Missing {
            var: var::SERVICES,
            what: "set it to a JSON object naming each participant service, e.g. \
                   {\"accounts\":{\"target\":{\"transport\":\"lambda\",\"function\":\"accounts-participant\"},\"key\":{\"hash\":{\"name\":\"id\",\"type\":\"S\"}}}}",
        }),
        None => Ok(BTreeMap::new()),
    }
}

fn sweep<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<SweepConfig, ConfigError> {
    let defaults = SweepConfig::default();
    Ok(SweepConfig {
        max_transactions: env.number(var::SWEEP_MAX_TRANSACTIONS, defaults.max_transactions)?,
        max_locks_per_table: env.number(var::SWEEP_MAX_LOCKS, defaults.max_locks_per_table)?,
        concurrency: env
            .number(var::SWEEP_CONCURRENCY, defaults.concurrency)?
            .max(1),
        ..defaults
    })
}

/// `TWOPC_MAX_TIMEOUT_MS`: the largest timeout a transaction may ask for.
fn max_timeout_ms<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<u64, ConfigError> {
    let defaults = Limits::default();
    let max_timeout_ms = env.number(var::MAX_TIMEOUT_MS, defaults.max_timeout_ms)?;
    if max_timeout_ms < defaults.min_timeout_ms {
        return Err(ConfigError::Invalid {
            var: var::MAX_TIMEOUT_MS,
            problem: format!("must be at least {} ms", defaults.min_timeout_ms),
        });
    }
    Ok(max_timeout_ms)
}

fn limits<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Limits, ConfigError> {
    let defaults = Limits::default();
    let max_participants = env.number(var::MAX_PARTICIPANTS, defaults.max_participants)?;
    let default_timeout_ms = env.number(var::DEFAULT_TIMEOUT_MS, defaults.default_timeout_ms)?;
    if max_participants == 0 {
        return Err(ConfigError::Invalid {
            var: var::MAX_PARTICIPANTS,
            problem: "must be at least 1".into(),
        });
    }
    let max_timeout_ms = max_timeout_ms(env)?;
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
    Ok(Limits {
        max_participants,
        default_timeout_ms,
        min_timeout_ms: defaults.min_timeout_ms,
        max_timeout_ms,
    })
}

fn calls<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Calls, ConfigError> {
    let timeout_ms = env.number(
        var::CALL_TIMEOUT_MS,
        DEFAULT_CALL_TIMEOUT.as_millis() as u64,
    )?;
    if timeout_ms == 0 {
        return Err(ConfigError::Invalid {
            var: var::CALL_TIMEOUT_MS,
            problem: "must be at least 1 ms".into(),
        });
    }
    Ok(Calls {
        timeout: Duration::from_millis(timeout_ms),
        // An empty secret is unset: a template leaves it `""` when no secret is configured.
        signing_secret: env.secret(var::HTTP_SIGNING_SECRET)?,
    })
}

fn coordinator_config<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
    services: BTreeMap<String, ServiceConfig>,
    limits: Limits,
) -> Result<CoordinatorConfig, ConfigError> {
    let mode = match env.get(var::COMMIT_MODE) {
        None => CommitMode::default(),
        Some(name) => CommitMode::parse(name.trim()).ok_or_else(|| ConfigError::Invalid {
            var: var::COMMIT_MODE,
            problem: format!(
                "{name:?} is not a commit mode: use {}",
                CommitMode::ALL.map(CommitMode::as_str).join(" or ")
            ),
        })?,
    };
    let id = env
        .get(var::COORDINATOR_ID)
        .or_else(|| env.get(var::FUNCTION_NAME))
        .unwrap_or_else(|| "twopc-coordinator".to_owned());
    let heat_window_ms = env.number(
        var::HEAT_WINDOW_MS,
        CoordinatorConfig::DEFAULT_HEAT_WINDOW_MS,
    )?;
    if heat_window_ms == 0 {
        return Err(ConfigError::Invalid {
            var: var::HEAT_WINDOW_MS,
            problem: "0 would never route around a contended item: use at least 1 (ms)".into(),
        });
    }
    Ok(CoordinatorConfig {
        id,
        services,
        limits,
        mode,
        heat_window_ms,
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
    if let Some((first, second)) = reached_twice(&services) {
        return Err(ConfigError::Invalid {
            var: var::SERVICES,
            problem: format!(
                "services {first:?} and {second:?} reach one participant ({}) under two names: \
                 one item would be two to the coordinator, so name it once",
                services[first].target.reaches()
            ),
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

/// Two services whose targets reach one thing (`Target::reaches`: a table by name and by ARN,
/// a function by name and by ARN), if any.
fn reached_twice(services: &BTreeMap<String, ServiceConfig>) -> Option<(&String, &String)> {
    let mut seen: BTreeMap<String, &String> = BTreeMap::new();
    for (name, s) in services {
        if let Some(first) = seen.insert(s.target.reaches(), name) {
            return Some((first, name));
        }
    }
    None
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
pub(crate) mod tests {
    use super::super::tests::{assert_invalid, lookup};
    use super::*;
    use twopc_core::service::ServiceKind;

    pub(crate) const SERVICES: &str = r#"{"accounts":{"target":{"transport":"lambda","function":"arn:aws:lambda:us-east-1:123456789012:function:accounts"},"key":{"hash":{"name":"id","type":"S"}}},
        "wallets":{"target":{"transport":"http","url":"https://wallets.example"},"key":{"hash":{"name":"id","type":"S"},"range":{"name":"n","type":"N"}}}}"#;

    fn coordinator(pairs: &[(&str, &str)]) -> Result<CoordinatorSettings, ConfigError> {
        CoordinatorSettings::from_lookup(lookup(pairs))
    }

    #[test]
    fn a_coordinator_reads_tables_services_and_defaults() {
        let c = coordinator(&[
            (var::TRANSACTIONS_TABLE, "tx"),
            (var::SERVICES, SERVICES),
            (var::FUNCTION_NAME, "stack-Coordinator-1"),
        ])
        .expect("valid");
        assert_eq!(c.protocol.transactions_table, "tx");
        assert_eq!(
            c.coordinator.services["accounts"].target,
            Target::Lambda {
                function: "arn:aws:lambda:us-east-1:123456789012:function:accounts".into()
            }
        );
        assert_eq!(
            c.coordinator.services["wallets"].target,
            Target::Http {
                url: "https://wallets.example".into()
            }
        );
        assert_eq!(c.coordinator.id, "stack-Coordinator-1");
        assert_eq!(c.coordinator.limits, Limits::default());
        assert_eq!(c.calls.timeout, DEFAULT_CALL_TIMEOUT);
        assert_eq!(c.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        assert!(c.calls.signing_secret.is_none(), "unsigned unless set");
        assert!(!c.shared.is_local());
    }

    #[test]
    fn missing_variables_are_named_with_what_to_set() {
        let e = coordinator(&[]).unwrap_err();
        assert!(matches!(
            e,
            ConfigError::Missing {
                var: "TWOPC_TRANSACTIONS_TABLE",
                ..
            }
        ));
        assert!(e.to_string().contains("TWOPC_TRANSACTIONS_TABLE"), "{e}");

        let e = coordinator(&[(var::TRANSACTIONS_TABLE, "tx")]).unwrap_err();
        assert!(e.to_string().contains("TWOPC_SERVICES"), "{e}");

        let e = ParticipantSettings::from_lookup(lookup(&[
            (var::TRANSACTIONS_TABLE, "tx"),
            (var::PARTICIPANT_TABLE, " "),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("TWOPC_PARTICIPANT_TABLE"), "{e}");
    }

    #[test]
    fn one_table_under_two_services_is_refused_however_it_is_spelled() {
        let key = r#""key":{"hash":{"name":"id","type":"S"}}"#;
        for (a, b) in [
            (
                r#"{"transport":"direct","table":"accounts"}"#,
                r#"{"transport":"direct","table":"arn:aws:dynamodb:us-east-1:123456789012:table/accounts"}"#,
            ),
            (
                r#"{"transport":"lambda","function":"accounts"}"#,
                r#"{"transport":"lambda","function":"arn:aws:lambda:us-east-1:123456789012:function:accounts:live"}"#,
            ),
        ] {
            let services =
                format!(r#"{{"one":{{"target":{a},{key}}},"two":{{"target":{b},{key}}}}}"#);
            let e = coordinator(&[(var::TRANSACTIONS_TABLE, "tx"), (var::SERVICES, &services)])
                .unwrap_err();
            assert!(e.to_string().contains("reach one participant"), "{e}");
        }
    }

    #[test]
    fn a_service_is_a_table_or_a_custom_participant() {
        let services = r#"{"accounts":{"target":{"transport":"direct","table":"accounts"},"key":{"hash":{"name":"id","type":"S"}}},
            "payments":{"kind":"custom","target":{"transport":"http","url":"http://127.0.0.1:3001"}}}"#;
        let c = coordinator(&[(var::TRANSACTIONS_TABLE, "tx"), (var::SERVICES, services)])
            .expect("valid");
        assert_eq!(c.coordinator.services["accounts"].kind, ServiceKind::Table);
        assert_eq!(c.coordinator.services["payments"].kind, ServiceKind::Custom);
        assert_eq!(c.coordinator.services["payments"].key, None);
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
            let e = coordinator(&[(var::TRANSACTIONS_TABLE, "tx"), (var::SERVICES, bad)])
                .expect_err(bad);
            assert_invalid(&e, "TWOPC_SERVICES");
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[test]
    fn an_empty_signing_secret_is_unset_as_a_template_leaves_it() {
        let env = [
            (var::TRANSACTIONS_TABLE, "tx"),
            (var::SERVICES, SERVICES),
            (var::HTTP_SIGNING_SECRET, ""),
            (var::DYNAMODB_ENDPOINT, ""),
            (var::LAMBDA_ENDPOINT, ""),
        ];
        let c = coordinator(&env).expect("an empty secret and empty endpoints are accepted");
        assert!(c.calls.signing_secret.is_none(), "unsigned");
        assert!(!c.shared.is_local(), "empty endpoints are AWS's own");
        let s = SweeperSettings::from_lookup(lookup(&env)).expect("the sweeper's too");
        assert!(s.calls.signing_secret.is_none(), "unsigned");
        assert!(!s.shared.is_local(), "empty endpoints are AWS's own");
    }

    #[test]
    fn the_http_signing_secret_is_read_as_given_and_too_short_is_refused() {
        let secret = " 0123456789abcdef0123456789abcdef";
        let s = SweeperSettings::from_lookup(lookup(&[
            (var::TRANSACTIONS_TABLE, "tx"),
            (var::HTTP_SIGNING_SECRET, secret),
        ]))
        .expect("valid");
        assert_eq!(
            s.calls.signing_secret.as_ref().map(Secret::expose),
            Some(secret.as_bytes())
        );
        assert!(
            !format!("{s:?}").contains("0123456789abcdef"),
            "never shown"
        );
        let e = coordinator(&[
            (var::TRANSACTIONS_TABLE, "tx"),
            (var::SERVICES, SERVICES),
            (var::HTTP_SIGNING_SECRET, "short"),
        ])
        .expect_err("too short");
        assert_invalid(&e, "TWOPC_HTTP_SIGNING_SECRET");
        assert!(
            !e.to_string().contains("short"),
            "the secret is not echoed: {e}"
        );
    }

    #[test]
    fn a_sweeper_needs_only_the_transactions_table() {
        let s = SweeperSettings::from_lookup(lookup(&[(var::TRANSACTIONS_TABLE, "tx")]))
            .expect("valid");
        assert!(s.lock_tables.is_empty());
        assert!(s.coordinator.services.is_empty());
        assert_eq!(
            s.sweep.max_transactions,
            SweepConfig::default().max_transactions
        );
        let e = SweeperSettings::from_lookup(lookup(&[
            (var::TRANSACTIONS_TABLE, "tx"),
            (var::LOCK_TABLES, "accounts"),
        ]))
        .unwrap_err();
        assert_invalid(&e, "TWOPC_LOCK_TABLES");
    }

    #[test]
    fn a_participant_needs_no_services() {
        let p = ParticipantSettings::from_lookup(lookup(&[
            (var::TRANSACTIONS_TABLE, "tx"),
            (var::PARTICIPANT_TABLE, "accounts"),
        ]))
        .expect("valid");
        assert_eq!(p.table, "accounts");
        assert_eq!(p.protocol.transactions_table, "tx");
    }

    #[test]
    fn malformed_values_say_what_is_expected() {
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut all = vec![(var::TRANSACTIONS_TABLE, "tx")];
            all.extend_from_slice(extra);
            coordinator(&all).unwrap_err()
        };
        let e = with(&[(var::SERVICES, "{\"accounts\": {\"target\": {}}}")]);
        assert_invalid(&e, "TWOPC_SERVICES");
        assert!(e.to_string().contains("e.g."), "{e}");
        let e = with(&[(var::SERVICES, "{}")]);
        assert!(e.to_string().contains("names no service"), "{e}");
        let e = with(&[(var::SERVICES, SERVICES), (var::CALL_TIMEOUT_MS, "soon")]);
        assert_invalid(&e, "TWOPC_CALL_TIMEOUT_MS");
        let e = with(&[
            (var::SERVICES, SERVICES),
            (var::DEFAULT_TIMEOUT_MS, "120000"),
        ]);
        assert_invalid(&e, "TWOPC_DEFAULT_TIMEOUT_MS");
        for window in ["0", "soon"] {
            let e = with(&[(var::SERVICES, SERVICES), (var::HEAT_WINDOW_MS, window)]);
            assert_invalid(&e, "TWOPC_HEAT_WINDOW_MS");
        }
    }

    #[test]
    fn local_endpoints_and_limits_are_read() {
        let s = SweeperSettings::from_lookup(lookup(&[
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
            (var::HEAT_WINDOW_MS, "2500"),
        ]))
        .expect("valid");
        assert_eq!(s.coordinator.heat_window_ms, 2_500);
        let participant = &s.protocol.participant;
        assert_eq!(participant.fence_capacity, 8);
        assert_eq!(participant.max_reservations, 5);
        assert_eq!(
            participant.fence_window_ms,
            ParticipantConfig::default().fence_window_ms,
            "the largest timeout (60 s) plus the margin (10 s)"
        );
        assert_eq!(
            participant.clock_margin_ms, DEFAULT_FENCE_MARGIN_MS,
            "and a prepare may begin the margin ahead of the participant's clock"
        );
        for (name, what) in [
            (var::FENCE_CAPACITY, "a fence of no entries"),
            (var::MAX_RESERVATIONS, "no room for any reservation"),
        ] {
            let e = ParticipantSettings::from_lookup(lookup(&[
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::PARTICIPANT_TABLE, "accounts"),
                (name, "0"),
            ]))
            .expect_err(what);
            assert!(e.to_string().contains(name), "{e}");
        }
        let tables: Vec<&str> = s.lock_tables.iter().map(|t| t.table.as_str()).collect();
        assert_eq!(tables, ["accounts", "wallets"]);
        assert_eq!(s.lock_tables[0].key, KeySchema::string_hash("id"));
        assert_eq!(s.sweep.concurrency, 1, "at least one at a time");
        assert!(s.shared.is_local());
        assert_eq!(s.coordinator.limits.max_participants, 4);
        assert_eq!(s.calls.timeout, Duration::from_millis(250));
        assert_eq!(s.coordinator.id, "me");
    }

    #[test]
    fn a_participant_reads_the_largest_timeout_into_its_fence_window() {
        let p = ParticipantSettings::from_lookup(lookup(&[
            (var::TRANSACTIONS_TABLE, "tx"),
            (var::PARTICIPANT_TABLE, "accounts"),
            (var::MAX_TIMEOUT_MS, "20000"),
            (var::FENCE_MARGIN_MS, "5000"),
        ]))
        .expect("valid");
        assert_eq!(p.protocol.participant.fence_window_ms, 25_000);
        assert_eq!(p.protocol.participant.clock_margin_ms, 5_000);
    }

    #[test]
    fn each_resource_is_named_by_its_variable() {
        let s = SweeperSettings::from_lookup(lookup(&[
            (var::TRANSACTIONS_TABLE, "tx"),
            (
                var::SERVICES,
                r#"{"accounts":{"target":{"transport":"direct","table":"t-accounts"},"key":{"hash":{"name":"id","type":"S"}}}}"#,
            ),
            (var::LOCK_TABLES, r#"{"t-accounts": {"hash": {"name": "id", "type": "S"}}}"#),
        ]))
        .expect("valid");
        assert_eq!(
            s.resources(),
            [
                ("tx".to_owned(), var::TRANSACTIONS_TABLE),
                ("t-accounts".to_owned(), crate::record::DIRECT),
                ("t-accounts".to_owned(), var::LOCK_TABLES),
            ]
        );
    }
}
