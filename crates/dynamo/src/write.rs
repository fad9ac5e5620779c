//! One conditional `UpdateItem` of a participant item, and one strongly consistent read: the
//! two calls every participant write is made of, with a refused condition answered by the item
//! as it was.

use std::future::Future;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::AsyncSleep;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use rand::Rng;
use twopc_core::item::Key;
use twopc_core::layout::{FENCE, FORMAT, FORMAT_VERSION};
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

pub(crate) enum WriteOutcome {
    Written(Option<Item>),
    Refused(Option<Item>),
}

/// One conditional `UpdateItem` of a participant item, refused (before anything is written)
/// on an item of an earlier format.
///
/// Every protocol write is also conditional on the item's format: no fence, or the marker this
/// version writes with every fence ([`FORMAT`]). An item whose fence has no marker was written
/// by an earlier version: read off the refusal, it is either this version's format written
/// before the marker existed (it reads back: the marker is added, conditional on the fence
/// being as read, and the write sent again), or the earlier format (short ids that do not
/// read), refused with what to do and nothing written. So the earlier format is found before
/// the write that would strand it (a lock taken, then an item no step can read), and a late
/// prepare of a transaction from before the upgrade is refused whatever its entry looks like.
/// Native writes carry no such condition: they read no fence entry or reservation, only the
/// names both formats share (`docs/protocol.md`, "Records").
pub(crate) async fn write(
    client: &Client,
    table: &str,
    key: &Key,
    e: Expr,
    w: Write,
    context: impl Fn() -> String,
) -> Result<WriteOutcome, PortError> {
    let mut e = e;
    let (fence, format) = (e.name(FENCE), e.name(FORMAT));
    let w = Write {
        condition: format!(
            "({}) AND (attribute_not_exists({fence}) OR attribute_exists({format}))",
            w.condition
        ),
        ..w
    };
    for _ in 0..3 {
        let item = match send(client, table, key, &e, &w, &context).await? {
            WriteOutcome::Refused(Some(item)) if earlier_format(&item) => item,
            outcome => return Ok(outcome),
        };
        // Refused for its format, or for something else as well: which one, the item says.
        item_state(&item).map_err(|err| PortError::Fatal {
            context: format!("{}: refused before writing", context()),
            source: Box::new(err),
        })?;
        adopt(client, table, key, &item, &context).await?;
    }
    Err(PortError::Retryable {
        context: context(),
        source: "the item's format marker kept changing".into(),
    })
}

/// Whether a refused item has a fence without this version's format marker.
fn earlier_format(item: &Item) -> bool {
    item.contains_key(FENCE) && !item.contains_key(FORMAT)
}

/// Marks an item of this version's format written before the marker: only if still unmarked
/// with the fence as read (its size and every entry read), so nothing an earlier version
/// wrote since is marked unread. Refused, the caller's write is tried again and finds out.
async fn adopt(
    client: &Client,
    table: &str,
    key: &Key,
    item: &Item,
    context: impl Fn() -> String,
) -> Result<(), PortError> {
    let mut e = Expr::new();
    let (fence, format) = (e.name(FENCE), e.name(FORMAT));
    let entries: Vec<String> = match item.get(FENCE) {
        Some(AttributeValue::M(m)) => m.keys().cloned().collect(),
        _ => vec![],
    };
    let mut conds = vec![
        format!("attribute_not_exists({format})"),
        format!(
            "size({fence}) = {}",
            e.value(AttributeValue::N(entries.len().to_string()))
        ),
    ];
    for id in &entries {
        conds.push(format!("attribute_exists({})", e.path(&[FENCE, id])));
    }
    let w = Write {
        update: format!(
            "SET {format} = {}",
            e.value(AttributeValue::N(FORMAT_VERSION.to_string()))
        ),
        condition: conds.join(" AND "),
        returns: ReturnValue::None,
    };
    send(client, table, key, &e, &w, || {
        format!("{}: marking the item's format", context())
    })
    .await
    .map(|_| ())
}

