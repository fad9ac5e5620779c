//! The generic participant's operation language.
//!
//! ```json
//! {"set": {"name": "Alice"}, "add": {"balance": -100}, "remove": ["nickname"],
//!  "require": {"balance": {"gte": 100}, "frozen": "notExists"}}
//! {"put": {"id": "carol", "balance": 0}}
//! {"delete": true, "require": {"balance": {"eq": 0}}}
//! ```
//!
//! Parsing is strict and total: anything that is not understood is refused with an
//! [`OpError`] naming what to fix, before anything is written. Attribute names are limited to
//! `[A-Za-z_][A-Za-z0-9_-]*` and always reach DynamoDB through placeholders; values keep their
//! exact decimal text.

mod check;

pub use check::OpError;
pub(crate) use check::{check_attribute_name, check_value, decimal_from_json};
use check::{invalid, kind, object, parse_condition};

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::decimal::{Decimal, canonical_json};
use crate::layout::ITEM_PROTOCOL_ATTRIBUTES;

/// Most attributes one operation may name in all (keeps expressions far below DynamoDB's 4 KB).
pub(crate) const MAX_ATTRIBUTES: usize = 64;
/// Deepest nesting of lists and maps in a value.
pub(crate) const MAX_DEPTH: usize = 32;
const MAX_NAME_LEN: usize = 255;

/// A comparison in a `require` clause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Comparator {
    /// `=`
    Eq,
    /// `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Lte,
    /// `>`
    Gt,
    /// `>=`
    Gte,
}

impl Comparator {
    const ALL: [(Comparator, &'static str, &'static str); 6] = [
        (Comparator::Eq, "eq", "="),
        (Comparator::Ne, "ne", "<>"),
        (Comparator::Lt, "lt", "<"),
        (Comparator::Lte, "lte", "<="),
        (Comparator::Gt, "gt", ">"),
        (Comparator::Gte, "gte", ">="),
    ];

    /// The JSON name (`gte`).
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(c, _, _)| *c == self)
            .map_or("eq", |(_, n, _)| n)
    }

    /// The DynamoDB condition operator (`>=`).
    pub fn symbol(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(c, _, _)| *c == self)
            .map_or("=", |(_, _, s)| s)
    }

    fn parse(name: &str) -> Option<Comparator> {
        Self::ALL
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(c, _, _)| *c)
    }
}

/// How a participant holds an item for a transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A lock: the item is the transaction's alone until it ends.
    #[default]
    Exclusive,
    /// A reservation: the item's numbers are escrowed, and other reservations may stand beside it.
    Reserved,
}

/// One attribute of a commuting operation: its change, and the bounds its `require` puts on the
/// attribute while the reservation stands (`floor`: never below; `ceiling`: never above).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Escrowed {
    /// The change.
    pub delta: Decimal,
    /// The `gte`/`gt` bound, checked against the lowest value the attribute could reach.
    pub lower: Option<Bound>,
    /// The `lte`/`lt` bound, checked against the highest.
    pub upper: Option<Bound>,
    /// `gte v` (`gt v`) keeps the value at (above) `v + min(0, delta)`, in canonical spelling.
    pub floor: Option<Bound>,
    /// `lte v` (`lt v`) keeps it at (below) `v + max(0, delta)`.
    pub ceiling: Option<Bound>,
}

/// A bound on a number: a value, and whether the value itself breaks it (`gt`, `lt`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The value.
    pub value: Decimal,
    /// `gt`/`lt`: the value itself is out of bounds.
    pub strict: bool,
}

impl Bound {
    /// Whether `self` and `other` bound alike (the same number, however spelled, and strictness).
    pub fn same(&self, other: &Bound) -> bool {
        self.strict == other.strict && self.value.cmp_value(&other.value).is_eq()
    }

    /// The stored spelling of a floor (`>=0`, `>0`) or a ceiling (`<=10`, `<10`): compared for
    /// equality only, so the value is canonical.
    pub fn stored(&self, floor: bool) -> String {
        let symbol = match (floor, self.strict) {
            (true, false) => ">=",
            (true, true) => ">",
            (false, false) => "<=",
            (false, true) => "<",
        };
        format!("{symbol}{}", self.value.canonical())
    }

