//! One conditional `UpdateItem` of a participant item, and one strongly consistent read: the
//! two calls every participant write is made of, with a refused condition answered by the item
//! as it was.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use twopc_core::item::Key;
use twopc_core::ports::{CompleteWrite, PortError};

use crate::clauses::key_item;
use crate::codec::Item;
use crate::error::classify;
use crate::expr::Expr;
use crate::state::item_state;

/// One conditional `UpdateItem`.
pub(crate) struct Write {
    pub(crate) update: String,
    pub(crate) condition: String,
    pub(crate) returns: ReturnValue,
}

pub(crate) enum Outcome {
    Written(Option<Item>),
    Refused(Option<Item>),
}

pub(crate) async fn write(
    client: &Client,
    table: &str,
    key: &Key,
    e: Expr,
    w: Write,
    context: impl Fn() -> String,
) -> Result<Outcome, PortError> {
    let Write {
        update,
        condition,
        returns,
    } = w;
    let r = client
        .update_item()
        .table_name(table)
        .set_key(Some(key_item(key)))
        .update_expression(update)
        .condition_expression(condition)
        .set_expression_attribute_names(e.names())
        .set_expression_attribute_values(e.values())
        .return_values(returns)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    match r {
        Ok(out) => Ok(Outcome::Written(out.attributes)),
        Err(err) => match err.as_service_error() {
            Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c)) => Ok(Outcome::Refused(c.item.clone())),
            _ => Err(classify(context(), err)),
        },
    }
}

/// The raw item (strongly consistent read).
pub(crate) async fn get(
    client: &Client,
    table: &str,
    key: &Key,
    context: impl Fn() -> String,
) -> Result<Option<Item>, PortError> {
    Ok(client
        .get_item()
        .table_name(table)
        .set_key(Some(key_item(key)))
        .consistent_read(true)
        .send()
        .await
        .map_err(|err| classify(context(), err))?
        .item)
}

pub(crate) fn refused(item: Option<Item>) -> Result<CompleteWrite, PortError> {
    Ok(CompleteWrite::Refused(
        item.as_ref().map(item_state).transpose()?.map(Box::new),
    ))
}
