//! What an operation may contain, checked before anything is written: attribute names, values
//! (depth, exact numbers), conditions, each refusal an [`OpError`] naming what to fix.

use serde_json::{Map, Value};

use crate::codes::{self, Code};
use crate::decimal::Decimal;

use super::{Comparator, Condition, MAX_DEPTH, MAX_NAME_LEN};

/// Why an operation, key or value was refused. `code()` is the stable machine-readable name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// The operation's shape is wrong (unknown field or operator, wrong type, conflicting parts).
    #[error("{0}")]
    Invalid(String),
    /// An attribute name is not allowed.
    #[error("{0}")]
    AttributeName(String),
    /// A number cannot be stored exactly.
    #[error("{0}")]
    Number(String),
}

impl OpError {
    /// Stable error code.
    pub fn code(&self) -> Code {
        match self {
            OpError::Invalid(_) => codes::INVALID_OPERATION,
            OpError::AttributeName(_) => codes::INVALID_ATTRIBUTE_NAME,
            OpError::Number(_) => codes::INVALID_NUMBER,
        }
    }
}

pub(super) fn invalid(msg: impl Into<String>) -> OpError {
    OpError::Invalid(msg.into())
}

/// Checks an attribute name: `[A-Za-z_][A-Za-z0-9_-]*`, at most 255 bytes.
pub(crate) fn check_attribute_name(name: &str) -> Result<(), OpError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !first_ok || !rest_ok || name.len() > MAX_NAME_LEN {
        return Err(OpError::AttributeName(format!(
            "attribute name {:?} is not allowed: use 1 to {MAX_NAME_LEN} characters from \
             [A-Za-z0-9_-], starting with a letter or '_'",
            name.chars().take(80).collect::<String>()
        )));
    }
    Ok(())
}

/// Checks a value for storage: every number exact, nesting bounded.
pub(crate) fn check_value(path: &str, value: &Value) -> Result<(), OpError> {
    fn walk(path: &str, v: &Value, depth: usize) -> Result<(), OpError> {
        if depth > MAX_DEPTH {
            return Err(invalid(format!(
                "{path}: nested deeper than {MAX_DEPTH} levels"
            )));
        }
        match v {
            Value::Number(n) => Decimal::parse(&n.to_string())
                .map(|_| ())
                .map_err(|e| OpError::Number(format!("{path}: {e}"))),
            Value::Array(items) => items
                .iter()
                .try_for_each(|item| walk(path, item, depth + 1)),
            Value::Object(map) => map
                .values()
                .try_for_each(|item| walk(path, item, depth + 1)),
            Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
        }
    }
    walk(path, value, 0)
}

/// Reads a JSON number or decimal string as an exact decimal.
pub(crate) fn decimal_from_json(path: &str, value: &Value) -> Result<Decimal, OpError> {
    let text = match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => {
            return Err(OpError::Number(format!(
                "{path}: expected a number or a decimal string, got {}",
                kind(other)
            )));
        }
    };
    Decimal::parse(&text).map_err(|e| OpError::Number(format!("{path}: {e}")))
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub(super) fn object<'a>(path: &str, v: &'a Value) -> Result<&'a Map<String, Value>, OpError> {
    v.as_object()
        .ok_or_else(|| invalid(format!("{path}: expected an object, got {}", kind(v))))
}

pub(super) fn parse_condition(path: &str, v: &Value) -> Result<Condition, OpError> {
    let help = "expected \"exists\", \"notExists\" or one of {eq|ne|lt|lte|gt|gte: value}";
    match v {
        Value::String(s) if s == "exists" => Ok(Condition::Exists),
        Value::String(s) if s == "notExists" => Ok(Condition::NotExists),
        Value::Object(m) if m.len() == 1 => {
            let (name, value) = m
                .iter()
                .next()
                .ok_or_else(|| invalid(format!("{path}: {help}")))?;
            match (name.as_str(), value) {
                ("exists", Value::Bool(true)) => Ok(Condition::Exists),
                ("notExists", Value::Bool(true)) => Ok(Condition::NotExists),
                (cmp, value) => {
                    let cmp = Comparator::parse(cmp).ok_or_else(|| {
                        invalid(format!("{path}: unknown operator {cmp:?}; {help}"))
                    })?;
                    // Order is defined on numbers and strings (DynamoDB refuses `<` on a
                    // boolean, a list or a map at the write, too late for a clean refusal).
                    if matches!(
                        value,
                        Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_)
                    ) && !matches!(cmp, Comparator::Eq | Comparator::Ne)
                    {
                        return Err(invalid(format!(
                            "{path}: {} compares numbers and strings only",
                            cmp.name()
                        )));
                    }
                    check_value(path, value)?;
                    Ok(Condition::Compare(cmp, value.clone()))
                }
            }
        }
        _ => Err(invalid(format!("{path}: {help}"))),
    }
}