    /// Reads [`Bound::stored`] back.
    pub fn parse_stored(text: &str) -> Option<Bound> {
        let (strict, rest) = match text.strip_prefix(">=").or_else(|| text.strip_prefix("<=")) {
            Some(rest) => (false, rest),
            None => (
                true,
                text.strip_prefix('>').or_else(|| text.strip_prefix('<'))?,
            ),
        };
        Some(Bound {
            value: Decimal::parse(rest).ok()?,
            strict,
        })
    }
}

/// A business rule checked, at prepare, on the item as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// The attribute compares to the value (numbers numerically, strings by bytes).
    Compare(Comparator, Value),
    /// The attribute is present.
    Exists,
    /// The attribute is absent.
    NotExists,
}

/// One participant's change to one item.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Operation {
    /// Attributes to set to a value.
    pub set: BTreeMap<String, Value>,
    /// Numeric attributes to change by a signed amount (an absent attribute counts as 0).
    pub add: BTreeMap<String, Decimal>,
    /// Attributes to remove.
    pub remove: BTreeSet<String>,
    /// A whole new item (besides its key); the item must not exist yet.
    pub put: Option<BTreeMap<String, Value>>,
    /// Delete the item.
    pub delete: bool,
    /// Conditions the current item must meet for the participant to vote yes.
    pub require: BTreeMap<String, Condition>,
}

/// An operation's `set` or `put`: attribute names and the values they take, each checked.
fn attribute_values(at: &str, value: &Value) -> Result<BTreeMap<String, Value>, OpError> {
    let mut values = BTreeMap::new();
    for (name, val) in object(at, value)? {
        check_attribute_name(name)?;
        check_value(&format!("{at}.{name}"), val)?;
        values.insert(name.clone(), val.clone());
    }
    Ok(values)
}

/// An operation's `remove`: a list of attribute names, each checked.
fn attribute_names(at: &str, value: &Value) -> Result<BTreeSet<String>, OpError> {
    let list = value
        .as_array()
        .ok_or_else(|| invalid(format!("{at}: expected a list of attribute names")))?;
    let mut names = BTreeSet::new();
    for name in list {
        let name = name
            .as_str()
            .ok_or_else(|| invalid(format!("{at}: expected attribute names (strings)")))?;
        check_attribute_name(name)?;
        names.insert(name.to_owned());
    }
    Ok(names)
}

impl Operation {
    /// Parses an operation from its JSON form; `path` prefixes error messages (`participants[0].op`).
    pub fn from_json(path: &str, v: &Value) -> Result<Operation, OpError> {
        let obj = object(path, v)?;
        let mut op = Operation::default();
        for (field, value) in obj {
            let at = format!("{path}.{field}");
            match field.as_str() {
                "set" => op.set = attribute_values(&at, value)?,
                "add" => {
                    for (name, val) in object(&at, value)? {
                        check_attribute_name(name)?;
                        let d = decimal_from_json(&format!("{at}.{name}"), val)?;
                        op.add.insert(name.clone(), d);
                    }
                }
                "remove" => op.remove = attribute_names(&at, value)?,
                "put" => op.put = Some(attribute_values(&at, value)?),
                "delete" => match value {
                    Value::Bool(b) => op.delete = *b,
                    other => {
                        return Err(invalid(format!(
                            "{at}: expected true or false, got {}",
                            kind(other)
                        )));
                    }
                },
                "require" => {
                    for (name, cond) in object(&at, value)? {
                        check_attribute_name(name)?;
                        let c = parse_condition(&format!("{at}.{name}"), cond)?;
                        op.require.insert(name.clone(), c);
                    }
                }
                other => {
                    return Err(invalid(format!(
                        "{path}: unknown field {other:?}; an operation has set, add, remove, put, \
                         delete and require"
                    )));
                }
            }
        }
        op.check_shape(path)?;
        Ok(op)
    }

