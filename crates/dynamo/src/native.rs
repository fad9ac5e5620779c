//! Native transactions ([`twopc_core::ports::NativeStore`]): the record's put and every item's
//! write in one `TransactWriteItems`. Each item's condition spells
//! [`twopc_core::rules::native_write`] (no lock, no placeholder, no reservation standing; the
//! shape the operation needs; no live heat mark) and the operation's own conditions, as the prepare's condition
//! does; its update applies the operation with the commit marks, as a commit does, removes the
//! idle escrow of each attribute it adds to (no reservation stands), and leaves the fence alone
//! (a native transaction never prepares, so nothing of it can land late).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    CancellationReason, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use twopc_core::layout::{HOT_UNTIL, LOCK, PLACEHOLDER, RESERVATIONS, TOMBSTONE, TX_ID};
use twopc_core::ports::{
    NativeFuture, NativeItem, NativeOutcome, NativeStore, NativeWrite, PortError, TxLog,
};
use twopc_core::record::TxRecord;

use crate::clauses::{
    commit_marks, first_key_name, key_item, names, number, op_conditions, op_effects,
};
use crate::error::{classify, corrupt};
use crate::expr::{Expr, update_expression};
use crate::state::item_state;
use crate::txlog::{DynamoTxLog, record_from_item};

/// Native transactions over the transactions table of `log` and any participant table.
#[derive(Clone, Debug)]
pub struct DynamoNative {
    client: Client,
    log: DynamoTxLog,
}

impl DynamoNative {
    /// Through `client`, putting records as `log` does.
    pub fn new(client: Client, log: DynamoTxLog) -> Self {
        DynamoNative { client, log }
    }

    fn record_put(&self, record: &TxRecord) -> Result<TransactWriteItem, PortError> {
        let mut e = Expr::new();
        let condition = format!("attribute_not_exists({})", e.name(TX_ID));
        let put = Put::builder()
            .table_name(self.log.table())
            .set_item(Some(self.log.to_item(record)?))
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|err| corrupt("building a native record put", err.to_string()))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    async fn commit(
        &self,
        record: &TxRecord,
        writes: &[NativeWrite<'_>],
    ) -> Result<NativeOutcome, PortError> {
        let tx = &record.tx_id;
        let mut items = vec![self.record_put(record)?];
        for w in writes {
            items.push(item_write(w, record)?);
        }
        let sent = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            // Retries of this request (the SDK's, after a timeout) apply it at most once.
            .client_request_token(tx.as_str())
            .send()
            .await;
        let err = match sent {
            Ok(_) => return Ok(NativeOutcome::Committed),
            Err(err) => err,
        };
        let context = || format!("committing {tx} natively");
        match err.as_service_error() {
            Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
                cancelled(c.cancellation_reasons(), writes.len(), context)
            }
            // The same token with other parameters: an earlier request of this transaction
            // (the record says what became of it).
            Some(TransactWriteItemsError::IdempotentParameterMismatchException(_)) => {
                let found = self.log.get(tx).await?;
                Ok(NativeOutcome::Cancelled {
                    record: found.map(Box::new),
                    items: vec![NativeItem::Held; writes.len()],
                })
            }
            _ => Err(classify(context(), err)),
        }
    }
}

/// The write of one item: the native rule and the operation's conditions; the operation and
/// the commit marks.
fn item_write(w: &NativeWrite<'_>, record: &TxRecord) -> Result<TransactWriteItem, PortError> {
    let (key, op) = (w.key, w.op);
    let mut e = Expr::new();
    let k = e.name(first_key_name(key));
    let (lock, tomb) = (e.name(LOCK), e.name(TOMBSTONE));
    let mut conds = vec![];
    let (mut set, mut remove) = (vec![], vec![]);
    if op.creates() {
        // Absent, or a tombstone (never locked, never reserved): its fence and horizon stay.
        conds.push(format!(
            "(attribute_not_exists({k}) OR (attribute_exists({tomb}) AND attribute_not_exists({lock})))"
        ));
        remove.push(tomb);
    } else {
        let (ph, n) = (e.name(PLACEHOLDER), e.name(RESERVATIONS));
        conds.push(format!(
            "attribute_exists({k}) AND attribute_not_exists({ph}) AND attribute_not_exists({tomb}) AND attribute_not_exists({lock}) AND (attribute_not_exists({n}) OR {n} = {})",
            e.value(number(0))
        ));
    }
    // No live heat mark: where transactions were seen contending, the protocol reserves the
    // item instead (`rules::native_write`, `Heated`). Read at the record's `createdAt`, as the
    // coordinator reads a refusal back.
    let hot = e.name(HOT_UNTIL);
    conds.push(format!(
        "(attribute_not_exists({hot}) OR {hot} <= {})",
        e.value(number(record.created_at))
    ));
    conds.extend(op_conditions(&mut e, key, op));
    op_effects(&mut e, key, op, &mut set, &mut remove);
    // No reservation stands (the condition): the escrow of what it adds to is idle, and would
    // be stale once the value moves. Gone, the next reservation starts it from the value.
    for name in op.add.keys() {
        for escrowed in names(name).all() {
            remove.push(e.name(escrowed));
        }
    }
    set.extend(commit_marks(&mut e, &record.tx_id));
    let update = Update::builder()
        .table_name(w.table)
        .set_key(Some(key_item(key)))
        .update_expression(update_expression(&set, &remove))
        .condition_expression(conds.join(" AND "))
        .set_expression_attribute_names(e.names())
        .set_expression_attribute_values(e.values())
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(|err| corrupt("building a native item write", err.to_string()))?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// What each action of a cancelled transaction found (the record's put first).
fn cancelled(
    reasons: &[CancellationReason],
    writes: usize,
    context: impl Fn() -> String,
) -> Result<NativeOutcome, PortError> {
    let code = |r: &CancellationReason| r.code().unwrap_or("None").to_owned();
    if reasons.len() != writes + 1 {
        return Err(corrupt(
            context(),
            format!(
                "{} cancellation reasons for {} actions",
                reasons.len(),
                writes + 1
            ),
        ));
    }
    let record = match code(&reasons[0]).as_str() {
        "ConditionalCheckFailed" => {
            let item = reasons[0].item().cloned().unwrap_or_default();
            Some(Box::new(record_from_item(&item)?))
        }
        _ => None,
    };
    let mut items = Vec::with_capacity(writes);
    for r in &reasons[1..] {
        items.push(match code(r).as_str() {
            "None" => NativeItem::Held,
            "ConditionalCheckFailed" => NativeItem::Refused(
                r.item()
                    .filter(|i| !i.is_empty())
                    .map(|i| item_state(i).map(Box::new))
                    .transpose()?,
            ),
            "TransactionConflict" => NativeItem::Busy,
            "ThrottlingError" | "ProvisionedThroughputExceeded" | "RequestLimitExceeded" => {
                return Err(PortError::Retryable {
                    context: context(),
                    source: format!("{}: {}", code(r), r.message().unwrap_or_default()).into(),
                });
            }
            other => {
                return Err(PortError::Invalid {
                    context: context(),
                    message: format!("{other}: {}", r.message().unwrap_or_default()),
                });
            }
        });
    }
    Ok(NativeOutcome::Cancelled { record, items })
}

impl NativeStore for DynamoNative {
    fn commit_at_once<'a>(
        &'a self,
        record: &'a TxRecord,
        writes: &'a [NativeWrite<'a>],
    ) -> NativeFuture<'a> {
        Box::pin(self.commit(record, writes))
    }
}
