//! The data lake's one schema: its columns and their types, from which the Glue table's columns
//! (`template.yaml`, held to these by a test) and the local Parquet files' Arrow schema are both
//! derived; and the typing rule for an item's attributes.
//!
//! A row travels as JSON (`rows::row`): Firehose converts it to Parquet against the Glue
//! table's columns (matching JSON keys case-insensitively, as its OpenX JSON SerDe does), and the
//! local writer converts the same JSON against the same columns. Column names are the JSON keys
//! in lower case (Glue keeps names in lower case); SQL names them in any case (`eventId`).
//!
//! Types: text is `string`; an item's number attributes are `decimal(38,18)` — exact, never a
//! float — in the `numbers` map, every other attribute is text in the `item` map (strings as
//! they are, booleans `true`/`false`, lists and maps as JSON); a number that `decimal(38,18)`
//! cannot hold exactly (more than 20 integer or 18 fraction digits) stays in `item` as its exact
//! text rather than being rounded. Key values are text (they are identifiers). The commit time is
//! a `timestamp` (UTC, milliseconds).

use std::str::FromStr;

use bigdecimal::BigDecimal;
use bigdecimal::num_bigint::BigInt;
use serde_json::{Map, Value};

/// Total digits of the lake's decimals (the most Athena's `decimal` and DynamoDB keep).
pub const DECIMAL_PRECISION: u8 = 38;
/// Fraction digits of the lake's decimals.
pub const DECIMAL_SCALE: i8 = 18;

/// The partition column: the UTC day of `committedAt` (`YYYY-MM-DD`), a folder `dt=…`.
pub const PARTITION: &str = "dt";

/// Where rows go under the lake's root (the bucket, or the local folder): `committed/dt=…/`.
pub const PREFIX: &str = "committed";

/// A column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// Text.
    Text,
    /// A 64-bit integer.
    BigInt,
    /// An instant (UTC) at millisecond precision; in JSON, epoch milliseconds.
    Timestamp,
    /// Text keys to text values.
    TextMap,
    /// Text keys to `decimal(38,18)` values.
    DecimalMap,
    /// A transaction's participants: a list of [`PARTICIPANT_FIELDS`] structs.
    Participants,
}

/// A column of the lake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    /// Its name (lower case: the JSON key, case-insensitively).
    pub name: &'static str,
    /// Its type.
    pub kind: ColumnType,
}

const fn col(name: &'static str, kind: ColumnType) -> Column {
    Column { name, kind }
}

/// The lake's columns, in order (the partition `dt` comes after them).
pub const COLUMNS: [Column; 12] = [
    // `item`, `transaction` or `operator` (an operator's action: who asked in `item`).
    col("type", ColumnType::Text),
    // `txId/participant/key` or `txId/status`: the same for every delivery of one change.
    col("eventid", ColumnType::Text),
    col("txid", ColumnType::Text),
    // Item rows: the service, the key, the attributes after the commit (null for a delete).
    col("participant", ColumnType::Text),
    col("key", ColumnType::TextMap),
    col("item", ColumnType::TextMap),
    col("numbers", ColumnType::DecimalMap),
    col("version", ColumnType::BigInt),
    // Transaction rows: COMMITTED or ABORTED, every participant's vote, and how many item
    // changes a commit makes (participants with a key): fewer item rows means not applied yet.
    col("status", ColumnType::Text),
    col("participants", ColumnType::Participants),
    col("items", ColumnType::BigInt),
    col("committedat", ColumnType::Timestamp),
];

/// The fields of a participant in [`ColumnType::Participants`]; `key` is a text map, the others
/// text.
pub const PARTICIPANT_FIELDS: [&str; 6] =
    ["participant", "key", "vote", "reason", "mode", "message"];

/// The type of a field of a participant's struct: the key is a map, the rest text.
fn participant_field(name: &str) -> ColumnType {
    if name == "key" {
        ColumnType::TextMap
    } else {
        ColumnType::Text
    }
}

impl ColumnType {
    /// The type as Glue (Hive DDL) spells it.
    pub fn glue(self) -> String {
        match self {
            ColumnType::Text => "string".into(),
            ColumnType::BigInt => "bigint".into(),
            ColumnType::Timestamp => "timestamp".into(),
            ColumnType::TextMap => "map<string,string>".into(),
            ColumnType::DecimalMap => {
                format!("map<string,decimal({DECIMAL_PRECISION},{DECIMAL_SCALE})>")
            }
            ColumnType::Participants => {
                let fields: Vec<String> = PARTICIPANT_FIELDS
                    .iter()
                    .map(|f| format!("{f}:{}", participant_field(f).glue()))
                    .collect();
                format!("array<struct<{}>>", fields.join(","))
            }
        }
    }
}

