//! The payments service over http: the SDK's signed router (`POST /prepare|commit|abort|inquire`)
//! on the address given as the first argument (default `127.0.0.1:3001`), its per-transaction
//! state in the table `TWOPC_PARTICIPANT_TABLE` (created if missing), the coordinator's record
//! read from `TWOPC_TRANSACTIONS_TABLE`, requests checked with `TWOPC_HTTP_SIGNING_SECRET`, and
//! a sweep of states whose coordinator went silent every 5 s; the gateway's ledger at
//! `GET /authorisations`.

use std::time::Duration;

use payments::CardGateway;
use twopc_participant_sdk::http::{HttpConfig, router};
use twopc_participant_sdk::{SdkParticipant, StartError, init_tracing, serve_http};

#[tokio::main]
async fn main() -> Result<(), StartError> {
    init_tracing();
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:3001".into());
    let http = HttpConfig::from_env()?;
    let gateway = CardGateway::default();
    let participant = SdkParticipant::builder(gateway.clone())
        .dynamodb_from_env()
        .await?
        .build();
    participant.store().create_table_if_missing().await?;
    participant.spawn_sweeper(Duration::from_secs(5));
    let app = router(participant, http).merge(payments::routes(gateway));
    serve_http(&addr, app).await
}
