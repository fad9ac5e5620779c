//! The storage layout: every attribute name the protocol keeps on participant items and on
//! transaction records, named once. The DynamoDB adapters write exactly these; the stream
//! processor detects commits by them; the operation language refuses writes to the item ones
//! ([`ITEM_PROTOCOL_ATTRIBUTES`]), which is why they live in the core and not in the adapter
//! crate (it depends on the core). Where serde derives spell a name (the lock, a fence entry,
//! the record), a test below pins the derive to the constant.
//!
//! An item, besides its business attributes (`<id>` is a transaction id's 22-character form,
//! [`TxId::short`](crate::ids::TxId::short): DynamoDB bills every byte of every write, and a hot
//! item carries dozens of these):
//!
//! ```text
//! lock            {txId, expiresAt, began, op, coordinator}   while a transaction holds it
//! lockShard, lockExpiresAt                                    the sparse lock-expiry index
//! txFence         {<id>: began}   began (epoch ms) of a transaction ended here, negative if it aborted
//! txFenceHorizon  every transaction whose entry was removed began at or before it
//! txVersion, lastTx                                           bumped by each commit
//! txPlaceholder   on an item a creating prepare holds         (readers: absent)
//! txTombstone     on what a committed delete or an aborted create leaves (readers: absent)
//! txFmt           2: the format of the fence and reservations, written with the fence
//! txRes:<id>      {x: expires at, b: began, op}               a reservation standing
//! txHot           until when native writes give way: transactions contended for the item
//! ```

/// The lock a prepared transaction holds (a map: [`LOCK_TX`], [`LOCK_EXPIRES`], ...).
pub const LOCK: &str = "lock";
/// The lock's owner (`lock.txId`).
pub const LOCK_TX: &str = "txId";
/// The owner's deadline (`lock.expiresAt`, epoch ms).
pub const LOCK_EXPIRES: &str = "expiresAt";
/// When the owner began (`lock.began`, epoch ms).
pub const LOCK_BEGAN: &str = "began";
/// The owner's pending operation (`lock.op`).
pub const LOCK_OP: &str = "op";
/// Who prepared it (`lock.coordinator`).
pub const LOCK_COORDINATOR: &str = "coordinator";
/// Present only while the item is locked: its partition of the lock-expiry index.
pub const LOCK_SHARD: &str = "lockShard";
/// Present only while the item is locked: the sort key of the lock-expiry index.
pub const LOCK_EXPIRES_AT: &str = "lockExpiresAt";
/// Recent outcomes on the item: a map from each transaction's short id to one number, the
/// transaction's `began`, negated if it aborted ([`FenceEntry::stored`](crate::item::FenceEntry::stored)).
pub const FENCE: &str = "txFence";
/// The fence horizon (epoch ms; absent = 0).
pub const HORIZON: &str = "txFenceHorizon";
/// Commits applied to the item.
pub const VERSION: &str = "txVersion";
/// The last transaction committed on the item.
pub const LAST_TX: &str = "lastTx";
/// Marks a placeholder a creating prepare locked.
pub const PLACEHOLDER: &str = "txPlaceholder";
/// Marks a tombstone.
pub const TOMBSTONE: &str = "txTombstone";
/// The item's protocol format ([`FORMAT_VERSION`]), written with its fence: an item that has a
/// fence and no marker was written by an earlier version, and every protocol write is
/// conditional on the marker wherever a fence stands (`docs/protocol.md`, "Records").
pub const FORMAT: &str = "txFmt";
/// The format this version writes: compact fences (short ids, one number an entry) and
/// reservations under short ids.
pub const FORMAT_VERSION: u64 = 2;

/// The item's heat mark (epoch ms): until then native `TransactWriteItems` give way to the
/// protocol on it, because transactions were seen contending for it (`rules::heat`). Written by
/// a staged prepare that a contended native attempt sent; read by native writes' condition.
pub const HOT_UNTIL: &str = "txHot";