/// Sends one conditional `UpdateItem` ([`resending`] it while a transaction holds the item).
async fn send(
    client: &Client,
    table: &str,
    key: &Key,
    e: &Expr,
    w: &Write,
    context: impl Fn() -> String,
) -> Result<WriteOutcome, PortError> {
    let r = resending(client, || {
        client
            .update_item()
            .table_name(table)
            .set_key(Some(key_item(key)))
            .update_expression(&w.update)
            .condition_expression(&w.condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values(w.returns.clone())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
    })
    .await;
    match r {
        Ok(out) => Ok(WriteOutcome::Written(out.attributes)),
        Err(err) => match err.as_service_error() {
            Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c)) => {
                Ok(WriteOutcome::Refused(c.item.clone()))
            }
            _ => Err(classify(context(), err)),
        },
    }
}

/// Sends a single-item write, and again after a jittered wait ([`conflict_backoff`]) while
/// DynamoDB refuses it with `TransactionConflictException`: a `TransactWriteItems` holds the
/// item until it completes (tens of milliseconds), and nothing was written. The last refusal is
/// returned (the caller reports it as retryable). It waits as `client`'s own retries do, on the
/// sleep its configuration names (Tokio's if none): whoever runs the client slower or faster
/// than the wall (a bench dilating its model) sets it once for both.
pub(crate) async fn resending<T, E, R, F, Fut>(
    client: &Client,
    mut send: F,
) -> Result<T, SdkError<E, R>>
where
    E: ProvideErrorMetadata,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, R>>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let err = match send().await {
            Ok(out) => return Ok(out),
            Err(err) => err,
        };
        let conflict = err.as_service_error().and_then(ProvideErrorMetadata::code)
            == Some(TRANSACTION_CONFLICT);
        match conflict_backoff(attempt).filter(|_| conflict) {
            Some(bound) => {
                let wait = bound.mul_f64(rand::rng().random_range(0.0..=1.0));
                match client.config().sleep_impl() {
                    Some(sleep) => sleep.sleep(wait).await,
                    None => tokio::time::sleep(wait).await,
                }
            }
            None => return Err(err),
        }
    }
}

/// DynamoDB's refusal of a single write to an item a transaction holds.
const TRANSACTION_CONFLICT: &str = "TransactionConflictException";

/// The bound of the wait after attempt `attempt` (1-based) of a write met a transaction's hold:
/// full jitter from 10 ms, doubling, for three more attempts; `None` after the fourth.
fn conflict_backoff(attempt: u32) -> Option<Duration> {
    (attempt < 4).then(|| Duration::from_millis(10) * (1 << (attempt - 1)))
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use aws_sdk_dynamodb::config::{BehaviorVersion, SharedAsyncSleep, Sleep};
    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::update_item::UpdateItemError;

    use super::*;

    /// A sleep that returns at once, recording each wait asked of it.
    #[derive(Debug, Default, Clone)]
    struct Recorded(Arc<Mutex<Vec<Duration>>>);

    impl AsyncSleep for Recorded {
        fn sleep(&self, d: Duration) -> Sleep {
            self.0.lock().expect("lock").push(d);
            Sleep::new(async {})
        }
    }

    #[tokio::test]
    async fn a_write_meeting_a_transactions_hold_waits_on_the_clients_sleep() {
        let waits = Recorded::default();
        let client = Client::from_conf(
            aws_sdk_dynamodb::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .sleep_impl(SharedAsyncSleep::new(waits.clone()))
                .build(),
        );
        let mut sent = 0;
        let conflict = || {
            let meta = ErrorMetadata::builder().code(TRANSACTION_CONFLICT).build();
            SdkError::service_error(UpdateItemError::generic(meta), ())
        };
        let r: Result<(), _> = resending(&client, || {
            sent += 1;
            std::future::ready(Err(conflict()))
        })
        .await;
        assert!(r.is_err(), "the last refusal is returned");
        assert_eq!(sent, 4);
        let waits = waits.0.lock().expect("lock").clone();
        assert_eq!(
            waits.len(),
            3,
            "one wait between sends, on the client's sleep"
        );
        for (n, w) in waits.iter().enumerate() {
            let bound = conflict_backoff(n as u32 + 1).expect("a bound");
            assert!(*w <= bound, "wait {n}: {w:?} within {bound:?}");
        }
    }

    #[test]
    fn a_write_meeting_a_transactions_hold_is_sent_four_times_at_most() {
        let bounds: Vec<_> = (1..=5).map(conflict_backoff).collect();
        let ms = Duration::from_millis;
        assert_eq!(
            bounds,
            [Some(ms(10)), Some(ms(20)), Some(ms(40)), None, None]
        );
    }
}
