//! The lake's rows as Parquet: the Arrow schema derived from the lake's columns
//! ([`crate::lake::COLUMNS`]), rows (JSON as `rows::row` makes them) encoded into one file
//! (Snappy, as Firehose writes them), and a file read back as JSON rows.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, Decimal128Builder, Int64Builder, ListBuilder, MapBuilder, MapFieldNames,
    StringBuilder, StructBuilder, TimestampMillisecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::Value;

use super::LakeError;
use crate::lake::{
    COLUMNS, ColumnType, DECIMAL_PRECISION, DECIMAL_SCALE, PARTICIPANT_FIELDS, PARTITION, field,
    scaled,
};

/// The lake's Arrow schema, from [`COLUMNS`] (the partition is the folder, not a column).
fn schema() -> SchemaRef {
    Arc::new(Schema::new(
        COLUMNS
            .iter()
            .map(|c| Field::new(c.name, data_type(c.kind), true))
            .collect::<Vec<_>>(),
    ))
}

fn map_names() -> MapFieldNames {
    // Parquet's MAP convention (and what Hive writers use): key_value { key, value }.
    MapFieldNames {
        entry: "key_value".into(),
        key: "key".into(),
        value: "value".into(),
    }
}

fn map_type(value: DataType) -> DataType {
    let names = map_names();
    DataType::Map(
        Arc::new(Field::new(
            names.entry,
            DataType::Struct(Fields::from(vec![
                Field::new(names.key, DataType::Utf8, false),
                Field::new(names.value, value, true),
            ])),
            false,
        )),
        false,
    )
}

fn participant_fields() -> Fields {
    Fields::from(
        PARTICIPANT_FIELDS
            .iter()
            .map(|f| {
                let t = if *f == "key" {
                    data_type(ColumnType::TextMap)
                } else {
                    DataType::Utf8
                };
                Field::new(*f, t, true)
            })
            .collect::<Vec<_>>(),
    )
}

fn data_type(kind: ColumnType) -> DataType {
    match kind {
        ColumnType::Text => DataType::Utf8,
        ColumnType::BigInt => DataType::Int64,
        // Without a zone: Athena's `timestamp` is one (the value is UTC).
        ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Millisecond, None),
        ColumnType::TextMap => map_type(DataType::Utf8),
        ColumnType::DecimalMap => map_type(DataType::Decimal128(DECIMAL_PRECISION, DECIMAL_SCALE)),
        ColumnType::Participants => DataType::List(Arc::new(Field::new(
            "element",
            DataType::Struct(participant_fields()),
            true,
        ))),
    }
}

fn bad(column: &'static str, why: impl Into<String>) -> LakeError {
    LakeError::Column {
        column,
        why: why.into(),
    }
}

fn text_map_builder() -> MapBuilder<StringBuilder, StringBuilder> {
    MapBuilder::new(
        Some(map_names()),
        StringBuilder::new(),
        StringBuilder::new(),
    )
}

/// Appends a JSON object (or null) of text values to a text map.
fn append_text_map(
    b: &mut MapBuilder<StringBuilder, StringBuilder>,
    column: &'static str,
    value: Option<&Value>,
) -> Result<(), LakeError> {
    match value {
        None => b
            .append(false)
            .map_err(|e| LakeError::Encode(e.to_string())),
        Some(Value::Object(m)) => {
            for (k, v) in m {
                b.keys().append_value(k);
                match v {
                    Value::Null => b.values().append_null(),
                    Value::String(s) => b.values().append_value(s),
                    other => return Err(bad(column, format!("{k} is not text: {other}"))),
                }
            }
            b.append(true).map_err(|e| LakeError::Encode(e.to_string()))
        }
        Some(other) => Err(bad(column, format!("not a map: {other}"))),
    }
}

/// The rows (JSON as `rows::row` makes them) as one Arrow batch of the lake's schema.
fn record_batch(rows: &[Value]) -> Result<RecordBatch, LakeError> {
    let arrays = COLUMNS
        .iter()
        .map(|column| {
            let name = column.name;
            let cells = rows.iter().map(|r| field(r, name));
            match column.kind {
                ColumnType::Text => text_array(name, cells),
                ColumnType::BigInt | ColumnType::Timestamp => {
                    integer_array(name, column.kind, cells)
                }
                ColumnType::TextMap => text_map_array(name, cells),
                ColumnType::DecimalMap => decimal_map_array(name, cells),
                ColumnType::Participants => participants_array(name, cells),
            }
        })
        .collect::<Result<Vec<ArrayRef>, LakeError>>()?;
    RecordBatch::try_new(schema(), arrays).map_err(|e| LakeError::Encode(e.to_string()))
}

fn text_array<'a>(
    name: &'static str,
    cells: impl Iterator<Item = Option<&'a Value>>,
) -> Result<ArrayRef, LakeError> {
    let mut b = StringBuilder::new();
    for v in cells {
        match v {
            None => b.append_null(),
            Some(Value::String(s)) => b.append_value(s),
            Some(other) => return Err(bad(name, format!("not text: {other}"))),
        }
    }
    Ok(Arc::new(b.finish()))
}

/// A `bigint` or a `timestamp` (milliseconds) column.
fn integer_array<'a>(
    name: &'static str,
    kind: ColumnType,
    cells: impl Iterator<Item = Option<&'a Value>>,
) -> Result<ArrayRef, LakeError> {
    let values = cells
        .map(|v| {
            v.map(|n| {
                n.as_i64()
                    .ok_or_else(|| bad(name, format!("not an integer: {n}")))
            })
            .transpose()
        })
        .collect::<Result<Vec<Option<i64>>, LakeError>>()?;
    Ok(if kind == ColumnType::BigInt {
        let mut b = Int64Builder::new();
        b.extend(values);
        Arc::new(b.finish())
    } else {
        let mut b = TimestampMillisecondBuilder::new();
        b.extend(values);
        Arc::new(b.finish())
    })
}