/// A reservation of transaction `<id>` (its short id): `txRes:<id>`, a map of
/// [`RESERVATION_EXPIRES`], [`RESERVATION_BEGAN`] and [`LOCK_OP`].
pub const RESERVATION_PREFIX: &str = "txRes:";
/// A reservation's deadline (epoch ms), as the lock's [`LOCK_EXPIRES`].
pub const RESERVATION_EXPIRES: &str = "x";
/// When a reservation's owner began (epoch ms), as the lock's [`LOCK_BEGAN`].
pub const RESERVATION_BEGAN: &str = "b";
/// Reservations standing on the item (a number; 0 or absent: none).
pub const RESERVATIONS: &str = "txResN";
/// New reservations are refused until then (epoch ms): an exclusive operation waits.
pub const PAUSED_UNTIL: &str = "txPause";
/// Reservations standing on attribute `<a>`: `txN:<a>`.
pub const ESCROW_COUNT_PREFIX: &str = "txN:";
/// Of those, the ones keeping a floor: `txNf:<a>`.
pub const ESCROW_FLOORS_PREFIX: &str = "txNf:";
/// Of those, the ones keeping a ceiling: `txNc:<a>`.
pub const ESCROW_CEILINGS_PREFIX: &str = "txNc:";
/// The lowest value attribute `<a>` could reach: `txLo:<a>`.
pub const ESCROW_LOW_PREFIX: &str = "txLo:";
/// The highest: `txHi:<a>`.
pub const ESCROW_HIGH_PREFIX: &str = "txHi:";
/// The floor the standing reservations keep `<a>` above: `txFl:<a>`.
pub const ESCROW_FLOOR_PREFIX: &str = "txFl:";
/// The ceiling they keep it below: `txCe:<a>`.
pub const ESCROW_CEILING_PREFIX: &str = "txCe:";

/// A prefixed attribute name (`txRes:<txId>`, `txLo:<a>`, ...). The `:` keeps it apart from
/// every business attribute: names an operation may use cannot contain one.
pub fn prefixed(prefix: &str, name: &str) -> String {
    format!("{prefix}{name}")
}

/// Whether an attribute is the protocol's (an operation may not write it; readers do not see it,
/// but for [`ITEM_VISIBLE_ATTRIBUTES`]).
pub fn is_protocol_attribute(name: &str) -> bool {
    ITEM_PROTOCOL_ATTRIBUTES.contains(&name) || name.contains(':')
}

/// Every attribute the protocol keeps on items under a fixed name (the prefixed ones aside: see
/// [`is_protocol_attribute`]): an operation may not write them, and the business view of an
/// item leaves them out (but [`VERSION`] and [`LAST_TX`], which readers see).
pub const ITEM_PROTOCOL_ATTRIBUTES: &[&str] = &[
    LOCK,
    LOCK_EXPIRES_AT,
    LOCK_SHARD,
    FENCE,
    HORIZON,
    VERSION,
    LAST_TX,
    PLACEHOLDER,
    TOMBSTONE,
    FORMAT,
    RESERVATIONS,
    PAUSED_UNTIL,
    HOT_UNTIL,
];

/// Protocol attributes readers see with the business attributes.
pub const ITEM_VISIBLE_ATTRIBUTES: &[&str] = &[VERSION, LAST_TX];

