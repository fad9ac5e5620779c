//! A workaround for DynamoDB Local: an interceptor of the streams client that repairs the empty
//! map attributes DynamoDB Local writes malformed into `GetRecords` answers, before the SDK
//! parses them.

use serde_json::{Map, Value};

/// DynamoDB Local 3.3.0 writes an empty map attribute into stream records as `{}` instead of
/// `{"M": {}}`, which the SDK (rightly) refuses to parse, failing the whole `GetRecords`. This
/// interceptor rewrites such values in the images of a `GetRecords` answer before it is read.
/// Real DynamoDB Streams never send `{}`, so there it changes nothing.
#[derive(Debug)]
pub(super) struct RepairEmptyMaps;

impl aws_smithy_runtime_api::client::interceptors::Intercept for RepairEmptyMaps {
    fn name(&self) -> &'static str {
        "RepairEmptyMaps"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextMut<'_>,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        // The body is still a stream here: wrap it so that it is repaired once read whole.
        let body = context.response_mut().body_mut();
        let inner = std::mem::replace(body, aws_smithy_types::body::SdkBody::taken());
        *body = aws_smithy_types::body::SdkBody::from_body_1_x(Repaired {
            inner,
            buf: Vec::new(),
            done: false,
        });
        Ok(())
    }
}

/// A response body read whole, then handed on repaired.
struct Repaired {
    inner: aws_smithy_types::body::SdkBody,
    buf: Vec<u8>,
    done: bool,
}

impl http_body::Body for Repaired {
    type Data = bytes::Bytes;
    type Error = aws_smithy_types::body::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        loop {
            match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.buf.extend_from_slice(&data);
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    this.done = true;
                    let whole = std::mem::take(&mut this.buf);
                    let out = repair_records(&whole).unwrap_or(whole);
                    return Poll::Ready(Some(Ok(http_body::Frame::data(bytes::Bytes::from(out)))));
                }
            }
        }
    }
}

/// The repaired `GetRecords` body, if anything needed repair.
fn repair_records(body: &[u8]) -> Option<Vec<u8>> {
    fn fix(v: &mut Value) -> bool {
        let Value::Object(m) = v else { return false };
        if m.is_empty() {
            m.insert("M".into(), Value::Object(Map::new()));
            return true;
        }
        let mut changed = false;
        if let Some(Value::Object(inner)) = m.get_mut("M") {
            for item in inner.values_mut() {
                changed |= fix(item);
            }
        }
        if let Some(Value::Array(items)) = m.get_mut("L") {
            for item in items {
                changed |= fix(item);
            }
        }
        changed
    }
    let mut doc: Value = serde_json::from_slice(body).ok()?;
    let mut changed = false;
    for record in doc.get_mut("Records")?.as_array_mut()? {
        let Some(change) = record.get_mut("dynamodb") else {
            continue;
        };
        for image in ["Keys", "NewImage", "OldImage"] {
            if let Some(Value::Object(attrs)) = change.get_mut(image) {
                for v in attrs.values_mut() {
                    changed |= fix(v);
                }
            }
        }
    }
    changed.then(|| serde_json::to_vec(&doc).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_maps_in_images_are_repaired_and_nothing_else_changes() {
        let body = br#"{"Records":[{"dynamodb":{"NewImage":{"txFence":{},"n":{"N":"0.10"},"m":{"M":{"e":{},"k":{"M":{}}}},"l":{"L":[{}]}}}}]}"#;
        let fixed: Value =
            serde_json::from_slice(&repair_records(body).expect("repaired")).expect("json");
        let image = &fixed["Records"][0]["dynamodb"]["NewImage"];
        assert_eq!(image["txFence"], json!({"M": {}}));
        assert_eq!(image["m"], json!({"M": {"e": {"M": {}}, "k": {"M": {}}}}));
        assert_eq!(image["l"], json!({"L": [{"M": {}}]}));
        assert_eq!(image["n"]["N"], "0.10");
        assert_eq!(
            repair_records(br#"{"Records":[{"dynamodb":{"NewImage":{"a":{"S":"x"}}}}]}"#),
            None
        );
    }
}