impl ColumnType {
    /// The type as Athena's engine (Trino) spells it, in a view's stored columns.
    pub fn trino(self) -> String {
        match self {
            ColumnType::Text => "varchar".into(),
            ColumnType::BigInt => "bigint".into(),
            ColumnType::Timestamp => "timestamp(3)".into(),
            ColumnType::TextMap => "map(varchar,varchar)".into(),
            ColumnType::DecimalMap => {
                format!("map(varchar,decimal({DECIMAL_PRECISION},{DECIMAL_SCALE}))")
            }
            ColumnType::Participants => {
                let fields: Vec<String> = PARTICIPANT_FIELDS
                    .iter()
                    .map(|f| format!("{f} {}", participant_field(f).trino()))
                    .collect();
                format!("array(row({}))", fields.join(","))
            }
        }
    }
}

/// A row's value for a column: the JSON key equal to the column's name, ignoring case.
pub fn field<'a>(row: &'a Value, column: &str) -> Option<&'a Value> {
    row.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(column))
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

/// The unscaled `decimal(38,18)` value of a number, if it holds it exactly.
pub fn scaled(number: &str) -> Option<i128> {
    let value = BigDecimal::from_str(number).ok()?;
    let at_scale = value.with_scale(i64::from(DECIMAL_SCALE));
    if at_scale != value {
        return None; // more fraction digits than the scale keeps
    }
    let (digits, _) = at_scale.into_bigint_and_exponent();
    let limit = BigInt::from(10).pow(u32::from(DECIMAL_PRECISION));
    if digits >= limit || digits <= -limit {
        return None;
    }
    i128::try_from(digits).ok()
}

/// A value as the lake's text: strings as they are, null as null, anything else as its JSON.
pub fn text(value: &Value) -> Value {
    match value {
        Value::String(_) | Value::Null => value.clone(),
        other => Value::String(other.to_string()),
    }
}

/// Splits an item's attributes into the lake's `item` (text) and `numbers` (exact decimals)
/// maps, by the typing rule of this module.
pub fn split_item(item: &Map<String, Value>) -> (Map<String, Value>, Map<String, Value>) {
    let mut texts = Map::new();
    let mut numbers = Map::new();
    for (name, value) in item {
        match value {
            Value::Number(n) if scaled(&n.to_string()).is_some() => {
                numbers.insert(name.clone(), value.clone());
            }
            other => {
                texts.insert(name.clone(), text(other));
            }
        }
    }
    (texts, numbers)
}

/// A map's values as the lake's text.
pub fn text_map(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter().map(|(k, v)| (k.clone(), text(v))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_that_fit_the_decimal_are_numbers_and_the_rest_stay_exact_text() {
        assert_eq!(scaled("102.47"), Some(102_470_000_000_000_000_000));
        assert_eq!(scaled("-0.000000000000000001"), Some(-1));
        assert_eq!(scaled("1e3"), Some(1_000 * 10i128.pow(18)));
        assert_eq!(
            scaled("99999999999999999999.999999999999999999"),
            Some(10i128.pow(38) - 1)
        );
        assert_eq!(scaled("100000000000000000000"), None, "21 integer digits");
        assert_eq!(scaled("0.0000000000000000001"), None, "19 fraction digits");
        let item: Map<String, Value> = serde_json::from_value(json!({
            "balance": serde_json::Number::from_str("102.47").expect("number"),
            "huge": serde_json::Number::from_str("123456789012345678901").expect("number"),
            "owner": "alice", "open": true, "tags": ["a"], "none": null
        }))
        .expect("item");
        let (texts, numbers) = split_item(&item);
        assert_eq!(Value::Object(numbers).to_string(), r#"{"balance":102.47}"#);
        assert_eq!(
            Value::Object(texts),
            json!({"huge": "123456789012345678901", "owner": "alice", "open": "true", "tags": "[\"a\"]", "none": null})
        );
    }

    #[test]
    fn glue_types_spell_the_columns() {
        assert_eq!(ColumnType::DecimalMap.glue(), "map<string,decimal(38,18)>");
        assert_eq!(
            ColumnType::Participants.glue(),
            "array<struct<participant:string,key:map<string,string>,vote:string,reason:string,mode:string,message:string>>"
        );
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert!(names.iter().all(|n| n.to_lowercase() == *n), "{names:?}");
    }
}
