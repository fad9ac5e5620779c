//! What the protocol keeps on a participant item: its lock, its fence and horizon, its shape
//! (placeholder, tombstone), as the stores read them back (`docs/protocol.md`, "Records").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decimal::{Decimal, canonical_json};
use crate::ids::TxId;
use crate::layout;
use crate::op::{Bound, Operation};

/// An item's key: attribute name → value (a string or a number).
pub type Key = BTreeMap<String, Value>;

/// The item `key` names, whichever way its numbers are spelled: DynamoDB keeps a number by its
/// value, so `{"id": 1}`, `{"id": 1.0}` and `{"id": 10e-1}` name one item. Two keys name the
/// same item iff their canonical forms are equal. Compared, never written: requests and records
/// keep each key as the client spelled it.
pub(crate) fn canonical_key(key: &Key) -> Key {
    key.iter()
        .map(|(name, v)| (name.clone(), canonical_json(v)))
        .collect()
}

/// The lock a prepared transaction holds on an item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lock {
    /// The owner.
    pub tx_id: TxId,
    /// When the owner's deadline passes (epoch ms). Past it, a newcomer may *resolve* the
    /// owner (the lock rule, `docs/protocol.md`); it never frees the lock by itself.
    pub expires_at: u64,
    /// When the owner began (epoch ms, its record's `createdAt`): orders it against the
    /// item's fence horizon.
    pub began: u64,
    /// The pending operation, applied at commit.
    pub op: Operation,
    /// Who prepared it (for people reading the item).
    pub coordinator: String,
}

impl Lock {
    /// Whether the lock (or reservation) is transaction `tx`'s that began at `began`: a
    /// transaction is its id and its `began` ([`FenceEntry::is_of`]).
    pub fn is_of(&self, tx: &TxId, began: u64) -> bool {
        &self.tx_id == tx && self.began == began
    }
}

/// A reservation as stored under `txRes:<id>`: a lock's deadline, begin and operation under
/// one-letter names, the owner in the attribute's name (its short id) and no coordinator
/// (people read it off the record). A hot item carries one per transaction in flight, and
/// DynamoDB bills every write of the item by its size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredReservation {
    /// The owner's deadline ([`layout::RESERVATION_EXPIRES`]).
    #[serde(rename = "x")]
    pub expires_at: u64,
    /// When the owner began ([`layout::RESERVATION_BEGAN`]).
    #[serde(rename = "b")]
    pub began: u64,
    /// The pending operation ([`layout::LOCK_OP`]).
    pub op: Operation,
}

impl StoredReservation {
    /// The attribute a reservation of `tx` is stored under: `txRes:<short id>`.
    pub fn attribute(tx: &TxId) -> String {
        layout::prefixed(layout::RESERVATION_PREFIX, &tx.short())
    }

    /// What a reservation of `lock` stores.
    pub fn of(lock: &Lock) -> StoredReservation {
        StoredReservation {
            expires_at: lock.expires_at,
            began: lock.began,
            op: lock.op.clone(),
        }
    }

    /// The reservation as the protocol reads it: the lock of `tx`, no coordinator named.
    pub fn into_lock(self, tx: TxId) -> Lock {
        Lock {
            tx_id: tx,
            expires_at: self.expires_at,
            began: self.began,
            op: self.op,
            coordinator: String::new(),
        }
    }
}

/// A transaction's outcome as recorded in an item's fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceOutcome {
    /// Committed on this item.
    Committed,
    /// Aborted on this item.
    Aborted,
}

/// One fence entry: a transaction that ended on the item, and when it began.
///
/// Stored as one number under the transaction's short id ([`FenceEntry::stored`]): about 31
/// bytes an entry where a map of outcome, begin and expiry under the long id took 71. When an
/// entry goes stale is not stored: it is a fixed window after its `began`
/// ([`FenceEntry::is_stale`]), which the participant's configuration sets past the largest
/// transaction timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FenceEntry {
    /// The outcome.
    pub outcome: FenceOutcome,
    /// When the transaction began (epoch ms): removing the entry raises the item's horizon to
    /// at least this.
    pub began: u64,
}

impl FenceEntry {
    /// The number stored for the entry: `began`, negated if the transaction aborted. (A `began`
    /// of 0, which no record has, is stored as 1 so the sign can carry the outcome: the horizon
    /// the entry may raise is then 1 ms later, which refuses more, never less.)
    pub fn stored(&self) -> String {
        let began = self.began.max(1);
        match self.outcome {
            FenceOutcome::Committed => began.to_string(),
            FenceOutcome::Aborted => format!("-{began}"),
        }
    }

