//! The local stack's parts, wired once: the configuration (the demo's, read through the same
//! settings the coordinator and the sweeper functions read from their environment), the clients, the tables and
//! seed, the coordinator's handler, the sweeper, the WebSocket gateway and the stream poller.

use std::sync::Arc;

use coordinator::handler::App;
use payments::CardGateway;
use twopc_core::ids::TxId;
use twopc_dynamo::connections::DynamoConnections;
use twopc_dynamo::tables::ensure_table;
use twopc_dynamo::txlog::DynamoTxLog;
use twopc_function::var;
use twopc_participant_sdk::{DynamoParticipant, DynamoStates, SdkParticipant};
use twopc_runtime::config::{
    CONNECTION_TTL_SECS, ConnectionsSettings, CoordinatorSettings, Settings, SweeperSettings,
};
use twopc_runtime::record::Caller;
use twopc_runtime::telemetry::Metrics;
use twopc_runtime::{Aws, Clients, LiveParticipant, LiveSweeper};

use super::demo::{Demo, PAYMENTS};
use super::gateway::Gateway;
use super::{ServeArgs, ServeError, streams};

/// Everything the routes use.
pub struct Stack {
    /// The WebSocket gateway.
    pub gateway: Arc<Gateway>,
    /// The coordinator function's handler state.
    pub app: App,
    /// DynamoDB, for item browsing.
    pub client: aws_sdk_dynamodb::Client,
    /// One recovery pass.
    pub sweeper: LiveSweeper,
    /// The participant logic, for reading items (not recorded: the stack's own browsing).
    pub participant: LiveParticipant,
    /// The custom participant (served under `demo::PAYMENTS_PATH`).
    pub payments: DynamoParticipant<CardGateway>,
    /// Its simulated card gateway.
    pub cards: CardGateway,
    /// The secret the coordinator signs its requests to `payments` (and any `--http-participant`)
    /// with: new every run, or `--signing-secret-file`'s.
    pub secret: twopc_core::signing::Secret,
    /// The demo's services and tables.
    pub demo: Demo,
    /// The coordinator's settings (the services, the body limit).
    pub settings: CoordinatorSettings,
    /// The stream poller and the lake's roller: stopped with the server, before DynamoDB Local
    /// is.
    pub streams: streams::Streams,
}

impl Stack {
    /// Configures the demo against `endpoint`, creates and seeds its tables, starts the stream
    /// poller (pushing to the gateway at `url`), and wires the rest.
    pub async fn build(args: &ServeArgs, endpoint: &str, url: &str) -> Result<Stack, ServeError> {
        let demo = Demo {
            prefix: args.table_prefix.clone(),
            url: url.to_owned(),
            custom: args
                .http_participants
                .iter()
                .map(|p| (p.name.clone(), p.url.clone()))
                .collect(),
        };
        let secret = secret(args)?;
        let (settings, sweeper, aws) = configure(args, &demo, endpoint, &secret).await?;
        let clients = Clients::of(&aws);
        let tools = twopc_dynamo::client(Some(endpoint)).await;
        create_and_seed(args, &demo, &tools, endpoint).await?;
        let gateway = websocket_gateway(args, &demo, &aws)?;
        let completer = Arc::new(twopc_runtime::coordinator(
            &sweeper,
            &Clients::of(&aws.acting_as(Caller::Completer)),
        ));
        let streams = streams::start(
            args,
            &demo,
            &tools,
            &aws.acting_as(Caller::StreamProcessor),
            endpoint,
            url,
            completer,
        )
        .await?;
        let cards = CardGateway::default();
        let payments = SdkParticipant::builder(cards.clone())
            .states(DynamoStates::new(tools.clone(), demo.table(PAYMENTS)))
            .log(DynamoTxLog::new(
                tools.clone(),
                &settings.protocol.transactions_table,
            ))
            .build();
        let browsing = Clients {
            dynamodb: tools.clone(),
            ..clients.clone()
        };
        Ok(Stack {
            payments,
            cards,
            secret: twopc_core::signing::Secret::new(secret),
            gateway,
            client: tools,
            app: App::new(&settings, &clients, Metrics::in_memory("twopc-serve")),
            sweeper: twopc_runtime::sweeper(
                &sweeper,
                &Clients::of(&aws.acting_as(Caller::Sweeper)),
            ),
            participant: twopc_runtime::participant(&settings.protocol, &browsing),
            demo,
            settings,
            streams,
        })
    }
}

/// The secret shared with participants of the user's own, or (only this process signs and
/// checks) a new random one every run.
fn secret(args: &ServeArgs) -> Result<String, ServeError> {
    Ok(match &args.signing_secret_file {
        Some(path) => super::read_secret(path)?,
        None => format!("{}{}", TxId::random(), TxId::random()),
    })
}

/// The demo's variables read as the coordinator and the sweeper read theirs, and the AWS
/// configuration over them.
async fn configure(
    args: &ServeArgs,
    demo: &Demo,
    endpoint: &str,
    secret: &str,
) -> Result<(CoordinatorSettings, SweeperSettings, Aws), ServeError> {
    let mut variables = demo.variables(endpoint, secret);
    variables.insert(var::COMMIT_MODE, args.commit_mode.clone());
    let lookup = |name: &str| variables.get(name).cloned();
    let settings = CoordinatorSettings::from_lookup(lookup)?;
    let sweeper = SweeperSettings::from_lookup(lookup)?;
    // Each part acts as the function that runs it in AWS, and its calls are recorded as that
    // function's, the resources named as each function's settings name them; the stack's own
    // requests (its tables and seed, item browsing, the streams' positions, the card payments'
    // service) are no function's: never recorded.
    let resources = [
        settings.resources(),
        sweeper.resources(),
        ConnectionsSettings::from_lookup(lookup)?.resources(),
    ]
    .concat();
    let aws = Aws::load_named(&settings.shared, resources).await;
    Ok((settings, sweeper, aws))
}

/// Creates the demo's tables if missing, and writes its items unless told not to.
async fn create_and_seed(
    args: &ServeArgs,
    demo: &Demo,
    tools: &aws_sdk_dynamodb::Client,
    endpoint: &str,
) -> Result<(), ServeError> {
    eprintln!("- creating tables {}* if missing", args.table_prefix);
    for spec in demo.tables() {
        ensure_table(tools, &spec)
            .await
            .map_err(|source| ServeError::Table {
                table: spec.name.clone(),
                endpoint: endpoint.to_owned(),
                source,
            })?;
    }
    if !args.no_seed {
        let written = demo.seed(tools).await.map_err(ServeError::Seed)?;
        if written > 0 {
            eprintln!("- seeded {written} demo items");
        }
    }
    Ok(())
}

/// The WebSocket gateway: its subscriptions as the connections function keeps them, its
/// tokens from the local issuer (or the shared demo token).
fn websocket_gateway(args: &ServeArgs, demo: &Demo, aws: &Aws) -> Result<Arc<Gateway>, ServeError> {
    let issuer = twopc_authorizer::local::LocalIssuer::load_or_create(&args.data_dir)
        .map_err(ServeError::SigningKey)?;
    Ok(Arc::new(Gateway::new(
        DynamoConnections::new(
            aws.acting_as(Caller::Connections).dynamodb(),
            demo.connections_table(),
            CONNECTION_TTL_SECS,
        ),
        issuer,
        args.ws_token.clone(),
    )))
}
