//! A stream record as Lambda's event source mapping delivers it: the SDK's typed record turned
//! into the JSON of `aws_lambda_events::dynamodb::EventRecord` (binary values as standard
//! base64), so that the processor reads the very event it reads in AWS.

use std::collections::HashMap;

use aws_sdk_dynamodbstreams::types::{AttributeValue, Record};
use serde_json::{Map, Value, json};

fn attr_json(a: &AttributeValue) -> Value {
    match a {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(_) => json!({"NULL": true}),
        AttributeValue::M(m) => json!({"M": image(m)}),
        AttributeValue::L(l) => json!({"L": l.iter().map(attr_json).collect::<Vec<_>>()}),
        AttributeValue::Ss(v) => json!({"SS": v}),
        AttributeValue::Ns(v) => json!({"NS": v}),
        AttributeValue::B(b) => json!({"B": aws_smithy_types::base64::encode(b.as_ref())}),
        AttributeValue::Bs(v) => {
            json!({"BS": v.iter().map(|b| aws_smithy_types::base64::encode(b.as_ref())).collect::<Vec<_>>()})
        }
        _ => json!({"NULL": true}),
    }
}

fn image(m: &HashMap<String, AttributeValue>) -> Map<String, Value> {
    m.iter().map(|(k, v)| (k.clone(), attr_json(v))).collect()
}

/// A stream record in the JSON Lambda delivers.
pub(super) fn lambda_record(arn: &str, r: &Record) -> Value {
    let d = r.dynamodb();
    let mut change = Map::new();
    if let Some(t) = d.and_then(|d| d.approximate_creation_date_time()) {
        change.insert("ApproximateCreationDateTime".into(), json!(t.secs()));
    }
    if let Some(k) = d.and_then(|d| d.keys()) {
        change.insert("Keys".into(), Value::Object(image(k)));
    }
    if let Some(n) = d.and_then(|d| d.new_image()) {
        change.insert("NewImage".into(), Value::Object(image(n)));
    }
    if let Some(o) = d.and_then(|d| d.old_image()) {
        change.insert("OldImage".into(), Value::Object(image(o)));
    }
    change.insert(
        "SequenceNumber".into(),
        json!(d.and_then(|d| d.sequence_number()).unwrap_or_default()),
    );
    change.insert(
        "SizeBytes".into(),
        json!(d.and_then(|d| d.size_bytes()).unwrap_or(0)),
    );
    change.insert("StreamViewType".into(), json!("NEW_AND_OLD_IMAGES"));
    json!({
        "eventID": r.event_id().unwrap_or_default(),
        "eventName": r.event_name().map(|e| e.as_str()).unwrap_or_default(),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": r.aws_region().unwrap_or("us-east-1"),
        "eventSourceARN": arn,
        "dynamodb": change,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_attributes_reach_the_lambda_event_as_standard_base64() {
        let value = attr_json(&AttributeValue::B(aws_smithy_types::Blob::new(b"hello")));
        assert_eq!(value, json!({"B": "aGVsbG8="}));
        let back: serde_dynamo::AttributeValue = serde_json::from_value(value).expect("event");
        assert_eq!(back, serde_dynamo::AttributeValue::B(b"hello".to_vec()));
    }
}
