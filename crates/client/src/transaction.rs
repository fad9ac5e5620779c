//! A transaction to submit: [`Transaction`] (participants, timeout) and [`Op`] (the operation
//! language, numbers as exact [`Decimal`]s), serialised to the body of `POST /transactions`.

use serde_json::{Map, Value, json};
use twopc_core::decimal::Decimal;
use twopc_core::item::Key;
use twopc_core::op::{Comparator, Condition, Operation};

/// A transaction: what each participant does, all or nothing.
///
/// ```
/// use twopc_client::{Decimal, Op, Transaction, key};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let amount = Decimal::parse("25.50")?;
/// let tx = Transaction::new()
///     .timeout_ms(5000)
///     .table("accounts", key("id", "alice"), Op::debit("balance", &amount))
///     .table("accounts", key("id", "bob"), Op::credit("balance", &amount))
///     .custom("payments", serde_json::json!({"card": "4242", "amount": amount.to_json()}));
/// assert_eq!(
///     tx.to_json()["participants"][0]["op"].to_string(),
///     r#"{"add":{"balance":-25.50},"require":{"balance":{"gte":25.50}}}"#
/// );
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transaction {
    participants: Vec<Value>,
    timeout_ms: Option<u64>,
    wait_applied: bool,
}

impl Transaction {
    /// An empty transaction (add at least one participant).
    pub fn new() -> Self {
        Transaction::default()
    }

    /// Prepare must be decided within this many milliseconds (the API's default otherwise).
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Be answered once every participant applied the outcome (`"wait": "applied"`), not as
    /// soon as it is decided: read-your-writes for a caller that reads the tables right after.
    pub fn wait_applied(mut self) -> Self {
        self.wait_applied = true;
        self
    }

    /// An item of a table's service: its key, and what to do to it.
    pub fn table(mut self, participant: &str, key: Key, op: impl Into<Operation>) -> Self {
        self.participants.push(json!({
            "participant": participant,
            "key": Value::Object(key.into_iter().collect()),
            "op": op.into().to_json(),
        }));
        self
    }

    /// A service with its own logic (a custom participant), given its work as opaque JSON.
    pub fn custom(mut self, participant: &str, payload: Value) -> Self {
        self.participants
            .push(json!({"participant": participant, "payload": payload}));
        self
    }

    /// The body of `POST /transactions`.
    pub fn to_json(&self) -> Value {
        let mut body = Map::new();
        body.insert(
            "participants".into(),
            Value::Array(self.participants.clone()),
        );
        if let Some(ms) = self.timeout_ms {
            body.insert("timeoutMs".into(), Value::from(ms));
        }
        if self.wait_applied {
            body.insert("wait".into(), Value::from("applied"));
        }
        Value::Object(body)
    }
}

/// A one-attribute key, `{name: value}` (a string or a number; for a number, pass
/// [`Decimal::to_json`]). A table with a sort key takes a [`Key`] of two entries.
pub fn key(name: &str, value: impl Into<Value>) -> Key {
    [(name.to_owned(), value.into())].into()
}

/// An operation on one item, built step by step; becomes the core's [`Operation`] (which the
/// coordinator validates: a refusal is an [`ErrorCode`](crate::ErrorCode)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Op(Operation);

impl Op {
    /// Nothing yet.
    pub fn new() -> Self {
        Op::default()
    }

    /// `add`: change a number by a signed amount (an absent attribute counts as 0).
    pub fn add(name: &str, amount: Decimal) -> Self {
        Op::new().and_add(name, amount)
    }

    /// Takes `amount` from a number that must stay at or above zero: `add -amount`, `require
    /// gte amount`. Commutes with others like it: the item is reserved, not locked.
    pub fn debit(name: &str, amount: &Decimal) -> Self {
        Op::add(name, negate(amount)).require(name, Comparator::Gte, amount.to_json())
    }

    /// Adds `amount` to a number: `add amount`.
    pub fn credit(name: &str, amount: &Decimal) -> Self {
        Op::add(name, amount.clone())
    }

    /// `set`: an attribute to a value.
    pub fn set(name: &str, value: impl Into<Value>) -> Self {
        Op::new().and_set(name, value)
    }

    /// `put`: a whole new item (besides its key); the item must not exist yet.
    pub fn put(item: impl IntoIterator<Item = (String, Value)>) -> Self {
        Op(Operation {
            put: Some(item.into_iter().collect()),
            ..Operation::default()
        })
    }

