//! The payments service over http: the SDK's signed router (`POST /prepare|commit|abort`) on
//! the address given as the first argument (default `127.0.0.1:3001`), its per-transaction
//! state in the table `TWOPC_PARTICIPANT_TABLE` (created if missing), the coordinator's record
//! read from `TWOPC_TRANSACTIONS_TABLE`, requests checked with `TWOPC_HTTP_SIGNING_SECRET`, and
//! a sweep of states whose coordinator went silent every 5 s; the gateway's ledger at
//! `GET /authorisations`.

use std::time::Duration;

use payments::Gateway;
use twopc_core::ports::SystemClock;
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};
use twopc_participant_sdk::http::{HttpConfig, router};
use twopc_participant_sdk::{DynamoStates, SdkConfig, SdkParticipant};
use twopc_runtime::Clients;
use twopc_runtime::config::{Config, Role, var};
use twopc_runtime::telemetry::init_tracing;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    init_tracing();
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:3001".into());
    let config = Config::from_env(Role::Participant).expect("payments configuration");
    let secret = config.http_signing_secret.clone().unwrap_or_else(|| {
        panic!(
            "{} is not set: payments refuses unsigned requests",
            var::HTTP_SIGNING_SECRET
        )
    });
    let clients = Clients::load(&config).await;
    let table = config.participant_table().to_owned();
    ensure_table(
        &clients.dynamodb,
        &TableSpec {
            name: table.clone(),
            kind: TableKind::ParticipantState,
        },
    )
    .await
    .expect("the payments state table");
    let gateway = Gateway::default();
    let participant = SdkParticipant::new(
        gateway.clone(),
        DynamoStates::new(clients.dynamodb.clone(), table),
        twopc_runtime::tx_log(&config, &clients),
        SystemClock,
        SdkConfig::default(),
    );
    let sweeper = participant.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            if let Err(e) = sweeper.sweep(100).await {
                tracing::warn!(error = %e, "payments sweep failed; the next one retries");
            }
        }
    });
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    tracing::info!(%addr, "payments listening");
    let app = router(participant, HttpConfig::new(secret)).merge(payments::routes(gateway));
    axum::serve(listener, app).await
}
