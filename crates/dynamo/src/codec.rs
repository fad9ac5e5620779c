//! JSON ↔ DynamoDB attribute values, keeping numbers as their exact decimal text.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Number, Value};

/// A DynamoDB item.
pub type Item = HashMap<String, AttributeValue>;

/// JSON → attribute value. Numbers keep their text (`serde_json` is built with
/// `arbitrary_precision`, so no `f64` is ever involved).
pub fn to_attr(v: &Value) -> AttributeValue {
    match v {
        Value::Null => AttributeValue::Null(true),
        Value::Bool(b) => AttributeValue::Bool(*b),
        Value::Number(n) => AttributeValue::N(n.to_string()),
        Value::String(s) => AttributeValue::S(s.clone()),
        Value::Array(items) => AttributeValue::L(items.iter().map(to_attr).collect()),
        Value::Object(m) => {
            AttributeValue::M(m.iter().map(|(k, v)| (k.clone(), to_attr(v))).collect())
        }
    }
}

/// An attribute value that has no JSON form here.
#[derive(Debug, Clone, thiserror::Error)]
#[error("attribute value cannot be read as JSON: {0}")]
pub struct CodecError(pub String);

fn number(text: &str) -> Result<Number, CodecError> {
    text.parse::<Number>()
        .map_err(|_| CodecError(format!("number {text:?}")))
}

/// Attribute value → JSON. Sets become lists; binary becomes a base16 string under `$binary`.
pub fn from_attr(a: &AttributeValue) -> Result<Value, CodecError> {
    Ok(match a {
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::N(n) => Value::Number(number(n)?),
        AttributeValue::S(s) => Value::String(s.clone()),
        AttributeValue::L(items) => {
            Value::Array(items.iter().map(from_attr).collect::<Result<_, _>>()?)
        }
        AttributeValue::M(m) => Value::Object(from_item(m)?),
        AttributeValue::Ss(items) => {
            Value::Array(items.iter().cloned().map(Value::String).collect())
        }
        AttributeValue::Ns(items) => Value::Array(
            items
                .iter()
                .map(|n| number(n).map(Value::Number))
                .collect::<Result<_, _>>()?,
        ),
        AttributeValue::B(b) => binary(b),
        AttributeValue::Bs(items) => Value::Array(items.iter().map(binary).collect()),
        other => return Err(CodecError(format!("{other:?}"))),
    })
}

fn binary(b: &Blob) -> Value {
    let hex: String = b.as_ref().iter().map(|x| format!("{x:02x}")).collect();
    serde_json::json!({ "$binary": hex })
}

/// A JSON object → an item.
pub fn to_item<'a>(m: impl IntoIterator<Item = (&'a String, &'a Value)>) -> Item {
    m.into_iter()
        .map(|(k, v)| (k.clone(), to_attr(v)))
        .collect()
}

/// An item → a JSON object (sorted by name).
pub fn from_item(item: &Item) -> Result<Map<String, Value>, CodecError> {
    let mut out = Map::new();
    for (k, v) in item {
        out.insert(k.clone(), from_attr(v)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_survive_exactly_both_ways() {
        let v: Value = serde_json::from_str(
            r#"{"a": 0.1, "b": 12345678901234567890123456789012345678, "c": -1e-130, "d": [1.50, {"e": 7}]}"#,
        )
        .expect("json");
        let attr = to_attr(&v);
        let AttributeValue::M(m) = &attr else {
            panic!("map")
        };
        assert_eq!(m["a"], AttributeValue::N("0.1".into()));
        assert_eq!(
            m["b"],
            AttributeValue::N("12345678901234567890123456789012345678".into())
        );
        assert_eq!(from_attr(&attr).expect("back"), v);
    }
}