    fn check_shape(&self, path: &str) -> Result<(), OpError> {
        let writes = !self.set.is_empty() || !self.add.is_empty() || !self.remove.is_empty();
        if !writes && self.put.is_none() && !self.delete && self.require.is_empty() {
            return Err(invalid(format!(
                "{path}: empty operation; give at least one of set, add, remove, put, delete, require"
            )));
        }
        if self.put.is_some() && (writes || self.delete) {
            return Err(invalid(format!(
                "{path}: put replaces the whole item; it cannot be combined with set, add, remove or delete"
            )));
        }
        if self.delete && writes {
            return Err(invalid(format!(
                "{path}: delete cannot be combined with set, add or remove"
            )));
        }
        let mut seen = BTreeSet::new();
        for name in self
            .set
            .keys()
            .chain(self.add.keys())
            .chain(self.remove.iter())
        {
            if !seen.insert(name) {
                return Err(invalid(format!(
                    "{path}: attribute {name:?} is changed twice (in more than one of set, add, remove)"
                )));
            }
        }
        for name in seen
            .iter()
            .map(|s| s.as_str())
            .chain(self.put.iter().flat_map(|p| p.keys().map(|s| s.as_str())))
        {
            if ITEM_PROTOCOL_ATTRIBUTES.contains(&name) {
                return Err(OpError::AttributeName(format!(
                    "{path}: attribute {name:?} is kept by the protocol and cannot be written"
                )));
            }
        }
        let count = self.set.len()
            + self.add.len()
            + self.remove.len()
            + self.put.as_ref().map_or(0, |p| p.len())
            + self.require.len();
        if count > MAX_ATTRIBUTES {
            return Err(invalid(format!(
                "{path}: names {count} attributes; at most {MAX_ATTRIBUTES} are allowed"
            )));
        }
        Ok(())
    }

    /// Checks the operation against the item's key: key attributes cannot be changed; `put` may
    /// repeat the key only with the same values; `notExists` on a key attribute needs `put`.
    pub(crate) fn check_against_key(
        &self,
        path: &str,
        key: &BTreeMap<String, Value>,
    ) -> Result<(), OpError> {
        for name in self.set.keys().chain(self.add.keys()).chain(&self.remove) {
            if key.contains_key(name) {
                return Err(invalid(format!(
                    "{path}: {name:?} is part of the item's key and cannot be changed"
                )));
            }
        }
        if let Some(put) = &self.put {
            for (name, value) in put {
                if key.get(name).is_some_and(|k| k != value) {
                    return Err(invalid(format!(
                        "{path}.put.{name}: differs from the key; leave key attributes out of put"
                    )));
                }
            }
        }
        for (name, cond) in &self.require {
            if key.contains_key(name) && *cond == Condition::NotExists && self.put.is_none() {
                return Err(invalid(format!(
                    "{path}.require.{name}: notExists on a key attribute only makes sense with put"
                )));
            }
        }
        Ok(())
    }

    /// Whether the operation creates its item (`put`): prepare locks a placeholder.
    pub fn creates(&self) -> bool {
        self.put.is_some()
    }

    /// How a participant holds its item: [`Mode::Reserved`] when the operation commutes with
    /// others like it (it only adds to numbers, and bounds only those numbers, from below with
    /// `gte` or from above with `lte`), [`Mode::Exclusive`] otherwise (`set`, `remove`, `put`,
    /// `delete`, another comparison, a bound on another attribute, a strict `gt`/`lt`).
    pub fn mode(&self) -> Mode {
        if self.escrow().is_some() {
            Mode::Reserved
        } else {
            Mode::Exclusive
        }
    }

    /// The reserved changes of a commuting operation, by attribute (`None`: it does not commute).
    pub fn escrow(&self) -> Option<BTreeMap<String, Escrowed>> {
        let adds_only = !self.add.is_empty()
            && self.set.is_empty()
            && self.remove.is_empty()
            && self.put.is_none()
            && !self.delete;
        if !adds_only {
            return None;
        }
        let mut out = BTreeMap::new();
        for (name, delta) in &self.add {
            out.insert(
                name.clone(),
                Escrowed {
                    delta: delta.clone(),
                    lower: None,
                    upper: None,
                    floor: None,
                    ceiling: None,
                },
            );
        }
        for (name, cond) in &self.require {
            let e = out.get_mut(name)?;
            let Condition::Compare(cmp, Value::Number(n)) = cond else {
                return None;
            };
            let v = Decimal::parse(&n.to_string()).ok()?;
            let bound = |value: Decimal, strict| Bound { value, strict };
            match cmp {
                // `v <= before` with `after = before + delta`: the value may not fall below
                // `v + min(0, delta)` while the reservation stands (nor reach it, for `gt`).
                Comparator::Gte | Comparator::Gt => {
                    let strict = *cmp == Comparator::Gt;
                    let floor = v.checked_add(&e.delta.min_zero()).ok()?.canonical();
                    e.floor = Some(bound(floor, strict));
                    e.lower = Some(bound(v, strict));
                }
                Comparator::Lte | Comparator::Lt => {
                    let strict = *cmp == Comparator::Lt;
                    let ceiling = v.checked_add(&e.delta.max_zero()).ok()?.canonical();
                    e.ceiling = Some(bound(ceiling, strict));
                    e.upper = Some(bound(v, strict));
                }
                Comparator::Eq | Comparator::Ne => return None,
            }
        }
        Some(out)
    }

