//! The demo configuration of the local stack: two participant services on their own tables,
//! `accounts` (keyed by `id`) and `inventory` (keyed by `sku`), with seed data, and `payments`,
//! a custom participant (crates/payments, on the participant SDK) served by the stack itself
//! over signed `http`, its state in a table of its own.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use serde_json::{Value, json};
use twopc_core::ports::PortError;
use twopc_core::record::Target;
use twopc_core::service::{KeySchema, ServiceConfig};
use twopc_dynamo::tables::{TableKind, TableSpec};
use twopc_function::var;

/// The demo's services and their tables, named with `prefix`.
pub struct Demo {
    /// Table-name prefix (`twopc-` by default).
    pub prefix: String,
    /// Where the stack serves (`http://127.0.0.1:3000`): the custom participant is reached there.
    pub url: String,
    /// Custom participants of the user's own, served elsewhere over `http`: (name, base URL)
    /// (`twopc serve --http-participant NAME=URL`).
    pub custom: Vec<(String, String)>,
}

/// The services the demo names itself: an `--http-participant` may not take these names.
pub const DEMO_SERVICES: [&str; 4] = ["accounts", "wallets", "inventory", PAYMENTS];

/// The custom participant of the demo.
pub const PAYMENTS: &str = "payments";

/// Where the stack serves it, under its URL.
pub const PAYMENTS_PATH: &str = "/services/payments";

/// The seeded items: (service, item).
pub fn seed_items() -> Vec<(&'static str, Value)> {
    // Parsed from text, never from float literals: prices stay exact decimals.
    const SEED: &str = r#"[
        ["accounts", {"id": "alice", "owner": "Alice", "balance": 100}],
        ["accounts", {"id": "bob", "owner": "Bob", "balance": 50}],
        ["accounts", {"id": "carol", "owner": "Carol", "balance": 0}],
        ["inventory", {"sku": "widget", "stock": 10, "price": 2.50}],
        ["inventory", {"sku": "gadget", "stock": 3, "price": 19.99}]
    ]"#;
    let rows: Vec<(String, Value)> = serde_json::from_str(SEED).unwrap_or_default();
    rows.into_iter()
        .map(|(service, item)| {
            (
                if service == "accounts" {
                    "accounts"
                } else {
                    "inventory"
                },
                item,
            )
        })
        .collect()
}

impl Demo {
    /// The transactions table.
    pub fn transactions_table(&self) -> String {
        format!("{}transactions", self.prefix)
    }

    /// The WebSocket subscriptions table.
    pub fn connections_table(&self) -> String {
        format!("{}connections", self.prefix)
    }

    /// A service's table.
    pub fn table(&self, service: &str) -> String {
        format!("{}{service}", self.prefix)
    }

    /// The services: the tables reached through the `direct` transport (`accounts`, `wallets`,
    /// `inventory`), `payments` over `http` at [`PAYMENTS_PATH`].
    pub fn services(&self) -> BTreeMap<String, ServiceConfig> {
        let mut services: BTreeMap<String, ServiceConfig> =
            // `wallets` starts empty: it is the deployed stack's second table service
            // (template.yaml), which `twopc seed` and docs/deploy.md's checks write to.
            [("accounts", "id"), ("wallets", "id"), ("inventory", "sku")]
                .into_iter()
                .map(|(name, key)| {
                    (
                        name.to_owned(),
                        ServiceConfig::table(
                            Target::Direct {
                                table: self.table(name),
                            },
                            KeySchema::string_hash(key),
                        ),
                    )
                })
                .collect();
        services.insert(
            PAYMENTS.to_owned(),
            ServiceConfig::custom(Target::Http {
                url: format!("{}{PAYMENTS_PATH}", self.url),
            }),
        );
        for (name, url) in &self.custom {
            let target = Target::Http { url: url.clone() };
            services.insert(name.clone(), ServiceConfig::custom(target));
        }
        services
    }

