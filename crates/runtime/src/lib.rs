//! # twopc-runtime — what the Lambda functions share
//!
//! Every function (`coordinator`, `participant`, `sweeper`, `stream-processor`, `connections`,
//! `ws-authorizer`) is a thin shell: `main` reads the [`config::Config`] for its
//! [`config::Role`] once, installs the logs, loads the AWS configuration once ([`Aws`],
//! [`Clients`]) and wires the logic over them with the functions below. Everything here is
//! wiring; the protocol lives in `twopc-core`.
//!
//! - [`config`]: the typed configuration, every environment variable named once.
//! - [`telemetry`]: JSON logs carrying the transaction id, EMF metrics.
//! - [`transport`]: the `lambda`, `http` and dispatching transports.
//! - [`trace`]: the X-Ray trace header, carried from the invocation through the transports.
//! - [`errors`]: how the participant function reports failures, and how callers read them.
//! - [`record`]: every AWS request recorded (`TWOPC_RECORD_AWS_CALLS`), for the grants check.
#![warn(missing_docs)]

pub mod config;
pub mod record;
pub mod telemetry;
pub mod trace;
pub mod transport;

pub use twopc_function::{call, errors};

use std::sync::Arc;

use twopc_core::coordinator::{Coordinator, CoordinatorConfig};
use twopc_core::direct::DirectTransport;
use twopc_core::participant::Participant;
use twopc_core::ports::SystemClock;
use twopc_core::sweeper::Sweeper;
use twopc_dynamo::{DynamoItems, DynamoNative, DynamoTxLog};

use crate::config::{Config, var};
use crate::record::{Caller, Recorder};
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

/// The AWS configuration every function builds its clients from, loaded once per process from
/// its [`Config`]: the default chain in AWS; with a local endpoint set
/// (`TWOPC_DYNAMODB_ENDPOINT`, `TWOPC_LAMBDA_ENDPOINT`), a fixed region and static dummy
/// credentials ([`twopc_dynamo::aws_loader`]), and each client pointed at its endpoint.
/// DynamoDB Local keeps one database per access key and region, so the functions, the tests and
/// the tools see the same tables. Every client of every service comes from here, so this is
/// where each request is recorded when `TWOPC_RECORD_AWS_CALLS` is set ([`record`]).
#[derive(Clone, Debug)]
pub struct Aws {
    /// The loaded configuration (region, credentials).
    pub sdk: aws_config::SdkConfig,
    dynamodb_endpoint: Option<String>,
    lambda_endpoint: Option<String>,
    recorder: Option<Recorder>,
}

impl Aws {
    /// Loads the configuration for the endpoints `config` names (`None`: the service's own).
    /// When the process's environment sets `TWOPC_RECORD_AWS_CALLS` (a test run's, never the
    /// function's configuration), every client records its calls there as `config`'s role.
    pub async fn load(config: &Config) -> Aws {
        let record = std::env::var_os(var::RECORD_AWS_CALLS).filter(|f| !f.is_empty());
        Aws {
            sdk: twopc_dynamo::aws_loader(config.is_local()).load().await,
            dynamodb_endpoint: config.dynamodb_endpoint.clone(),
            lambda_endpoint: config.lambda_endpoint.clone(),
            recorder: record.map(|folder| {
                Recorder::new(
                    std::path::Path::new(&folder),
                    config,
                    Caller::from(config.role),
                )
            }),
        }
    }

    /// The same configuration, its clients' calls recorded as `caller`'s: the completer in the
    /// sweeper function, and each function the local stack runs in one process.
    pub fn acting_as(&self, caller: Caller) -> Aws {
        Aws {
            recorder: self.recorder.as_ref().map(|r| r.acting_as(caller)),
            ..self.clone()
        }
    }

    /// A DynamoDB client (DynamoDB Local when its endpoint is set).
    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        let mut builder = aws_sdk_dynamodb::config::Builder::from(&self.sdk);
        if let Some(url) = &self.dynamodb_endpoint {
            builder = builder.endpoint_url(url);
        }
        if let Some(r) = &self.recorder {
            builder = builder.interceptor(r.clone());
        }
        aws_sdk_dynamodb::Client::from_conf(builder.build())
    }

    /// A Lambda client (`cargo lambda watch` or `sam local start-lambda` when its endpoint is set).
    pub fn lambda(&self) -> aws_sdk_lambda::Client {
        let mut builder = aws_sdk_lambda::config::Builder::from(&self.sdk);
        if let Some(url) = &self.lambda_endpoint {
            builder = builder.endpoint_url(url);
        }
        if let Some(r) = &self.recorder {
            builder = builder.interceptor(r.clone());
        }
        aws_sdk_lambda::Client::from_conf(builder.build())
    }

    /// A Firehose client (at `endpoint` when given: a local emulator).
    pub fn firehose(&self, endpoint: Option<&str>) -> aws_sdk_firehose::Client {
        let mut builder = aws_sdk_firehose::config::Builder::from(&self.sdk);
        if let Some(url) = endpoint {
            builder = builder.endpoint_url(url);
        }
        if let Some(r) = &self.recorder {
            builder = builder.interceptor(r.clone());
        }
        aws_sdk_firehose::Client::from_conf(builder.build())
    }

    /// A client of the WebSocket API's management endpoint (`PostToConnection`).
    pub fn websocket_management(&self, endpoint: &str) -> aws_sdk_apigatewaymanagement::Client {
        let mut builder =
            aws_sdk_apigatewaymanagement::config::Builder::from(&self.sdk).endpoint_url(endpoint);
        if let Some(r) = &self.recorder {
            builder = builder.interceptor(r.clone());
        }
        aws_sdk_apigatewaymanagement::Client::from_conf(builder.build())
    }
}

/// The AWS clients the protocol's functions use, built once per process and shared by every
/// invocation.
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
        Clients::of(&Aws::load(config).await)
    }

    /// The clients of a loaded configuration.
    pub fn of(aws: &Aws) -> Clients {
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
    let function = config.role.function();
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
