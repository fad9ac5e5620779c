//! # twopc-runtime — what the Lambda functions share
//!
//! The functions (`coordinator`, `participant`, `sweeper`) are thin shells: `main` reads the
//! [`config::Config`] once, installs the logs, builds the clients once ([`Clients`]) and wires
//! the core's logic over them with the functions below. Everything here is wiring; the
//! protocol lives in `twopc-core`.
//!
//! - [`config`]: the typed configuration, every environment variable named once.
//! - [`telemetry`]: JSON logs carrying the transaction id, EMF metrics.
//! - [`transport`]: the `lambda`, `http` and dispatching transports.
//! - [`trace`]: the X-Ray trace header, carried from the invocation through the transports.
//! - [`errors`]: how the participant function reports failures, and how callers read them.
#![warn(missing_docs)]

pub mod call;
pub mod config;
pub mod errors;
pub mod telemetry;
pub mod trace;
pub mod transport;

use std::sync::Arc;

use twopc_core::coordinator::{Coordinator, CoordinatorConfig};
use twopc_core::direct::DirectTransport;
use twopc_core::participant::Participant;
use twopc_core::ports::SystemClock;
use twopc_core::sweeper::Sweeper;
use twopc_dynamo::{DynamoItems, DynamoNative, DynamoTxLog};

use crate::config::{Config, Role};
use crate::telemetry::Metrics;
use crate::transport::{DispatchTransport, HttpTransport, LambdaTransport};

/// The participant logic as the functions run it.
pub type LiveParticipant = Participant<DynamoItems, DynamoTxLog, SystemClock>;
/// The dispatching transport as the functions run it.
pub type LiveTransport = DispatchTransport<DynamoItems, DynamoTxLog, SystemClock>;
/// The coordinator as the functions run it.
pub type LiveCoordinator = Coordinator<DynamoTxLog, LiveTransport, SystemClock>;
/// The recovery pass as the sweeper function runs it.
pub type LiveSweeper = Sweeper<DynamoTxLog, LiveTransport, SystemClock, DynamoItems>;

/// The AWS configuration every function builds its clients from, loaded once per process: the
/// default chain in AWS; with a local endpoint set (`TWOPC_DYNAMODB_ENDPOINT`,
/// `TWOPC_LAMBDA_ENDPOINT`), a fixed region and static dummy credentials
/// ([`twopc_dynamo::aws_loader`]), and each client pointed at its endpoint. DynamoDB Local keeps
/// one database per access key and region, so the functions, the tests and the tools see the
/// same tables. Other services' endpoints (Firehose, the WebSocket management API) come from the
/// SDK's own `AWS_ENDPOINT_URL_*` variables or the function's configuration.
#[derive(Clone, Debug)]
pub struct Aws {
    /// The loaded configuration (region, credentials), for the clients of other services.
    pub sdk: aws_config::SdkConfig,
    dynamodb_endpoint: Option<String>,
    lambda_endpoint: Option<String>,
}

impl Aws {
    /// Loads the configuration for these endpoints (`None`: the service's own).
    pub async fn load(dynamodb_endpoint: Option<&str>, lambda_endpoint: Option<&str>) -> Aws {
        let local = dynamodb_endpoint.is_some() || lambda_endpoint.is_some();
        Aws {
            sdk: twopc_dynamo::aws_loader(local).load().await,
            dynamodb_endpoint: dynamodb_endpoint.map(str::to_owned),
            lambda_endpoint: lambda_endpoint.map(str::to_owned),
        }
    }

    /// Loads the configuration for the endpoints the process environment names (an empty
    /// variable is unset: SAM turns an absent value into `""`). For the functions that read no
    /// [`Config`] (connections, stream-processor).
    pub async fn from_env() -> Aws {
        let get = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let (dynamodb, lambda) = (
            get(config::var::DYNAMODB_ENDPOINT),
            get(config::var::LAMBDA_ENDPOINT),
        );
        Aws::load(dynamodb.as_deref(), lambda.as_deref()).await
    }

