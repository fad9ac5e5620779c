//! Native: one `TransactWriteItems` with the coordinator's commit writes under its prepare
//! conditions.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use twopc_core::ids::TxId;
use twopc_core::layout;

use super::outcome::AttemptEnd;
use super::{Driver, Reason};
use crate::workload::{Transfer, account_id};

impl Driver {
    /// One native `TransactWriteItems` of the transfer's legs. What DynamoDB refuses, it did
    /// not apply: a cancellation or an error is never an unknown outcome here.
    pub(super) async fn native(&self, t: &Transfer) -> AttemptEnd {
        let tx = TxId::random().to_string();
        let legs = t
            .debits
            .iter()
            .map(|k| (&self.tables.accounts, *k, true))
            .chain(t.credits.iter().map(|k| (&self.tables.wallets, *k, false)));
        let mut request = self.client.transact_write_items();
        for (table, k, debit) in legs {
            let update = match leg(table, k, (t.amount, debit), &tx) {
                Ok(u) => u,
                Err(e) => return AttemptEnd::Failed(e, None),
            };
            request = request.transact_items(TransactWriteItem::builder().update(update).build());
        }
        let e = match request.send().await {
            Ok(_) => return AttemptEnd::Committed,
            Err(e) => e,
        };
        let aborted = |reason, codes: &str| AttemptEnd::Aborted(reason, codes.to_owned());
        match e.as_service_error() {
            Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
                let codes: Vec<&str> = c
                    .cancellation_reasons()
                    .iter()
                    .filter_map(|r| r.code())
                    .filter(|c| *c != "None")
                    .collect();
                aborted(Reason::of_codes(codes.iter().copied()), &codes.join(","))
            }
            Some(TransactWriteItemsError::TransactionInProgressException(_)) => {
                aborted(Reason::Conflict, "TransactionInProgress")
            }
            Some(TransactWriteItemsError::ProvisionedThroughputExceededException(_)) => {
                aborted(Reason::Throttled, "ProvisionedThroughputExceeded")
            }
            _ => AttemptEnd::Failed(DisplayErrorContext(&e).to_string(), None),
        }
    }
}

/// Names and values of a native update: `#b` balance, `#v` txVersion, `#l` lastTx, `#id`.
fn expression(
    delta: i128,
    require: Option<u64>,
    tx: Option<&str>,
) -> (HashMap<String, String>, HashMap<String, AttributeValue>) {
    let mut names = HashMap::from([
        ("#id".to_owned(), "id".to_owned()),
        ("#b".to_owned(), "balance".to_owned()),
        ("#v".to_owned(), layout::VERSION.to_owned()),
    ]);
    let mut values = HashMap::from([
        (":d".to_owned(), AttributeValue::N(delta.to_string())),
        (":z".to_owned(), AttributeValue::N("0".into())),
        (":one".to_owned(), AttributeValue::N("1".into())),
    ]);
    if let Some(a) = require {
        values.insert(":a".into(), AttributeValue::N(a.to_string()));
    }
    if let Some(tx) = tx {
        names.insert("#l".into(), layout::LAST_TX.into());
        values.insert(":tx".into(), AttributeValue::S(tx.into()));
    }
    (names, values)
}

/// One leg of the native transaction: the coordinator's commit writes (balance, txVersion,
/// lastTx) under the coordinator's prepare conditions (item
/// exists; a debit keeps the balance non-negative).
fn leg(table: &str, k: u32, (amount, debit): (u64, bool), tx: &str) -> Result<Update, String> {
    let delta = if debit {
        -i128::from(amount)
    } else {
        i128::from(amount)
    };
    let (names, values) = expression(delta, debit.then_some(amount), Some(tx));
    let condition = if debit {
        "attribute_exists(#id) AND #b >= :a"
    } else {
        "attribute_exists(#id)"
    };
    let set = "SET #b = #b + :d, #v = if_not_exists(#v, :z) + :one, #l = :tx".to_owned();
    Update::builder()
        .table_name(table)
        .key("id", AttributeValue::S(account_id(k)))
        .update_expression(set)
        .condition_expression(condition)
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values(Some(values))
        .build()
        .map_err(|e| e.to_string())
}