    /// The JSON form, in a canonical order.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if !self.set.is_empty() {
            m.insert(
                "set".into(),
                Value::Object(self.set.clone().into_iter().collect()),
            );
        }
        if !self.add.is_empty() {
            let add = self.add.iter().map(|(k, d)| (k.clone(), d.to_json()));
            m.insert("add".into(), Value::Object(add.collect()));
        }
        if !self.remove.is_empty() {
            let list = self.remove.iter().cloned().map(Value::String).collect();
            m.insert("remove".into(), Value::Array(list));
        }
        if let Some(put) = &self.put {
            m.insert(
                "put".into(),
                Value::Object(put.clone().into_iter().collect()),
            );
        }
        if self.delete {
            m.insert("delete".into(), Value::Bool(true));
        }
        if !self.require.is_empty() {
            let req = self.require.iter().map(|(k, c)| {
                let v = match c {
                    Condition::Exists => Value::String("exists".into()),
                    Condition::NotExists => Value::String("notExists".into()),
                    Condition::Compare(cmp, v) => {
                        Value::Object([(cmp.name().to_owned(), v.clone())].into_iter().collect())
                    }
                };
                (k.clone(), v)
            });
            m.insert("require".into(), Value::Object(req.collect()));
        }
        Value::Object(m)
    }
}

impl Operation {
    /// Whether it is the same change as `other` once stored: equal with every number read by
    /// its value (DynamoDB gives `-10.50` back as `-10.5`). What a prepare that meets its own
    /// hold compares, to tell a retry from another operation on the same item.
    pub fn same_as(&self, other: &Operation) -> bool {
        canonical_json(&self.to_json()) == canonical_json(&other.to_json())
    }

    /// Whether it does nothing at all: what a custom participant's messages carry (its work is
    /// its payload); never what a table's participant accepts.
    pub fn is_empty(&self) -> bool {
        *self == Operation::default()
    }
}

