//! The connections function: API Gateway WebSocket routes `$connect` (after the `$connect`
//! authorizer verified the caller's token: its principal and grants are recorded),
//! `$disconnect` and `subscribe` (checked against those grants) keep the connections table. The
//! logic is `twopc_fanout::connections`, shared with the local stack's gateway.
#![warn(missing_docs)]

use std::convert::Infallible;

use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use lambda_runtime::LambdaEvent;
use twopc_authorizer::refusal::codes;
use twopc_core::ports::SystemClock;
use twopc_dynamo::connections::DynamoConnections;
use twopc_runtime::telemetry::Metrics;

/// What the handler needs.
pub struct App {
    /// The subscriptions.
    pub store: DynamoConnections,
    /// Where refused subscriptions are counted.
    pub metrics: Metrics,
}

/// The refusal code of an answer, when it is an authorization refusal (counted; a malformed
/// message or a store failure is not).
pub fn refusal_code(answer: &ApiGatewayProxyResponse) -> Option<String> {
    let aws_lambda_events::encodings::Body::Text(text) = answer.body.as_ref()? else {
        return None;
    };
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let code = v.get("code")?.as_str()?;
    codes::ALL.contains(&code).then(|| code.to_owned())
}

/// Handles one route event; every outcome is a response (a bad message gets an error frame).
pub async fn handle(
    app: &App,
    event: LambdaEvent<ApiGatewayWebsocketProxyRequest>,
) -> Result<ApiGatewayProxyResponse, Infallible> {
    let answer = twopc_fanout::connections::handle(&app.store, &event.payload, &SystemClock).await;
    // The SubscribeRefusals alarm's metric.
    if let Some(code) = refusal_code(&answer) {
        app.metrics.subscribe_refused(&code);
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use twopc_core::ports::Clock;
    use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};

    fn sample(text: &str) -> ApiGatewayWebsocketProxyRequest {
        serde_json::from_str(text).expect("sample parses")
    }

    #[tokio::test]
    async fn a_refused_subscription_is_counted_for_the_alarm_and_an_admitted_one_is_not() {
        let client = twopc_dynamo::client(Some(&twopc_tests::endpoint())).await;
        let table = format!("connections-{}", uuid::Uuid::new_v4());
        let spec = TableSpec {
            name: table.clone(),
            kind: TableKind::Connections,
        };
        ensure_table(&client, &spec).await.expect("table");
        let app = App {
            store: DynamoConnections::new(client, &table, 7_200),
            metrics: Metrics::in_memory("connections"),
        };
        // Alice's token grants accounts/alice only (the sample connect event).
        let mut connect = sample(include_str!("../../../events/connections-connect.json"));
        let exp = SystemClock.now_secs() + 3_600;
        connect
            .request_context
            .authorizer
            .fields
            .insert("exp".to_owned(), exp.into());
        let answered = |r: Result<ApiGatewayProxyResponse, Infallible>| match r {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let r = answered(handle(&app, LambdaEvent::new(connect, Default::default())).await);
        assert_eq!(r.status_code, 200, "{:?}", r.body);

        let admitted = sample(include_str!("../../../events/connections-subscribe.json"));
        let before = SystemClock.now_ms();
        let r = answered(handle(&app, LambdaEvent::new(admitted, Default::default())).await);
        assert_eq!(refusal_code(&r), None, "{:?}", r.body);
        // Acknowledged with when it took effect: after it was stored, before the answer.
        let Some(aws_lambda_events::encodings::Body::Text(ack)) = &r.body else {
            panic!("no answer: {r:?}")
        };
        let ack: serde_json::Value = serde_json::from_str(ack).expect("json");
        assert_eq!(
            (&ack["type"], &ack["topics"]),
            (&"subscribed".into(), &1.into()),
            "{ack}"
        );
        let from = ack["from"]
            .as_u64()
            .unwrap_or_else(|| panic!("no from: {ack}"));
        assert!((before..=SystemClock.now_ms()).contains(&from), "{ack}");
        assert!(app.metrics.lines().is_empty(), "{:?}", app.metrics.lines());

        let mut bobs = sample(include_str!("../../../events/connections-subscribe.json"));
        bobs.body = Some(
            r#"{"action": "subscribe", "entities": [{"participant": "accounts", "key": {"id": "bob"}}], "all": false}"#
                .to_owned(),
        );
        let r = answered(handle(&app, LambdaEvent::new(bobs, Default::default())).await);
        assert_eq!(refusal_code(&r).as_deref(), Some("topic_forbidden"));
        let lines = app.metrics.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["SubscribeRefused"], 1, "{}", lines[0]);
        assert_eq!(lines[0]["Code"], "topic_forbidden", "{}", lines[0]);
    }

    #[test]
    fn only_authorization_refusals_are_counted() {
        let answer = |body: &str| {
            let mut r = ApiGatewayProxyResponse::default();
            r.body = Some(aws_lambda_events::encodings::Body::Text(body.to_owned()));
            r
        };
        assert_eq!(
            refusal_code(&answer(
                r#"{"type":"error","code":"topic_forbidden","message":"m"}"#
            )),
            Some("topic_forbidden".to_owned())
        );
        for body in [
            r#"{"type":"error","code":"invalid_subscription","message":"m"}"#,
            r#"{"type":"subscribed","topics":1}"#,
            "not json",
        ] {
            assert_eq!(refusal_code(&answer(body)), None, "{body}");
        }
        assert_eq!(refusal_code(&ApiGatewayProxyResponse::default()), None);
    }

    #[test]
    fn the_sample_route_events_round_trip() {
        for (sample, route) in [
            (
                include_str!("../../../events/connections-connect.json"),
                "$connect",
            ),
            (
                include_str!("../../../events/connections-subscribe.json"),
                "subscribe",
            ),
            (
                include_str!("../../../events/connections-disconnect.json"),
                "$disconnect",
            ),
        ] {
            let event: ApiGatewayWebsocketProxyRequest =
                serde_json::from_str(sample).expect("sample parses");
            assert_eq!(event.request_context.route_key.as_deref(), Some(route));
            let again: ApiGatewayWebsocketProxyRequest =
                serde_json::from_value(serde_json::to_value(&event).expect("serialize"))
                    .expect("round trip");
            assert_eq!(
                again.request_context.connection_id,
                event.request_context.connection_id
            );
            if route == "subscribe" {
                assert!(
                    twopc_fanout::connections::parse_subscribe(
                        event.body.as_deref().unwrap_or_default()
                    )
                    .is_ok()
                );
            }
        }
    }
}