    /// The demo as the variables a deployed coordinator reads (`twopc_runtime::config`), so the
    /// local stack is configured, and checked, as the coordinator function is. `secret` signs
    /// the requests to `payments`.
    pub fn variables(&self, endpoint: &str, secret: &str) -> BTreeMap<&'static str, String> {
        let lock_tables: serde_json::Map<String, Value> = self
            .services()
            .into_iter()
            .filter_map(|(name, s)| Some((self.table(&name), json!(s.key?))))
            .collect();
        [
            (var::TRANSACTIONS_TABLE, self.transactions_table()),
            (var::CONNECTIONS_TABLE, self.connections_table()),
            (var::SERVICES, json!(self.services()).to_string()),
            (var::LOCK_TABLES, Value::Object(lock_tables).to_string()),
            (var::DYNAMODB_ENDPOINT, endpoint.to_owned()),
            (var::COORDINATOR_ID, "twopc-serve".to_owned()),
            (var::HTTP_SIGNING_SECRET, secret.to_owned()),
        ]
        .into()
    }

    /// Every table to create.
    pub fn tables(&self) -> Vec<TableSpec> {
        let mut specs = vec![
            TableSpec {
                name: self.transactions_table(),
                kind: TableKind::Transactions,
            },
            TableSpec {
                name: self.connections_table(),
                kind: TableKind::Connections,
            },
        ];
        for (_, service) in self.services() {
            if let (Target::Direct { table }, Some(key)) = (service.target, service.key) {
                specs.push(TableSpec {
                    name: table,
                    kind: TableKind::Participant(key),
                });
            }
        }
        specs.push(TableSpec {
            name: self.table(PAYMENTS),
            kind: TableKind::ParticipantState,
        });
        specs
    }

    /// Writes the seed items that are missing (a restart never overwrites data). Returns how
    /// many were written.
    pub async fn seed(&self, client: &Client) -> Result<usize, PortError> {
        let mut written = 0;
        for (service, item) in seed_items() {
            let Value::Object(map) = &item else { continue };
            let key_name = if service == "accounts" { "id" } else { "sku" };
            let r = client
                .put_item()
                .table_name(self.table(service))
                .set_item(Some(twopc_dynamo::codec::to_item(map)))
                .condition_expression("attribute_not_exists(#k)")
                .expression_attribute_names("#k", key_name)
                .send()
                .await;
            match r {
                Ok(_) => written += 1,
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_conditional_check_failed_exception()) => {}
                Err(e) => {
                    return Err(twopc_dynamo::error::classify(
                        format!("seeding {service}"),
                        e,
                    ));
                }
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use twopc_runtime::config::{CoordinatorSettings, Settings, SweeperSettings};

    #[test]
    fn the_demo_configures_the_stack_as_a_coordinator_is_configured() {
        let demo = Demo {
            prefix: "p-".into(),
            url: "http://127.0.0.1:3000".into(),
            custom: vec![("loyalty".into(), "http://127.0.0.1:3002".into())],
        };
        let vars = demo.variables("http://127.0.0.1:1", "a secret of at least 16 bytes");
        let lookup = |name: &str| vars.get(name).cloned();
        let settings = CoordinatorSettings::from_lookup(lookup)
            .expect("the demo's variables are a valid coordinator configuration");
        let sweeper =
            SweeperSettings::from_lookup(lookup).expect("and a valid sweeper configuration");
        let config = &settings.coordinator;
        assert_eq!(config.services, demo.services());
        assert_eq!(sweeper.lock_tables.len(), 3);
        assert_eq!(settings.protocol.transactions_table, "p-transactions");
        assert_eq!(
            config.services[PAYMENTS].target,
            Target::Http {
                url: "http://127.0.0.1:3000/services/payments".into()
            },
            "payments is served by the stack itself"
        );
        assert!(
            settings.calls.signing_secret.is_some(),
            "and its requests are signed"
        );
        assert_eq!(
            config.services["loyalty"],
            ServiceConfig::custom(Target::Http {
                url: "http://127.0.0.1:3002".into()
            }),
            "a participant of the user's own, over http"
        );
    }

    #[test]
    fn seed_prices_keep_their_decimal_text() {
        let items = seed_items();
        assert_eq!(items.len(), 5);
        let widget = items
            .iter()
            .find(|(_, i)| i["sku"] == "widget")
            .map(|(_, i)| i["price"].to_string());
        assert_eq!(widget.as_deref(), Some("2.50"));
    }
}
