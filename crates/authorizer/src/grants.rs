//! What a principal may subscribe to: the token's `twopc` claim.
//!
//! ```json
//! {"sub": "alice", "twopc": {"topics": ["accounts/alice", "inventory/*"]}}
//! {"sub": "ops", "twopc": {"admin": true}}
//! ```
//!
//! - `"<service>/<key>"` grants the item of `<service>` whose key has one attribute with that
//!   value (a string, or a number written as its JSON text): `accounts/alice` is
//!   `{"participant": "accounts", "key": {"id": "alice"}}`.
//! - `"<service>/*"` grants every item of `<service>`.
//! - `"admin": true` grants everything: `{"all": true}` and transaction outcomes, which name
//!   every participant and key of a transaction and so are for admins only.
//!
//! No claim grants nothing: such a principal may connect but every subscription is refused.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::AccessRefusal;

/// The claim's name in the token.
pub const CLAIM: &str = "twopc";
/// Most topic grants one token may carry (they travel in the authorizer's context, ≤ 8 KB).
pub const MAX_TOPICS: usize = 100;
/// The grant of every item of a service: `<service>/*`.
pub const ANY_KEY: &str = "*";

/// What a token grants.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Everything, `all` and transaction outcomes included.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin: bool,
    /// `<service>/<key>` or `<service>/*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<String>,
}

/// One topic a subscription asks for.
#[derive(Clone, Copy, Debug)]
pub enum Wanted<'a> {
    /// Every change (`{"all": true}`).
    All,
    /// One item.
    Entity {
        /// The service.
        participant: &'a str,
        /// The item's key.
        key: &'a Map<String, Value>,
    },
    /// One transaction's outcome.
    Transaction(&'a str),
}

impl std::fmt::Display for Wanted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wanted::All => f.write_str("all (needs \"admin\": true)"),
            Wanted::Entity { participant, key } => write!(
                f,
                "{participant} {} (needs \"{participant}/<key>\" or \"{participant}/*\")",
                Value::Object((*key).clone())
            ),
            Wanted::Transaction(id) => {
                write!(f, "transaction {id} (outcomes need \"admin\": true)")
            }
        }
    }
}

impl Grants {
    /// Everything.
    pub fn admin() -> Self {
        Grants {
            admin: true,
            topics: vec![],
        }
    }

    /// The grants of a token's claims (`None`: no `twopc` claim, which grants nothing), checked.
    pub fn from_claim(claim: Option<&Value>) -> Result<Self, AccessRefusal> {
        let Some(claim) = claim else {
            return Ok(Grants::default());
        };
        let grants: Grants = serde_json::from_value(claim.clone()).map_err(|e| {
            AccessRefusal::Claims(format!(
                "\"{CLAIM}\": {e}; expected {{\"topics\": [\"<service>/<key>\", ...], \"admin\": true|false}}"
            ))
        })?;
        if grants.topics.len() > MAX_TOPICS {
            return Err(AccessRefusal::Claims(format!(
                "\"{CLAIM}\".topics: {} grants; at most {MAX_TOPICS}",
                grants.topics.len()
            )));
        }
        for t in &grants.topics {
            if split(t).is_none() {
                return Err(AccessRefusal::Claims(format!(
                    "\"{CLAIM}\".topics: {t:?} is not \"<service>/<key>\" or \"<service>/*\""
                )));
            }
        }
        Ok(grants)
    }

    /// Whether these grants allow `wanted`.
    pub fn allows(&self, wanted: Wanted<'_>) -> bool {
        if self.admin {
            return true;
        }
        match wanted {
            Wanted::All | Wanted::Transaction(_) => false,
            Wanted::Entity { participant, key } => {
                self.topics
                    .iter()
                    .filter_map(|t| split(t))
                    .any(|(service, granted)| {
                        service == participant
                            && (granted == ANY_KEY || single_value(key) == Some(granted))
                    })
            }
        }
    }

    /// Every wanted topic, or the first one not granted.
    pub fn check_all<'a>(
        &self,
        wanted: impl IntoIterator<Item = Wanted<'a>>,
    ) -> Result<(), AccessRefusal> {
        for w in wanted {
            if !self.allows(w) {
                return Err(AccessRefusal::TopicForbidden(w.to_string()));
            }
        }
        Ok(())
    }
}

/// `<service>/<key>` → (service, key), both non-empty.
fn split(grant: &str) -> Option<(&str, &str)> {
    let (service, key) = grant.split_once('/')?;
    (!service.is_empty() && !key.is_empty()).then_some((service, key))
}

