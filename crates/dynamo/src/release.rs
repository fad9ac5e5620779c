//! A lock holder's release: the lock goes (with its fence entry, the fence pruned as planned),
//! a placeholder becomes a tombstone; a committed delete leaves a tombstone keeping the fence
//! and horizon.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use twopc_core::ids::TxId;
use twopc_core::item::{FenceEntry, ItemState, Key};
use twopc_core::layout::{
    FENCE, FORMAT, FORMAT_VERSION, HORIZON, LAST_TX, PLACEHOLDER, TOMBSTONE, VERSION,
};
use twopc_core::message::Prune;
use twopc_core::ports::{CompleteWrite, PortError};

use crate::clauses::{Release, entry, entry_write, key_item, number, owned_by, release_clauses};
use crate::error::{classify, corrupt};
use crate::expr::{Expr, update_expression};
use crate::state::item_state;
use crate::write::{Write, WriteOutcome, get, write};

/// Releases the lock of `tx` that began at `began` (`holder`), optionally writing its fence
/// entry (only where no entry stands under its id), pruning as planned. A real item stays; its
/// placeholder becomes a tombstone, keeping its fence and horizon.
pub(crate) async fn release(
    client: &Client,
    table: &str,
    key: &Key,
    (tx, began): (&TxId, u64),
    fence: Option<&FenceEntry>,
    prune: Option<&Prune>,
) -> Result<CompleteWrite, PortError> {
    let mut placeholder = false;
    loop {
        let mut e = Expr::new();
        let Release {
            mut set,
            mut remove,
            condition,
        } = release_clauses(&mut e, tx, began, prune);
        let mut condition = condition;
        if let Some(f) = fence {
            let (entry_set, no_entry) = entry_write(&mut e, tx, f);
            set.push(entry_set);
            condition = format!("{condition} AND {no_entry}");
        }
        let ph = e.name(PLACEHOLDER);
        let condition = if placeholder {
            remove.push(ph.clone());
            set.push(format!(
                "{} = {}",
                e.name(TOMBSTONE),
                e.value(AttributeValue::Bool(true))
            ));
            format!("{condition} AND attribute_exists({ph})")
        } else {
            format!("{condition} AND attribute_not_exists({ph})")
        };
        let w = Write {
            update: update_expression(&set, &remove),
            condition,
            returns: ReturnValue::None,
        };
        match write(client, table, key, e, w, || {
            format!("releasing the lock of {tx} in {table}")
        })
        .await?
        {
            WriteOutcome::Written(_) => return Ok(CompleteWrite::Done),
            WriteOutcome::Refused(Some(item)) => {
                let state = item_state(&item)?;
                let ours = state.lock.as_ref().is_some_and(|l| l.is_of(tx, began));
                if ours && state.placeholder != placeholder {
                    placeholder = state.placeholder;
                    continue;
                }
                return Ok(CompleteWrite::Refused(Some(Box::new(state))));
            }
            WriteOutcome::Refused(None) => return Ok(CompleteWrite::Refused(None)),
        }
    }
}

/// Commits `tx`'s delete: the item becomes a tombstone (key, fence with `tx`'s entry,
/// horizon, `txVersion` + 1), so a late prepare of an earlier transaction is still refused.
/// Read, then replace conditional on the lock and on the fence being as read (only
/// lock-free aborts can change it meanwhile: then read again).
pub(crate) async fn bury(
    client: &Client,
    table: &str,
    key: &Key,
    tx: &TxId,
    fence: &FenceEntry,
    prune: Option<&Prune>,
) -> Result<CompleteWrite, PortError> {
    let ctx = || format!("committing the delete of {tx} in {table}");
    for _ in 0..4 {
        let Some(item) = get(client, table, key, ctx).await? else {
            return Ok(CompleteWrite::Refused(None));
        };
        let state = item_state(&item)?;
        // Not its lock, or a former transaction's entry under its id in the way (retired
        // first, as every release's condition requires).
        if state
            .lock
            .as_ref()
            .is_none_or(|l| !l.is_of(tx, fence.began))
            || state.fence.contains_key(tx)
        {
            return Ok(CompleteWrite::Refused(Some(Box::new(state))));
        }
        let tomb =
            tombstone(&item, &state, key, tx, fence, prune).map_err(|m| corrupt(ctx(), m))?;
        let mut e = Expr::new();
        let condition = as_read(&mut e, &item, &state, (tx, fence.began));
        let r = client
            .put_item()
            .table_name(table)
            .set_item(Some(tomb))
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match r {
            Ok(_) => return Ok(CompleteWrite::Done),
            Err(err) => match err.as_service_error() {
                Some(aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(_)) => continue,
                _ => return Err(classify(ctx(), err)),
            },
        }
    }
    Err(PortError::Retryable {
        context: ctx(),
        source: "the item's fence kept changing under the delete".into(),
    })
}

