//! Pushes through API Gateway's management API (which the local stack's gateway also serves, so
//! the same client code runs in both places).

use crate::ports::{Push, PushError};
use aws_sdk_apigatewaymanagement::primitives::Blob;

/// `PostToConnection` through API Gateway's management API (or the local gateway's).
#[derive(Clone, Debug)]
pub struct ApiGatewayPush {
    client: aws_sdk_apigatewaymanagement::Client,
}

impl ApiGatewayPush {
    /// Pushes through `client` (its endpoint is the WebSocket API's stage URL).
    pub fn new(client: aws_sdk_apigatewaymanagement::Client) -> Self {
        ApiGatewayPush { client }
    }
}

impl Push for ApiGatewayPush {
    async fn post(&self, connection_id: &str, payload: &str) -> Result<(), PushError> {
        match self
            .client
            .post_to_connection()
            .connection_id(connection_id)
            .data(Blob::new(payload.as_bytes().to_vec()))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_gone_exception()) => {
                Err(PushError::Gone)
            }
            Err(e) => Err(PushError::Failed(
                aws_sdk_apigatewaymanagement::error::DisplayErrorContext(&e).to_string(),
            )),
        }
    }
}
