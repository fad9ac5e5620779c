//! # twopc-runtime — what the Lambda functions share
//!
//! Every function (`coordinator`, `participant`, `sweeper`, `stream-processor`, `connections`,
//! `ws-authorizer`) is a thin shell: `main` reads its role's settings once
//! ([`config::Settings::from_env`]), installs the logs, loads the AWS configuration once
//! ([`Aws`], [`Clients`]) and wires the logic over them with the functions below. Everything
//! here is wiring; the protocol lives in `twopc-core`.
//!
//! - [`config`]: what every function shares and one settings type per role.
//! - [`telemetry`]: JSON logs carrying the transaction id, EMF metrics.
//! - [`transport`]: the `lambda`, `http` and dispatching transports.
//! - [`trace`]: the X-Ray trace header, carried from the invocation through the transports.
//! - [`record`]: every AWS request recorded (`TWOPC_RECORD_AWS_CALLS`), for the grants check.
#![warn(missing_docs)]

pub mod config;
pub mod record;
pub mod telemetry;
pub mod trace;
pub mod transport;

use std::sync::Arc;

use twopc_core::coordinator::Coordinator;
use twopc_core::direct::DirectTransport;
use twopc_core::participant::Participant;
use twopc_core::ports::SystemClock;
use twopc_core::sweeper::Sweeper;
use twopc_dynamo::{DynamoItems, DynamoNative, DynamoTxLog};

use twopc_function::var;

use crate::config::{Protocol, RunsCoordinator, Settings, Shared, SweeperSettings};
use crate::record::{Caller, Recorder};
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
/// its settings: the default chain in AWS; with a local endpoint set
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
    /// Loads the configuration for the endpoints `settings` name (`None`: the service's own).
    /// When the process's environment sets `TWOPC_RECORD_AWS_CALLS` (a test run's, never the
    /// function's configuration), every client records its calls there as `settings`' role.
    pub async fn load(settings: &impl Settings) -> Aws {
        Aws::load_named(settings.shared(), settings.resources()).await
    }

    /// [`Aws::load`] for a process that runs several roles (the local stack): `resources` are
    /// every role's, each with the variable that named it.
    pub async fn load_named(shared: &Shared, resources: Vec<(String, &'static str)>) -> Aws {
        let record = std::env::var_os(var::RECORD_AWS_CALLS).filter(|f| !f.is_empty());
        Aws {
            sdk: twopc_dynamo::aws_loader(shared.is_local()).load().await,
            dynamodb_endpoint: shared.dynamodb_endpoint.clone(),
            lambda_endpoint: shared.lambda_endpoint.clone(),
            recorder: record.map(|folder| {
                Recorder::new(
                    std::path::Path::new(&folder),
                    resources,
                    Caller::from(shared.role),
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
    pub async fn load(settings: &impl Settings) -> Clients {
        Clients::of(&Aws::load(settings).await)
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
pub fn tx_log(protocol: &Protocol, clients: &Clients) -> DynamoTxLog {
    DynamoTxLog::new(clients.dynamodb.clone(), &protocol.transactions_table)
}

/// The participant logic over DynamoDB (what the participant function runs, and what the
/// `direct` transport runs in-process).
pub fn participant(protocol: &Protocol, clients: &Clients) -> LiveParticipant {
    Participant::new(
        DynamoItems::new(clients.dynamodb.clone()),
        tx_log(protocol, clients),
        SystemClock,
        protocol.participant.clone(),
    )
}

/// The transport that reaches participants of every kind.
pub fn transport(settings: &impl RunsCoordinator, clients: &Clients) -> LiveTransport {
    let calls = settings.calls();
    let http = HttpTransport::new(calls.timeout);
    DispatchTransport::new(
        DirectTransport::new(participant(settings.protocol(), clients)),
        LambdaTransport::new(clients.lambda.clone(), calls.timeout),
        match &calls.signing_secret {
            Some(secret) => http.with_signing_secret(secret.clone()),
            None => http,
        },
    )
    .with_metrics(settings.shared().metrics())
}

/// The coordinator over DynamoDB and the dispatching transport.
pub fn coordinator(settings: &impl RunsCoordinator, clients: &Clients) -> LiveCoordinator {
    let protocol = settings.protocol();
    Coordinator::new(
        tx_log(protocol, clients),
        transport(settings, clients),
        SystemClock,
        settings.coordinator_config().clone(),
    )
    .with_native(Arc::new(DynamoNative::new(
        clients.dynamodb.clone(),
        tx_log(protocol, clients),
    )))
}

/// The recovery pass: overdue records through the coordinator's `recover`, expired locks in
/// the configured lock tables through the participant logic.
pub fn sweeper(settings: &SweeperSettings, clients: &Clients) -> LiveSweeper {
    Sweeper::new(
        coordinator(settings, clients),
        participant(&settings.protocol, clients),
        SystemClock,
        settings.lock_tables.clone(),
        settings.sweep.clone(),
    )
}