    /// Reads [`FenceEntry::stored`]'s number back (`None`: not a whole, non-zero number).
    pub(crate) fn from_stored(v: &Value) -> Option<FenceEntry> {
        let n = v.as_i64()?;
        let outcome = match n.signum() {
            1 => FenceOutcome::Committed,
            -1 => FenceOutcome::Aborted,
            _ => return None,
        };
        Some(FenceEntry {
            outcome,
            began: n.unsigned_abs(),
        })
    }

    /// Whether the entry is of the transaction that began at `began`: a transaction is its id
    /// *and* its `began` (its record's `createdAt`). An entry under the same id with another
    /// `began` is a former transaction's, an idempotency key's earlier use whose record expired
    /// (`TxId::for_idempotency_key` names a key's transactions alike forever). A `began` of 0 is
    /// stored as 1 ([`FenceEntry::stored`]).
    pub fn is_of(&self, began: u64) -> bool {
        self.began == began.max(1)
    }

    /// Stale at `now`: more than `window` ms after its transaction began. A stale entry goes at
    /// the next pruning write (the horizon rising over it) whether or not the fence has room.
    pub fn is_stale(&self, now: u64, window: u64) -> bool {
        self.began.saturating_add(window) < now
    }
}

/// Reads a transaction's short id as an item names it (a fence key, a reservation's attribute),
/// saying what is wrong otherwise: a long id is the earlier format, refused, not converted (its
/// conditions would be checked under names this version never writes).
pub fn stored_id(text: &str) -> Result<TxId, String> {
    TxId::from_short(text).map_err(|_| {
        format!("{text:?} is not a 22-character transaction id: the item was written by an earlier version (docs/protocol.md, \"Records\": drain the table's transactions, then on each such item remove txFence and the txRes: attributes and set txFenceHorizon to the time of the upgrade, or start from empty data)")
    })
}

/// Reads a stored fence (`txFence`: short id → [`FenceEntry::stored`]), saying what is wrong
/// with it otherwise. A fence of an earlier format (long ids, entries as maps) is refused, not
/// converted: its entries' conditions would be checked under names this version never writes.
pub fn fence_from_stored(v: &Value) -> Result<BTreeMap<TxId, FenceEntry>, String> {
    let map = v.as_object().ok_or_else(|| format!("not a map: {v}"))?;
    map.iter()
        .map(|(k, e)| {
            let tx = stored_id(k).map_err(|e| format!("entry {e}"))?;
            let entry = FenceEntry::from_stored(e)
                .ok_or_else(|| format!("entry {k:?} is not a non-zero whole number: {e}"))?;
            Ok((tx, entry))
        })
        .collect()
}

/// A participant item as the protocol sees it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ItemState {
    /// The lock, if a transaction holds one.
    pub lock: Option<Lock>,
    /// Recent transaction outcomes on the item.
    pub fence: BTreeMap<TxId, FenceEntry>,
    /// The fence horizon (`txFenceHorizon`, 0 when absent): every transaction whose entry was
    /// removed began at or before it, and a prepare of a transaction that began at or before
    /// it is refused. See "The fence horizon" in `docs/architecture.md`.
    pub horizon: u64,
    /// A placeholder locked by a creating prepare: readers treat it as absent.
    pub placeholder: bool,
    /// What a committed delete (or an aborted create) leaves: the key, the fence and the
    /// horizon, so that late prepares stay refused. Readers treat it as absent; a creating
    /// prepare may take it.
    pub tombstone: bool,
    /// The business attributes (protocol attributes removed).
    pub attributes: BTreeMap<String, Value>,
    /// Reservations standing on the item (each like a lock: owner, expiry, began, operation);
    /// several may stand at once, never beside a lock.
    pub reservations: BTreeMap<TxId, Lock>,
    /// Per reserved attribute, what the standing reservations escrow.
    pub escrow: BTreeMap<String, Escrow>,
    /// New reservations are refused until then (epoch ms): an exclusive operation is waiting for
    /// the standing ones to drain, so a stream of reservations cannot starve it.
    pub paused_until: u64,
    /// Native transactions give way on the item until then (epoch ms, `txHot`; 0: never
    /// marked): transactions were seen contending for it (`rules::heat`).
    pub hot_until: u64,
}

/// What the standing reservations on one attribute escrow. It stays on the item when the last
/// reservation goes (`count` 0, the extremes back at the value: *idle*), so that every release
/// is one write whether or not it is the last; an idle escrow whose extremes no longer match the
/// value (something outside the protocol wrote the attribute) is *stale*, and is removed before
/// the next reservation (`ParticipantStore::reset_escrow`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Escrow {
    /// Reservations standing on the attribute.
    pub count: u64,
    /// Of those, the ones that keep a floor (a `gte` bound).
    pub floors: u64,
    /// Of those, the ones that keep a ceiling (an `lte` bound).
    pub ceilings: u64,
    /// The lowest value the attribute could reach: the value plus every standing negative
    /// change.
    pub low: Decimal,
    /// The highest: the value plus every standing positive change.
    pub high: Decimal,
    /// The floor the standing reservations that keep one keep the value above (they must all
    /// agree); meaningless while `floors` is 0.
    pub floor: Option<Bound>,
    /// The ceiling, likewise (`ceilings`).
    pub ceiling: Option<Bound>,
}