/// The tombstone of `item` (read as `state`) that `tx`'s delete leaves: its key, its fence with
/// `tx`'s entry (and without those `prune` names), the horizon, `txVersion` + 1, the last
/// transaction and the format mark. `Err`: why the item does not read.
fn tombstone(
    item: &HashMap<String, AttributeValue>,
    state: &ItemState,
    key: &Key,
    tx: &TxId,
    fence: &FenceEntry,
    prune: Option<&Prune>,
) -> Result<HashMap<String, AttributeValue>, String> {
    let mut entries = match item.get(FENCE) {
        Some(AttributeValue::M(m)) => m.clone(),
        _ => Default::default(),
    };
    let mut horizon = state.horizon;
    if let Some(p) = prune {
        // The fence is keyed by short ids (`fence_path`), as every other release removes the
        // entries it prunes.
        for id in p.ids.iter().filter(|id| *id != tx) {
            entries.remove(&id.short());
        }
        horizon = horizon.max(p.horizon);
    }
    entries.insert(tx.short(), entry(fence));
    let version = match item.get(VERSION) {
        Some(AttributeValue::N(n)) => n
            .parse::<u64>()
            .map_err(|_| format!("{VERSION} is not a whole number: {n}"))?,
        _ => 0,
    };
    let mut tomb = key_item(key);
    tomb.insert(TOMBSTONE.into(), AttributeValue::Bool(true));
    tomb.insert(FENCE.into(), AttributeValue::M(entries));
    tomb.insert(HORIZON.into(), number(horizon));
    tomb.insert(VERSION.into(), number(version + 1));
    tomb.insert(LAST_TX.into(), AttributeValue::S(tx.to_string()));
    // The item was read as this version's format (an earlier one does not read): mark it.
    tomb.insert(FORMAT.into(), number(FORMAT_VERSION));
    Ok(tomb)
}

/// The condition that the item is as read: still locked by `tx` (that began at `began`), its
/// fence of the size read and its horizon the one read (or both absent, as read).
fn as_read(
    e: &mut Expr,
    item: &HashMap<String, AttributeValue>,
    state: &ItemState,
    (tx, began): (&TxId, u64),
) -> String {
    let (f, h) = (e.name(FENCE), e.name(HORIZON));
    let same_fence = if item.contains_key(FENCE) {
        format!("size({f}) = {}", e.value(number(state.fence.len() as u64)))
    } else {
        format!("attribute_not_exists({f})")
    };
    let same_horizon = if item.contains_key(HORIZON) {
        format!("{h} = {}", e.value(number(state.horizon)))
    } else {
        format!("attribute_not_exists({h})")
    };
    format!(
        "{} AND {same_fence} AND {same_horizon}",
        owned_by(e, tx, began)
    )
}

/// Whether a refused release found the item locked (not reserved) by `tx`.
pub(crate) fn locked_by(w: &CompleteWrite, tx: &TxId) -> bool {
    matches!(w, CompleteWrite::Refused(Some(item)) if item.lock.as_ref().is_some_and(|l| &l.tx_id == tx))
}
