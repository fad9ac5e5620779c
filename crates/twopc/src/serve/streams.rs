//! The stream poller feeding the stream processor, as Lambda's event source mappings would: the
//! same processor code the `stream-processor` function runs, with the data lake as files and
//! pushes through the local WebSocket gateway's management API; and the transactions table's
//! stream to the completer too, as the `sweeper` function's second mapping would.

use std::sync::Arc;
use std::time::Duration;

use twopc_dynamo::connections::DynamoConnections;
use twopc_fanout::detect::{TableRole, Tables};
use twopc_fanout::poll::Poller;
use twopc_fanout::processor::Processor;
use twopc_fanout::sinks::FileLake;

use super::demo::Demo;
use super::{ServeArgs, ServeError};

/// Starts polling every table's stream in the background; the handle stops it.
pub async fn start(
    args: &ServeArgs,
    demo: &Demo,
    client: &aws_sdk_dynamodb::Client,
    endpoint: &str,
    url: &str,
    completer: Arc<twopc_runtime::LiveCoordinator>,
) -> Result<tokio::task::AbortHandle, ServeError> {
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
    let mut arns = vec![];
    for table in tables.keys() {
        arns.push(
            twopc_fanout::poll::stream_arn(client, table)
                .await
                .map_err(ServeError::Streams)?,
        );
    }
    let transactions = twopc_fanout::poll::stream_arn(client, &demo.transactions_table())
        .await
        .map_err(ServeError::Streams)?;
    let lake = FileLake::new(
        &args.lake_dir,
        format!("twopc-serve-{}", std::process::id()),
    );
    let subscriptions = DynamoConnections::new(client.clone(), demo.connections_table(), 7_200);
    let push = twopc_fanout::poll::local_push(url).await;
    let processor = Arc::new(Processor::new(tables, lake, subscriptions, push));
    let checkpoints = args.data_dir.join(format!(
        "streams-{}.json",
        args.table_prefix.trim_end_matches('-')
    ));
    let poller = Poller::new(
        twopc_fanout::poll::local_client(endpoint).await,
        arns,
        Some(checkpoints),
    );
    let task = tokio::spawn(poller.run(
        Duration::from_millis(args.stream_poll_ms.max(10)),
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
    ));
    Ok(task.abort_handle())
}