/// A record's key: the transaction id.
pub const TX_ID: &str = "txId";
/// A record's status (`PREPARING`, ...).
pub const STATUS: &str = "status";
/// A record's participants.
pub const PARTICIPANTS: &str = "participants";
/// A record's votes.
pub const VOTES: &str = "votes";
/// A record's deadline (epoch ms); the sort key of the pending index.
pub const DEADLINE: &str = "deadline";
/// When a record was written (epoch ms): the transaction's `began`.
pub const CREATED_AT: &str = "createdAt";
/// When a record last changed (epoch ms).
pub const UPDATED_AT: &str = "updatedAt";
/// Failed recovery attempts on a record.
pub const ATTEMPTS: &str = "attempts";
/// Not scheduled for recovery before then (epoch ms): the sweeper's backoff.
pub const RETRY_AFTER: &str = "retryAfter";
/// When a participant met this `STAGING` record's holds past its deadline and asked for its
/// recovery (epoch ms): written once; the completer on the transactions stream acts on it.
pub const RECOVERY_ASKED: &str = "recoveryAsked";
/// When a record was decided (epoch ms): written by the swap to `COMMITTING` or `ABORTING`.
pub const DECIDED_AT: &str = "decidedAt";
/// Operators' actions on a record, oldest first (`operator::ActionNote`): who asked what, when,
/// and what came of it.
pub const OPERATOR_ACTIONS: &str = "operatorActions";
/// Present only once a record is terminal: its partition of the ended index
/// (`<STATUS>#<shard>`), whose sort key is [`UPDATED_AT`] (a terminal record's never moves).
pub const ENDED: &str = "ended";
/// Present only while a record is not terminal: its partition of the pending index.
pub const PENDING: &str = "pending";
/// The TTL attribute of terminal records (epoch seconds).
pub const EXPIRE_AT: &str = "expireAt";

/// A custom participant's state table (`twopc-participant-sdk`): one item per transaction, keyed
/// by [`TX_ID`], holding its [`PHASE`] and what the hooks were given; [`DEADLINE`] and
/// [`PENDING`] (the sparse index of unfinished states) and [`EXPIRE_AT`] (TTL, once finished) as
/// on records.
pub const PHASE: &str = "phase";
/// The payload prepare received (what the hooks are given).
pub const PAYLOAD: &str = "payload";
/// When the transaction began (epoch ms).
pub const BEGAN: &str = "began";
/// Bumped by every write of a state: each write is conditional on the revision it read.
pub const REVISION: &str = "revision";
/// A hook call is under way until then (epoch ms); past it, the call counts as interrupted.
pub const CLAIMED_UNTIL: &str = "claimedUntil";
/// Why reserve refused (`{reason, message}`).
pub const REFUSAL: &str = "refusal";

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{Value, json};

    use super::*;
    use crate::ids::TxId;
    use crate::item::{Lock, StoredReservation};
    use crate::op::Operation;
    use crate::record::TxRecord;
    use crate::status::TxStatus;

    fn keys(v: &Value) -> BTreeSet<&str> {
        v.as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn the_serde_derives_spell_the_layouts_names() {
        let lock = Lock {
            tx_id: TxId::random(),
            expires_at: 2,
            began: 1,
            op: Operation::default(),
            coordinator: "c".into(),
        };
        assert_eq!(
            keys(&serde_json::to_value(&lock).expect("lock")),
            [LOCK_TX, LOCK_EXPIRES, LOCK_BEGAN, LOCK_OP, LOCK_COORDINATOR].into()
        );
        let reservation = serde_json::to_value(StoredReservation::of(&lock)).expect("res");
        assert_eq!(
            keys(&reservation),
            [RESERVATION_EXPIRES, RESERVATION_BEGAN, LOCK_OP].into()
        );
        let mut record = TxRecord::never_began(&TxId::random(), 1);
        record.attempts = 1;
        record.retry_after = Some(3);
        record.recovery_asked = Some(4);
        record.decided_at = Some(5);
        record.operator_actions = vec![crate::operator::ActionNote {
            action: crate::operator::OperatorAction::Abort,
            by: "ops".into(),
            at: 6,
            result: crate::operator::DONE.into(),
            status: TxStatus::Aborted,
        }];
        let stored = serde_json::to_value(&record).expect("record");
        for name in [
            TX_ID,
            STATUS,
            PARTICIPANTS,
            VOTES,
            DEADLINE,
            CREATED_AT,
            UPDATED_AT,
            ATTEMPTS,
            RETRY_AFTER,
            RECOVERY_ASKED,
            DECIDED_AT,
            OPERATOR_ACTIONS,
        ] {
            assert!(stored.get(name).is_some(), "the record has no {name}");
        }
        assert_eq!(stored[STATUS], json!(TxStatus::Aborted.as_str()));
    }
}