impl Serialize for Operation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Operation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Operation::from_json("op", &v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn strict_and_loose_bounds_give_floors_and_ceilings_that_tell_them_apart() {
        let op = parse(json!({"add": {"balance": -5, "used": 3},
            "require": {"balance": {"gt": 5}, "used": {"lte": 7}}}))
        .expect("valid");
        let escrowed = op.escrow().expect("commutes");
        let balance = &escrowed["balance"];
        let floor = balance.floor.as_ref().expect("a floor");
        assert_eq!((floor.stored(true), floor.strict), (">0".to_owned(), true));
        assert!(balance.ceiling.is_none());
        let used = &escrowed["used"];
        let ceiling = used.ceiling.as_ref().expect("a ceiling");
        assert_eq!(ceiling.stored(false), "<=10");
        for text in [">0", ">=0", "<=10", "<10.5", ">-3"] {
            let b = Bound::parse_stored(text).expect(text);
            assert_eq!(b.stored(text.starts_with('>')), text);
        }
        assert!(Bound::parse_stored("=5").is_none());
        // `eq` and `ne` do not commute: they lock.
        let eq = parse(json!({"add": {"balance": -5}, "require": {"balance": {"eq": 5}}}))
            .expect("valid");
        assert!(eq.escrow().is_none());
    }

    use super::*;
    use crate::codes;
    use serde_json::json;

    fn parse(v: Value) -> Result<Operation, OpError> {
        Operation::from_json("op", &v)
    }

    #[test]
    fn parses_every_part_and_round_trips() {
        let v = json!({
            "set": {"name": "Alice", "tags": ["a", 1]},
            "add": {"balance": -100.25},
            "remove": ["nick"],
            "require": {"balance": {"gte": 100}, "frozen": "notExists", "name": {"exists": true}}
        });
        let op = parse(v).expect("valid");
        assert_eq!(op.add["balance"].as_str(), "-100.25");
        assert_eq!(op.require["frozen"], Condition::NotExists);
        let back = parse(op.to_json()).expect("round trip");
        assert_eq!(back, op);
    }

    #[test]
    fn unknown_operator_is_refused_with_its_name() {
        let err = parse(json!({"require": {"balance": {"between": [1, 2]}}})).unwrap_err();
        assert_eq!(err.code(), codes::INVALID_OPERATION);
        assert!(err.to_string().contains("\"between\""), "{err}");
    }

    #[test]
    fn order_comparisons_take_numbers_and_strings_only() {
        for value in [json!(true), json!(null), json!([1]), json!({"a": 1})] {
            for cmp in ["lt", "lte", "gt", "gte"] {
                let err = parse(json!({"require": {"flag": {cmp: value.clone()}}})).unwrap_err();
                assert_eq!(err.code(), codes::INVALID_OPERATION, "{cmp} {value}");
                assert!(
                    err.to_string().contains("numbers and strings only"),
                    "{err}"
                );
            }
        }
        assert!(parse(json!({"require": {"flag": {"eq": true}}})).is_ok());
        assert!(parse(json!({"require": {"name": {"gte": "m"}}})).is_ok());
    }

    #[test]
    fn unknown_field_is_refused() {
        let err = parse(json!({"increment": {"balance": 1}})).unwrap_err();
        assert!(err.to_string().contains("\"increment\""), "{err}");
    }

    #[test]
    fn injection_in_attribute_names_is_refused() {
        for name in [
            "balance = :x OR #a",
            "a.b",
            "a[0]",
            "",
            "1abc",
            "x)",
            "a b",
            "#n",
            ":v",
        ] {
            let err = parse(json!({"set": {name: 1}})).unwrap_err();
            assert_eq!(err.code(), codes::INVALID_ATTRIBUTE_NAME, "{name}");
            let err = parse(json!({"require": {name: "exists"}})).unwrap_err();
            assert_eq!(err.code(), codes::INVALID_ATTRIBUTE_NAME, "{name}");
        }
    }

    #[test]
    fn protocol_attributes_cannot_be_written() {
        for name in ITEM_PROTOCOL_ATTRIBUTES {
            assert!(parse(json!({"set": {*name: 1}})).is_err(), "{name}");
        }
        assert!(parse(json!({"require": {"txVersion": {"eq": 3}}})).is_ok());
    }

    #[test]
    fn conflicting_parts_are_refused() {
        assert!(parse(json!({})).is_err());
        assert!(parse(json!({"put": {"a": 1}, "set": {"b": 1}})).is_err());
        assert!(parse(json!({"delete": true, "add": {"b": 1}})).is_err());
        assert!(parse(json!({"set": {"b": 1}, "remove": ["b"]})).is_err());
        assert!(parse(json!({"set": {"b": 1}, "add": {"b": 1}})).is_err());
    }

    #[test]
    fn numbers_must_be_exactly_storable() {
        let err = parse(json!({"add": {"balance": "abc"}})).unwrap_err();
        assert_eq!(err.code(), codes::INVALID_NUMBER);
        let err = parse(json!({"add": {"balance": true}})).unwrap_err();
        assert_eq!(err.code(), codes::INVALID_NUMBER);
        let big: Value =
            serde_json::from_str("{\"set\": {\"x\": 1234567890123456789012345678901234567890}}")
                .expect("json");
        assert_eq!(parse(big).unwrap_err().code(), codes::INVALID_NUMBER);
    }

    #[test]
    fn numbers_keep_their_exact_text() {
        let v: Value = serde_json::from_str(
            "{\"add\": {\"a\": 0.1, \"b\": 12345678901234567890123456789012345678}}",
        )
        .expect("json");
        let op = parse(v).expect("valid");
        assert_eq!(op.add["a"].as_str(), "0.1");
        assert_eq!(
            op.add["b"].as_str(),
            "12345678901234567890123456789012345678"
        );
    }

    #[test]
    fn key_attributes_cannot_change() {
        let key: BTreeMap<String, Value> = [("id".to_owned(), json!("alice"))].into();
        let op = parse(json!({"set": {"id": "bob"}})).expect("syntax ok");
        assert!(op.check_against_key("op", &key).is_err());
        let op = parse(json!({"put": {"id": "alice", "balance": 0}})).expect("syntax ok");
        assert!(op.check_against_key("op", &key).is_ok());
        let op = parse(json!({"put": {"id": "mallory"}})).expect("syntax ok");
        assert!(op.check_against_key("op", &key).is_err());
    }
}
