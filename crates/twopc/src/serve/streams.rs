//! The stream poller feeding the stream processor, as Lambda's event source mappings would: the
//! same processor code the `stream-processor` function runs, with the data lake as Parquet files
//! rolled every `--lake-buffer-ms` (as Firehose rolls objects) and pushes through the local
//! WebSocket gateway's management API. The stream positions are saved after each roll, not after
//! each batch: a crash redelivers what was not yet in a file (twopc_fanout::parquet_lake). The
//! transactions table's stream goes to the completer too, as the `sweeper` function's second
//! mapping would (`sweeper::completer`: the records a participant asked to recover).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::{info, warn};

use twopc_dynamo::connections::DynamoConnections;
use twopc_fanout::detect::{TableRole, Tables};
use twopc_fanout::parquet_lake::{ParquetLake, roll_and_checkpoint};
use twopc_fanout::poll::Checkpointer;
use twopc_fanout::poll::Poller;
use twopc_fanout::processor::Processor;
use twopc_runtime::config::CONNECTION_TTL_SECS;

use super::demo::Demo;
use super::{ServeArgs, ServeError};
use twopc_core::ports::{Clock, SystemClock};

/// The stream poller and the lake's roller, running in the background.
pub struct Streams {
    poller: Mutex<Option<tokio::task::JoinHandle<()>>>,
    stop: tokio::sync::watch::Sender<bool>,
    roller: tokio::task::AbortHandle,
    lake: Arc<ParquetLake>,
    checkpoints: Checkpointer,
    /// One roll at a time (a roll runs on a blocking thread, which outlives an aborted task).
    rolling: Arc<Mutex<()>>,
}

impl Streams {
    /// How long a stop waits for the poller's last pass.
    const STOP_WITHIN: Duration = Duration::from_secs(10);

    /// Stops polling once every stream is read to its end (at most [`Self::STOP_WITHIN`]), then
    /// rolls what is buffered and saves the positions: a restart after a clean stop redelivers
    /// nothing.
    pub async fn stop(&self) {
        let _ = self.stop.send(true);
        let poller = self
            .poller
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(mut poller) = poller
            && tokio::time::timeout(Self::STOP_WITHIN, &mut poller)
                .await
                .is_err()
        {
            warn!(
                "the stream poller did not catch up in time; the rest is redelivered at the next start"
            );
            poller.abort();
        }
        self.roller.abort();
        let (lake, checkpoints, rolling) = (
            self.lake.clone(),
            self.checkpoints.clone(),
            self.rolling.clone(),
        );
        let _ = tokio::task::spawn_blocking(move || roll(&lake, &checkpoints, &rolling)).await;
    }
}

fn roll(lake: &ParquetLake, checkpoints: &Checkpointer, rolling: &Mutex<()>) {
    let _one = rolling
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match roll_and_checkpoint(lake, checkpoints) {
        Ok(r) if r.rows > 0 => info!(rows = r.rows, files = r.files.len(), "data lake rolled"),
        Ok(_) => {}
        Err(e) => {
            warn!(error = %e, "rolling the data lake failed; the rows wait for the next roll")
        }
    }
}

/// Starts polling every table's stream, and rolling the lake, in the background.
/// `client` finds the streams (the event source mappings' work); `aws` is the stream
/// processor's.
pub async fn start(
    args: &ServeArgs,
    demo: &Demo,
    client: &aws_sdk_dynamodb::Client,
    aws: &twopc_runtime::Aws,
    endpoint: &str,
    url: &str,
    completer: Arc<twopc_runtime::LiveCoordinator>,
) -> Result<Streams, ServeError> {
    let tables = tables_of(demo);
    let mut arns = vec![];
    for table in tables.keys() {
        arns.push(stream_arn(client, table).await?);
    }
    let transactions = stream_arn(client, &demo.transactions_table()).await?;
    let lake = open_lake(args);
    let subscriptions = DynamoConnections::new(
        aws.dynamodb(),
        demo.connections_table(),
        CONNECTION_TTL_SECS,
    );
    let push = twopc_fanout::sinks::ApiGatewayPush::new(aws.websocket_management(url));
    let processor = Arc::new(Processor::new(tables, lake.clone(), subscriptions, push));
    let checkpoint_file = args.data_dir.join(format!(
        "streams-{}.json",
        args.table_prefix.trim_end_matches('-')
    ));
    let poller = Poller::new(
        twopc_fanout::poll::local_client(endpoint).await,
        arns,
        Some(checkpoint_file),
    );
    let checkpoints = poller
        .defer_checkpoints()
        .ok_or(ServeError::NoCheckpointFile)?;
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let every = Duration::from_millis(args.stream_poll_ms.max(10));
    let task = tokio::spawn(poller.run(
        every,
        move |event| {
            let (processor, completer) = (processor.clone(), completer.clone());
            let of_transactions = event
                .records
                .first()
                .is_some_and(|r| r.event_source_arn.as_deref() == Some(transactions.as_str()));
            async move {
                let mut done = processor.handle(&event).await;
                if of_transactions {
                    let completed = sweeper::completer::complete(&completer, &event).await;
                    // Delivered again from the earliest failure of either.
                    done.batch_item_failures
                        .extend(completed.batch_item_failures);
                }
                done
            }
        },
        stopping,
    ));
    let rolling = Arc::new(Mutex::new(()));
    let every = Duration::from_millis(args.lake_buffer_ms.max(10));
    let roller = spawn_roller(&lake, &checkpoints, &rolling, every);
    Ok(Streams {
        poller: Mutex::new(Some(task)),
        stop,
        roller,
        lake,
        checkpoints,
        rolling,
    })
}

/// The demo's tables as the stream processor reads them: the transactions table and each
/// table's participant.
fn tables_of(demo: &Demo) -> Tables {
    let mut tables: Tables = [(demo.transactions_table(), TableRole::Transactions)].into();
    for (name, service) in demo.services() {
        let Some(key) = service.key else { continue };
        tables.insert(
            demo.table(&name),
            TableRole::Participant {
                participant: name.clone(),
                key,
            },
        );
    }
    tables
}

async fn stream_arn(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<String, ServeError> {
    twopc_fanout::poll::stream_arn(client, table)
        .await
        .map_err(ServeError::Streams)
}

/// The lake, its files named once per run (a pid may come again: files never collide across
/// restarts), the temporary files a crash left removed.
fn open_lake(args: &ServeArgs) -> Arc<ParquetLake> {
    let started = SystemClock.now_ms();
    let lake = Arc::new(ParquetLake::new(
        &args.lake_dir,
        format!("twopc-serve-{started}-{}", std::process::id()),
    ));
    let left = lake.clean();
    if left > 0 {
        info!(
            files = left,
            "removed temporary lake files a crash left (their rows are redelivered)"
        );
    }
    lake
}

/// Rolls the lake `every` so long, on a blocking thread, one roll at a time.
fn spawn_roller(
    lake: &Arc<ParquetLake>,
    checkpoints: &Checkpointer,
    rolling: &Arc<Mutex<()>>,
    every: Duration,
) -> tokio::task::AbortHandle {
    let (lake, checkpoints, rolling) = (lake.clone(), checkpoints.clone(), rolling.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let (lake, checkpoints, rolling) = (lake.clone(), checkpoints.clone(), rolling.clone());
            let _ = tokio::task::spawn_blocking(move || roll(&lake, &checkpoints, &rolling)).await;
        }
    })
    .abort_handle()
}
