//! The completer: the sweeper function's second trigger, the transactions table's stream
//! (filtered to the records a participant asked to recover). A participant that meets the
//! holds of a `STAGING` transaction past its deadline cannot inquire the other participants
//! itself (it has no transport); it marks the record (`TxLog::ask_recovery`) and votes
//! `conflict`. The mark's stream record brings the record here, and its recovery (inquire
//! with prevent, decide, complete) runs at once instead of at the next scheduled pass, which
//! stays the backstop. The local stack runs the same function on its stream poller.

use aws_lambda_events::dynamodb::{Event, EventRecord};
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use tracing::{info, warn};
use twopc_core::coordinator::Coordinator;
use twopc_core::ports::{Clock, Transport, TxLog};
use twopc_core::record::TxRecord;
use twopc_core::rules;
use twopc_fanout::detect::image_json;

/// The record of a stream record the completer acts on ([`rules::completer_recovers`]); None
/// for any other change (or an image that is not a transaction record).
pub fn asked(r: &EventRecord) -> Option<TxRecord> {
    let decode =
        |image| image_json(image).and_then(|json| twopc_dynamo::txlog::record_from_json(json).ok());
    let after = decode(&r.change.new_image)?;
    let asked_before = decode(&r.change.old_image).is_some_and(|b| b.recovery_asked.is_some());
    rules::completer_recovers(asked_before, after.status, after.recovery_asked.is_some())
        .then_some(after)
}

/// Recovers every record of `event` a participant asked for. A recovery that fails (a port
/// error) is reported as a batch item failure, so the mapping delivers it again; one that
/// could not decide yet (a participant did not answer) is left to the sweeper's pass.
pub async fn complete<L: TxLog, T: Transport, C: Clock>(
    coordinator: &Coordinator<L, T, C>,
    event: &Event,
) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    for r in &event.records {
        let Some(record) = asked(r) else { continue };
        let tx_id = record.tx_id.clone();
        // Acted on whatever this clock says of the deadline: the participant that asked found
        // it past on its own (`Coordinator::recover_asked`).
        match coordinator.recover_asked(record).await {
            Ok(after) => {
                info!(tx_id = %tx_id, status = %after.status, "completer: recovery asked for by a participant")
            }
            Err(e) => {
                warn!(tx_id = %tx_id, error = %e, "completer: recovery failed; delivered again");
                let mut f = DynamoDbBatchItemFailure::default();
                f.item_identifier = r.change.sequence_number.clone();
                response.batch_item_failures.push(f);
            }
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use twopc_core::status::TxStatus;

    const ASKED: &str = include_str!("../../../events/sweeper-asked-recovery.json");

    #[test]
    fn the_sample_ask_is_recovered_and_only_the_change_that_set_the_mark() {
        let event: Event = serde_json::from_str(ASKED).expect("a stream batch");
        let record = asked(&event.records[0]).expect("the ask");
        assert_eq!(record.status, TxStatus::Staging);
        assert!(record.recovery_asked.is_some());
        assert_eq!(record.participants.len(), 2);
        // A later change of a record already marked (a repeat) is not an ask.
        let mut again = event.records[0].clone();
        again.change.old_image = again.change.new_image.clone();
        assert!(asked(&again).is_none());
        // Nor is a change of another table's item.
        let other: Event =
            serde_json::from_str(include_str!("../../../events/stream-processor-commit.json"))
                .expect("a stream batch");
        assert!(asked(&other.records[0]).is_none());
    }
}
