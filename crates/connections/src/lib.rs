//! The connections function: API Gateway WebSocket routes `$connect` (after the `$connect`
//! authorizer verified the caller's token: its principal and grants are recorded),
//! `$disconnect` and `subscribe` (checked against those grants) keep the connections table. The
//! logic is `twopc_fanout::connections`, shared with the local stack's gateway.
#![warn(missing_docs)]

use std::convert::Infallible;

use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use lambda_runtime::LambdaEvent;
use twopc_dynamo::connections::DynamoConnections;

/// The environment variables this function reads (named once, in `twopc_runtime`).
pub use twopc_runtime::config::var;

/// What the handler needs.
pub struct App {
    /// The subscriptions.
    pub store: DynamoConnections,
}

/// Handles one route event; every outcome is a response (a bad message gets an error frame).
pub async fn handle(
    app: &App,
    event: LambdaEvent<ApiGatewayWebsocketProxyRequest>,
) -> Result<ApiGatewayProxyResponse, Infallible> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(twopc_fanout::connections::handle(&app.store, &event.payload, now).await)
}

#[cfg(test)]
mod tests {
    use super::*;

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