    /// A DynamoDB client (DynamoDB Local when its endpoint is set).
    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        let mut builder = aws_sdk_dynamodb::config::Builder::from(&self.sdk);
        if let Some(url) = &self.dynamodb_endpoint {
            builder = builder.endpoint_url(url);
        }
        aws_sdk_dynamodb::Client::from_conf(builder.build())
    }

    /// A Lambda client (`cargo lambda watch` or `sam local start-lambda` when its endpoint is set).
    pub fn lambda(&self) -> aws_sdk_lambda::Client {
        let mut builder = aws_sdk_lambda::config::Builder::from(&self.sdk);
        if let Some(url) = &self.lambda_endpoint {
            builder = builder.endpoint_url(url);
        }
        aws_sdk_lambda::Client::from_conf(builder.build())
    }
}

/// The AWS clients, built once per process and shared by every invocation.
#[derive(Clone, Debug)]
pub struct Clients {
    /// DynamoDB (or DynamoDB Local).
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// Lambda (or `cargo lambda watch`), for the `lambda` transport.
    pub lambda: aws_sdk_lambda::Client,
}

impl Clients {
    /// Builds every client from one [`Aws`] configuration for the configured endpoints.
    pub async fn load(config: &Config) -> Clients {
        let aws = Aws::load(
            config.dynamodb_endpoint.as_deref(),
            config.lambda_endpoint.as_deref(),
        )
        .await;
        Clients {
            dynamodb: aws.dynamodb(),
            lambda: aws.lambda(),
        }
    }
}

/// The transactions table.
pub fn tx_log(config: &Config, clients: &Clients) -> DynamoTxLog {
    DynamoTxLog::new(clients.dynamodb.clone(), &config.transactions_table)
}

/// The participant logic over DynamoDB (what the participant function runs, and what the
/// `direct` transport runs in-process).
pub fn participant(config: &Config, clients: &Clients) -> LiveParticipant {
    Participant::new(
        DynamoItems::new(clients.dynamodb.clone()),
        tx_log(config, clients),
        SystemClock,
        config.participant.clone(),
    )
}

/// The transport that reaches participants of every kind.
pub fn transport(config: &Config, clients: &Clients) -> LiveTransport {
    let function = match config.role {
        Role::Coordinator => "coordinator",
        Role::Participant => "participant",
        Role::Sweeper => "sweeper",
    };
    DispatchTransport::new(
        DirectTransport::new(participant(config, clients)),
        LambdaTransport::new(clients.lambda.clone(), config.call_timeout),
        match &config.http_signing_secret {
            Some(secret) => {
                HttpTransport::new(config.call_timeout).with_signing_secret(secret.clone())
            }
            None => HttpTransport::new(config.call_timeout),
        },
    )
    .with_metrics(Metrics::new(&config.metrics_namespace, function))
}

/// The coordinator over DynamoDB and the dispatching transport.
pub fn coordinator(config: &Config, clients: &Clients) -> LiveCoordinator {
    Coordinator::new(
        tx_log(config, clients),
        transport(config, clients),
        SystemClock,
        CoordinatorConfig {
            id: config.coordinator_id.clone(),
            services: config.services.clone(),
            limits: config.limits.clone(),
            mode: config.commit_mode,
        },
    )
    .with_native(Arc::new(DynamoNative::new(
        clients.dynamodb.clone(),
        tx_log(config, clients),
    )))
}

/// The recovery pass: overdue records through the coordinator's `recover`, expired locks in
/// the configured lock tables through the participant logic.
pub fn sweeper(config: &Config, clients: &Clients) -> LiveSweeper {
    Sweeper::new(
        coordinator(config, clients),
        participant(config, clients),
        SystemClock,
        config.lock_tables.clone(),
        config.sweep.clone(),
    )
}
