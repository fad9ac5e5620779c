//! Reading a participant item: the protocol's view of it ([`item_state`]: lock, fence,
//! horizon, shape, reservations, escrow) and what readers see ([`business_view`]).

use std::collections::BTreeMap;

use serde_json::Value;
use twopc_core::decimal::Decimal;
use twopc_core::ids::TxId;
use twopc_core::item::{Escrow, ItemState, Lock, StoredReservation, fence_from_stored, stored_id};
use twopc_core::layout::{
    ESCROW_CEILING_PREFIX, ESCROW_CEILINGS_PREFIX, ESCROW_COUNT_PREFIX, ESCROW_FLOOR_PREFIX,
    ESCROW_FLOORS_PREFIX, ESCROW_HIGH_PREFIX, ESCROW_LOW_PREFIX, FENCE, HORIZON, HOT_UNTIL,
    ITEM_VISIBLE_ATTRIBUTES, LOCK, PAUSED_UNTIL, PLACEHOLDER, RESERVATION_PREFIX, TOMBSTONE,
    is_protocol_attribute,
};
use twopc_core::op::Bound;
use twopc_core::ports::PortError;

use crate::codec::{Item, from_item};
use crate::error::corrupt;

/// Reads the protocol's view of an item.
pub fn item_state(item: &Item) -> Result<ItemState, PortError> {
    let bad = |why: String| corrupt("reading a participant item", why);
    let mut attrs = from_item(item).map_err(|e| bad(e.to_string()))?;
    let lock = match attrs.remove(LOCK) {
        Some(v) => Some(serde_json::from_value::<Lock>(v).map_err(|e| bad(format!("lock: {e}")))?),
        None => None,
    };
    let fence = match attrs.remove(FENCE) {
        Some(v) => fence_from_stored(&v).map_err(|e| bad(format!("{FENCE}: {e}")))?,
        None => BTreeMap::new(),
    };
    let horizon = match attrs.remove(HORIZON) {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| bad(format!("{HORIZON} is not a whole number: {v}")))?,
        None => 0,
    };
    let placeholder = attrs.remove(PLACEHOLDER).is_some();
    let tombstone = attrs.remove(TOMBSTONE).is_some();
    let paused_until = attrs.get(PAUSED_UNTIL).and_then(Value::as_u64).unwrap_or(0);
    let hot_until = attrs.get(HOT_UNTIL).and_then(Value::as_u64).unwrap_or(0);
    let (reservations, escrow) = holds(&attrs)?;
    attrs.retain(|name, _| {
        !is_protocol_attribute(name) || ITEM_VISIBLE_ATTRIBUTES.contains(&name.as_str())
    });
    Ok(ItemState {
        lock,
        fence,
        horizon,
        placeholder,
        tombstone,
        attributes: attrs.into_iter().collect(),
        reservations,
        escrow,
        paused_until,
        hot_until,
    })
}

/// The reservations standing on an item (`txRes:<id>`) and its escrow per attribute (`txN:<a>`,
/// `txLo:<a>`, ...), from its attributes.
type Holds = (BTreeMap<TxId, Lock>, BTreeMap<String, Escrow>);

fn holds(attrs: &serde_json::Map<String, Value>) -> Result<Holds, PortError> {
    let bad = |why: String| corrupt("reading a participant item", why);
    let mut reservations = BTreeMap::new();
    let mut escrow: BTreeMap<String, Escrow> = BTreeMap::new();
    for (name, v) in attrs {
        if let Some(tx) = name.strip_prefix(RESERVATION_PREFIX) {
            let id = stored_id(tx).map_err(|e| bad(format!("reservation {e}")))?;
            let r: StoredReservation = serde_json::from_value(v.clone())
                .map_err(|e| bad(format!("reservation {tx}: {e}")))?;
            reservations.insert(id.clone(), r.into_lock(id));
            continue;
        }
        let field = [
            ESCROW_COUNT_PREFIX,
            ESCROW_FLOORS_PREFIX,
            ESCROW_CEILINGS_PREFIX,
            ESCROW_LOW_PREFIX,
            ESCROW_HIGH_PREFIX,
            ESCROW_FLOOR_PREFIX,
            ESCROW_CEILING_PREFIX,
        ]
        .into_iter()
        .find_map(|p| name.strip_prefix(p).map(|a| (p, a)));
        if let Some((prefix, attr)) = field {
            let s = escrow
                .entry(attr.to_owned())
                .or_insert_with(|| Escrow::at(Decimal::zero()));
            escrow_field(s, prefix, name, v)?;
        }
    }
    Ok((reservations, escrow))
}

/// One stored field of an attribute's escrow (`prefix` names which), read into `s`.
fn escrow_field(s: &mut Escrow, prefix: &str, name: &str, v: &Value) -> Result<(), PortError> {
    let bad = |why: String| corrupt("reading a participant item", why);
    let count = || {
        v.as_u64()
            .ok_or_else(|| bad(format!("{name} is not a count")))
    };
    let number = || Decimal::parse(&v.to_string()).map_err(|e| bad(format!("{name}: {e}")));
    match prefix {
        ESCROW_COUNT_PREFIX => s.count = count()?,
        ESCROW_FLOORS_PREFIX => s.floors = count()?,
        ESCROW_CEILINGS_PREFIX => s.ceilings = count()?,
        ESCROW_LOW_PREFIX => s.low = number()?,
        ESCROW_HIGH_PREFIX => s.high = number()?,
        ESCROW_FLOOR_PREFIX => s.floor = Some(stored_bound(v, name)?),
        _ => s.ceiling = Some(stored_bound(v, name)?),
    }
    Ok(())
}

/// A floor or ceiling as `Bound::stored` spells it.
fn stored_bound(v: &Value, name: &str) -> Result<Bound, PortError> {
    v.as_str()
        .and_then(Bound::parse_stored)
        .ok_or_else(|| corrupt("reading an item", format!("{name} is not a bound: {v}")))
}

/// The business view of an item: protocol attributes removed; a placeholder or a tombstone
/// reads as absent.
pub fn business_view(state: &ItemState) -> Option<BTreeMap<String, Value>> {
    (!state.placeholder && !state.tombstone).then(|| state.attributes.clone())
}