impl Escrow {
    /// Nothing escrowed yet: the extremes at `value`.
    pub fn at(value: Decimal) -> Escrow {
        Escrow {
            count: 0,
            floors: 0,
            ceilings: 0,
            low: value.clone(),
            high: value,
            floor: None,
            ceiling: None,
        }
    }

    /// The floor standing reservations keep, if any does.
    pub fn standing_floor(&self) -> Option<&Bound> {
        self.floor.as_ref().filter(|_| self.floors > 0)
    }

    /// The ceiling standing reservations keep, if any does.
    pub(crate) fn standing_ceiling(&self) -> Option<&Bound> {
        self.ceiling.as_ref().filter(|_| self.ceilings > 0)
    }

    /// Idle, and its extremes no longer at `value`.
    pub fn is_stale(&self, value: &Decimal) -> bool {
        self.count == 0
            && (!self.low.cmp_value(value).is_eq() || !self.high.cmp_value(value).is_eq())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_reservation_leaves_out_its_owner_and_coordinator_and_reads_back_as_the_lock() {
        let lock = Lock {
            tx_id: TxId::random(),
            expires_at: 1_700_000_005_000,
            began: 1_700_000_000_000,
            op: Operation::from_json("op", &serde_json::json!({"add": {"balance": -10}}))
                .expect("op"),
            coordinator: "arn:aws:lambda:us-east-1:123456789012:function:coordinator".into(),
        };
        let stored = serde_json::to_value(StoredReservation::of(&lock)).expect("json");
        let keys: Vec<&str> = stored
            .as_object()
            .expect("a map")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["b", "op", "x"]);
        let back: StoredReservation = serde_json::from_value(stored).expect("back");
        assert_eq!(
            back.into_lock(lock.tx_id.clone()),
            Lock {
                coordinator: String::new(),
                ..lock
            }
        );
    }

    #[test]
    fn a_fence_entry_is_its_began_negated_when_aborted_and_reads_back() {
        for outcome in [FenceOutcome::Committed, FenceOutcome::Aborted] {
            let e = FenceEntry {
                outcome,
                began: 1_700_000_000_000,
            };
            let n: Value = serde_json::from_str(&e.stored()).expect("a number");
            assert_eq!(FenceEntry::from_stored(&n), Some(e));
        }
        let aborted = FenceEntry {
            outcome: FenceOutcome::Aborted,
            began: 1_700_000_000_000,
        };
        assert_eq!(aborted.stored(), "-1700000000000");
        // began 0 keeps its sign by rising to 1 (refusing more, never less).
        let zero = FenceEntry {
            outcome: FenceOutcome::Aborted,
            began: 0,
        };
        assert_eq!(zero.stored(), "-1");
        for bad in ["0", "1.5", "\"committed\"", "{}"] {
            let v: Value = serde_json::from_str(bad).expect("json");
            assert_eq!(FenceEntry::from_stored(&v), None, "{bad}");
        }
    }

    #[test]
    fn a_fence_entry_goes_stale_its_window_after_its_transaction_began() {
        let e = FenceEntry {
            outcome: FenceOutcome::Committed,
            began: 1_000,
        };
        assert!(!e.is_stale(71_000, 70_000));
        assert!(e.is_stale(71_001, 70_000));
        assert!(!e.is_stale(u64::MAX, u64::MAX), "no overflow");
    }

    #[test]
    fn a_stored_fence_reads_back_and_an_earlier_format_is_refused_saying_so() {
        let tx = TxId::random();
        let stored = serde_json::json!({ tx.short(): -5 });
        let fence = fence_from_stored(&stored).expect("fence");
        assert_eq!(
            fence[&tx],
            FenceEntry {
                outcome: FenceOutcome::Aborted,
                began: 5
            }
        );
        let old = serde_json::json!({ tx.as_str(): {"o": "aborted", "b": 5, "x": 9} });
        let e = fence_from_stored(&old).expect_err("long ids");
        assert!(e.contains("earlier version"), "{e}");
        let e = stored_id(tx.as_str()).expect_err("a long id");
        assert!(e.contains("earlier version"), "{e}");
        assert_eq!(stored_id(&tx.short()), Ok(tx.clone()));
        let e = fence_from_stored(&serde_json::json!({ tx.short(): {"o": "aborted"} }))
            .expect_err("map entries");
        assert!(e.contains("whole number"), "{e}");
    }
}