/// The value of a one-attribute key as text: a string, or a number's JSON text.
fn single_value(key: &Map<String, Value>) -> Option<&str> {
    let mut values = key.values();
    let (Some(v), None) = (values.next(), values.next()) else {
        return None;
    };
    match v {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.as_str()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("object")
    }

    fn grants(claim: Value) -> Grants {
        Grants::from_claim(Some(&claim)).expect("valid claim")
    }

    #[test]
    fn a_key_grant_allows_that_item_only() {
        let g = grants(json!({"topics": ["accounts/alice"]}));
        let alice = key(json!({"id": "alice"}));
        let bob = key(json!({"id": "bob"}));
        assert!(g.allows(Wanted::Entity {
            participant: "accounts",
            key: &alice
        }));
        assert!(!g.allows(Wanted::Entity {
            participant: "accounts",
            key: &bob
        }));
        assert!(!g.allows(Wanted::Entity {
            participant: "wallets",
            key: &alice
        }));
    }

    #[test]
    fn a_star_grant_allows_every_item_of_its_service_only() {
        let g = grants(json!({"topics": ["inventory/*"]}));
        let widget = key(json!({"sku": "widget"}));
        assert!(g.allows(Wanted::Entity {
            participant: "inventory",
            key: &widget
        }));
        assert!(!g.allows(Wanted::Entity {
            participant: "accounts",
            key: &widget
        }));
    }

    #[test]
    fn numeric_keys_match_their_text_and_composite_keys_need_a_star() {
        let g = grants(json!({"topics": ["orders/42"]}));
        let n = key(serde_json::from_str(r#"{"id": 42}"#).expect("json"));
        let composite = key(json!({"id": "42", "line": "1"}));
        assert!(g.allows(Wanted::Entity {
            participant: "orders",
            key: &n
        }));
        assert!(!g.allows(Wanted::Entity {
            participant: "orders",
            key: &composite
        }));
    }

    #[test]
    fn all_and_transaction_outcomes_need_admin() {
        let user = grants(json!({"topics": ["accounts/*"]}));
        assert!(!user.allows(Wanted::All));
        assert!(!user.allows(Wanted::Transaction("t")));
        let admin = grants(json!({"admin": true}));
        assert!(admin.allows(Wanted::All));
        assert!(admin.allows(Wanted::Transaction("t")));
    }

    #[test]
    fn no_claim_grants_nothing() {
        let g = Grants::from_claim(None).expect("absent is fine");
        let alice = key(json!({"id": "alice"}));
        assert!(!g.allows(Wanted::Entity {
            participant: "accounts",
            key: &alice
        }));
        assert!(!g.allows(Wanted::All));
    }

    #[test]
    fn malformed_claims_are_refused_with_what_to_write() {
        for claim in [
            json!({"topics": ["accounts"]}),
            json!({"topics": ["/alice"]}),
            json!({"topics": ["accounts/"]}),
            json!({"topics": "accounts/alice"}),
            json!({"admin": "yes"}),
            json!({"topic": ["accounts/alice"]}),
            json!({"topics": vec!["a/b"; MAX_TOPICS + 1]}),
        ] {
            let e = Grants::from_claim(Some(&claim)).expect_err("malformed");
            assert_eq!(
                e.code(),
                crate::refusal::codes::TOKEN_CLAIMS,
                "{claim}: {e}"
            );
        }
    }

    #[test]
    fn the_first_topic_not_granted_is_named() {
        let g = grants(json!({"topics": ["accounts/alice"]}));
        let alice = key(json!({"id": "alice"}));
        let bob = key(json!({"id": "bob"}));
        let e = g
            .check_all([
                Wanted::Entity {
                    participant: "accounts",
                    key: &alice,
                },
                Wanted::Entity {
                    participant: "accounts",
                    key: &bob,
                },
            ])
            .expect_err("bob is not granted");
        assert_eq!(e.code(), "topic_forbidden");
        assert!(e.to_string().contains(r#"{"id":"bob"}"#), "{e}");
    }

    #[test]
    fn grants_round_trip_as_stored_with_a_connection() {
        let g = grants(json!({"topics": ["accounts/alice"], "admin": false}));
        let text = serde_json::to_string(&g).expect("serialize");
        assert_eq!(text, r#"{"topics":["accounts/alice"]}"#);
        assert_eq!(serde_json::from_str::<Grants>(&text).expect("parse"), g);
    }
}