fn text_map_array<'a>(
    name: &'static str,
    cells: impl Iterator<Item = Option<&'a Value>>,
) -> Result<ArrayRef, LakeError> {
    let mut b = text_map_builder();
    for v in cells {
        append_text_map(&mut b, name, v)?;
    }
    Ok(Arc::new(b.finish()))
}

/// A map of text to `decimal(38,18)`.
fn decimal_map_array<'a>(
    name: &'static str,
    cells: impl Iterator<Item = Option<&'a Value>>,
) -> Result<ArrayRef, LakeError> {
    let mut b = MapBuilder::new(
        Some(map_names()),
        StringBuilder::new(),
        Decimal128Builder::new()
            .with_precision_and_scale(DECIMAL_PRECISION, DECIMAL_SCALE)
            .map_err(|e| LakeError::Encode(e.to_string()))?,
    );
    for v in cells {
        match v {
            None => b.append(false),
            Some(Value::Object(m)) => {
                for (k, n) in m {
                    let unscaled = match n {
                        Value::Number(n) => scaled(&n.to_string()),
                        _ => None,
                    }
                    .ok_or_else(|| bad(name, format!("{k} is not a decimal(38,18): {n}")))?;
                    b.keys().append_value(k);
                    b.values().append_value(unscaled);
                }
                b.append(true)
            }
            Some(other) => return Err(bad(name, format!("not a map: {other}"))),
        }
        .map_err(|e| LakeError::Encode(e.to_string()))?;
    }
    Ok(Arc::new(b.finish()))
}

/// A list of participant structs (`PARTICIPANT_FIELDS`: text, and the key a text map).
fn participants_array<'a>(
    name: &'static str,
    cells: impl Iterator<Item = Option<&'a Value>>,
) -> Result<ArrayRef, LakeError> {
    let builders: Vec<Box<dyn ArrayBuilder>> = PARTICIPANT_FIELDS
        .iter()
        .map(|f| -> Box<dyn ArrayBuilder> {
            if *f == "key" {
                Box::new(text_map_builder())
            } else {
                Box::new(StringBuilder::new())
            }
        })
        .collect();
    let element = Field::new("element", DataType::Struct(participant_fields()), true);
    let mut b = ListBuilder::new(StructBuilder::new(participant_fields(), builders))
        .with_field(Arc::new(element));
    for v in cells {
        match v {
            None => b.append(false),
            Some(Value::Array(list)) => {
                for p in list {
                    append_participant(b.values(), name, p)?;
                }
                b.append(true);
            }
            Some(other) => return Err(bad(name, format!("not a list: {other}"))),
        }
    }
    Ok(Arc::new(b.finish()))
}

/// Appends one participant's struct: each field as text, its key as a text map.
fn append_participant(
    s: &mut StructBuilder,
    name: &'static str,
    p: &Value,
) -> Result<(), LakeError> {
    for (i, f) in PARTICIPANT_FIELDS.iter().enumerate() {
        let value = field(p, f);
        if *f == "key" {
            let m = s
                .field_builder::<MapBuilder<StringBuilder, StringBuilder>>(i)
                .ok_or_else(|| bad(name, "key builder"))?;
            append_text_map(m, name, value)?;
        } else {
            let t = s
                .field_builder::<StringBuilder>(i)
                .ok_or_else(|| bad(name, "text builder"))?;
            match value {
                None => t.append_null(),
                Some(Value::String(x)) => t.append_value(x),
                Some(other) => t.append_value(other.to_string()),
            }
        }
    }
    s.append(true);
    Ok(())
}

/// Writes rows as one Parquet file (Snappy, as Firehose writes them).
pub fn write_file(path: &Path, rows: &[Value]) -> Result<(), LakeError> {
    let io = |source| LakeError::Io {
        path: path.to_owned(),
        source,
    };
    let batch = record_batch(rows)?;
    let file = File::create(path).map_err(io)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut writer = ArrowWriter::try_new(file.try_clone().map_err(io)?, schema(), Some(props))
        .map_err(|e| LakeError::Encode(e.to_string()))?;
    writer
        .write(&batch)
        .map_err(|e| LakeError::Encode(e.to_string()))?;
    writer
        .close()
        .map_err(|e| LakeError::Encode(e.to_string()))?;
    file.sync_all().map_err(io)
}

/// The rows of one file as JSON objects keyed by column name, with `dt` from its folder.
pub fn read_file(path: &Path) -> Result<Vec<Value>, LakeError> {
    use parquet::file::reader::FileReader;
    let dt = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|f| f.to_str())
        .and_then(|f| f.strip_prefix(&format!("{PARTITION}=")).map(str::to_owned));
    let file = File::open(path).map_err(|source| LakeError::Io {
        path: path.to_owned(),
        source,
    })?;
    let encode = |e: parquet::errors::ParquetError| LakeError::Encode(e.to_string());
    let reader = parquet::file::reader::SerializedFileReader::new(file).map_err(encode)?;
    let mut rows = vec![];
    for row in reader.get_row_iter(None).map_err(encode)? {
        let mut json = row.map_err(encode)?.to_json_value();
        if let (Some(m), Some(dt)) = (json.as_object_mut(), &dt) {
            m.insert(PARTITION.into(), Value::String(dt.clone()));
        }
        rows.push(json);
    }
    Ok(rows)
}