    /// `delete`: the item.
    pub fn delete() -> Self {
        Op(Operation {
            delete: true,
            ..Operation::default()
        })
    }

    /// Also `add` to another number.
    pub fn and_add(mut self, name: &str, amount: Decimal) -> Self {
        self.0.add.insert(name.to_owned(), amount);
        self
    }

    /// Also `set` another attribute.
    pub fn and_set(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.0.set.insert(name.to_owned(), value.into());
        self
    }

    /// Also `remove` an attribute.
    pub fn remove(mut self, name: &str) -> Self {
        self.0.remove.insert(name.to_owned());
        self
    }

    /// `require`: the attribute compares so to `value` (numbers numerically: pass
    /// [`Decimal::to_json`]), or the participant votes no (`condition`).
    pub fn require(mut self, name: &str, cmp: Comparator, value: impl Into<Value>) -> Self {
        self.0
            .require
            .insert(name.to_owned(), Condition::Compare(cmp, value.into()));
        self
    }

    /// `require`: the attribute is present.
    pub fn require_exists(mut self, name: &str) -> Self {
        self.0.require.insert(name.to_owned(), Condition::Exists);
        self
    }

    /// `require`: the attribute is absent.
    pub fn require_not_exists(mut self, name: &str) -> Self {
        self.0.require.insert(name.to_owned(), Condition::NotExists);
        self
    }
}

impl From<Op> for Operation {
    fn from(op: Op) -> Operation {
        op.0
    }
}

/// `-amount`, keeping its spelling (`25.50` → `-25.50`; the core's `neg` would canonicalise).
fn negate(amount: &Decimal) -> Decimal {
    let text = amount.as_str();
    let negated = match text.strip_prefix('-') {
        Some(positive) => positive.to_owned(),
        None => format!("-{text}"),
    };
    Decimal::parse(&negated).unwrap_or_else(|_| amount.neg())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        Decimal::parse(text).expect("a decimal")
    }

    #[test]
    fn a_transfer_is_the_body_the_readme_shows_with_every_digit() {
        let big = d("12345678901234567890123456789012345.678");
        let tx = Transaction::new()
            .timeout_ms(5000)
            .table("accounts", key("id", "alice"), Op::debit("balance", &big))
            .table("wallets", key("id", "bob"), Op::credit("balance", &big));
        assert_eq!(
            tx.to_json().to_string(),
            concat!(
                r#"{"participants":["#,
                r#"{"key":{"id":"alice"},"op":{"add":{"balance":-12345678901234567890123456789012345.678},"require":{"balance":{"gte":12345678901234567890123456789012345.678}}},"participant":"accounts"},"#,
                r#"{"key":{"id":"bob"},"op":{"add":{"balance":12345678901234567890123456789012345.678}},"participant":"wallets"}],"#,
                r#""timeoutMs":5000}"#
            )
        );
    }

    #[test]
    fn every_operation_reads_back_as_the_core_parses_it() {
        let ops = [
            Op::set("name", "Alice")
                .and_add("visits", d("1"))
                .remove("nickname")
                .require_exists("name"),
            Op::put([("owner".to_owned(), json!("Carol"))]).require_not_exists("id"),
            Op::delete().require("balance", Comparator::Eq, d("0").to_json()),
            Op::debit("stock", &d("-1")),
        ];
        for op in ops {
            let json = Operation::from(op.clone()).to_json();
            let back = Operation::from_json("op", &json).expect("the core accepts it");
            assert_eq!(back, Operation::from(op));
        }
    }

    #[test]
    fn negation_keeps_the_spelling() {
        assert_eq!(negate(&d("25.50")).as_str(), "-25.50");
        assert_eq!(negate(&d("-1e3")).as_str(), "1e3");
    }

    #[test]
    fn a_custom_participant_gets_its_payload_and_no_key_or_op() {
        let payload: Value = serde_json::from_str(r#"{"card": "4242", "amount": 9.99}"#)
            .expect("json with an exact number");
        let tx = Transaction::new().custom("payments", payload);
        assert_eq!(
            tx.to_json().to_string(),
            r#"{"participants":[{"participant":"payments","payload":{"amount":9.99,"card":"4242"}}]}"#
        );
    }
}
