//! The generic participant passes the SDK's conformance kit (`twopc_participant_sdk::conformance`),
//! each check a named test, on DynamoDB Local: the participant logic behind the `direct`
//! transport (the same code the participant Lambda runs) over `DynamoItems`, once with an
//! exclusive operation (a lock) and once with a commuting one (a reservation).
//!
//! Each transaction of the kit has an item of its own, `{"id": <txId>, "n": 0}`; its operation
//! adds 1 to `n`, so the item tells exactly what the transaction left: its lock or reservation
//! (held), `n` (applied). The kit's failures strike the store's writes (`Faulty`): before one
//! (nothing written), after one (written, the answer lost), or holding one until released.

use std::sync::Arc;

use serde_json::json;
use twopc_core::direct::DirectTransport;
use twopc_core::ids::TxId;
use twopc_core::item::{FenceEntry, ItemState, Key, Lock};
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::participant::{self, Participant, ParticipantConfig};
use twopc_core::ports::{
    Clock, CompleteWrite, Completion, ManualClock, ParticipantStore, PortError, PrepareWrite,
    Transport,
};
use twopc_core::record::Target;
use twopc_core::service::KeySchema;
use twopc_dynamo::{DynamoItems, DynamoTxLog};
use twopc_participant_sdk::conformance::{
    Atomicity, Effects, Entry, Fail, Failure, Faults, Resolved, Step, Tx, UnderTest,
};
use twopc_tests::{World, key, op};

/// The attribute each transaction's commit adds 1 to.
const COUNTER: &str = "n";

/// `DynamoItems` with the kit's failures on the writes of prepare, commit and abort.
#[derive(Clone)]
struct Faulty {
    items: DynamoItems,
    faults: Arc<Faults>,
}

fn lost(at: Fail) -> PortError {
    let context = "injected by the conformance kit".to_owned();
    match at {
        Fail::After => PortError::Undetermined {
            context,
            source: "written, the answer lost".into(),
        },
        _ => PortError::Retryable {
            context,
            source: "failed before writing".into(),
        },
    }
}

impl ParticipantStore for Faulty {
    async fn prepare(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
        hot_until: Option<u64>,
    ) -> Result<PrepareWrite, PortError> {
        let write = self.items.prepare(table, key, lock, hot_until);
        self.faults.around(Step::Prepare, write, lost).await
    }

    async fn reserve(
        &self,
        table: &str,
        key: &Key,
        lock: &Lock,
        hot_until: Option<u64>,
        now: u64,
        most: usize,
    ) -> Result<PrepareWrite, PortError> {
        let write = self.items.reserve(table, key, lock, hot_until, now, most);
        self.faults.around(Step::Prepare, write, lost).await
    }

    async fn commit(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
    ) -> Result<CompleteWrite, PortError> {
        let write = self.items.commit(table, key, c);
        self.faults.around(Step::Commit, write, lost).await
    }

    async fn abort(
        &self,
        table: &str,
        key: &Key,
        c: &Completion<'_>,
    ) -> Result<CompleteWrite, PortError> {
        let write = self.items.abort(table, key, c);
        self.faults.around(Step::Abort, write, lost).await
    }

    async fn reset_escrow(
        &self,
        table: &str,
        key: &Key,
        attributes: &[&str],
    ) -> Result<(), PortError> {
        self.items.reset_escrow(table, key, attributes).await
    }

    async fn pause_reservations(
        &self,
        table: &str,
        key: &Key,
        until: u64,
    ) -> Result<(), PortError> {
        self.items.pause_reservations(table, key, until).await
    }

    async fn fence_aborted(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        entry: FenceEntry,
        capacity: usize,
    ) -> Result<CompleteWrite, PortError> {
        let write = self.items.fence_aborted(table, key, tx, entry, capacity);
        self.faults.around(Step::Abort, write, lost).await
    }

    async fn bury_aborted(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        entry: FenceEntry,
    ) -> Result<CompleteWrite, PortError> {
        let write = self.items.bury_aborted(table, key, tx, entry);
        self.faults.around(Step::Abort, write, lost).await
    }

    async fn drop_lock(
        &self,
        table: &str,
        key: &Key,
        holder: &Lock,
    ) -> Result<CompleteWrite, PortError> {
        self.items.drop_lock(table, key, holder).await
    }

    async fn retire(
        &self,
        table: &str,
        key: &Key,
        tx: &TxId,
        former: FenceEntry,
        horizon: u64,
    ) -> Result<CompleteWrite, PortError> {
        self.items.retire(table, key, tx, former, horizon).await
    }

    async fn expired_locks(
        &self,
        table: &str,
        key: &KeySchema,
        now: u64,
        limit: usize,
    ) -> Result<Vec<(Key, Lock)>, PortError> {
        self.items.expired_locks(table, key, now, limit).await
    }

    async fn read(&self, table: &str, key: &Key) -> Result<Option<ItemState>, PortError> {
        self.items.read(table, key).await
    }
}

/// The generic participant on a fresh `accounts` table, reached as the coordinator's `direct`
/// transport reaches it.
struct Generic {
    world: World,
    transport: DirectTransport<Faulty, DynamoTxLog, ManualClock>,
    faults: Arc<Faults>,
    /// Lock the item (the operation also sets an attribute) rather than reserve it.
    exclusive: bool,
}

async fn generic(exclusive: bool) -> Generic {
    let world = World::new().await;
    let faults = Arc::new(Faults::default());
    let store = Faulty {
        items: DynamoItems::new(world.client.clone()),
        faults: faults.clone(),
    };
    let participant = Participant::new(
        store,
        world.log.clone(),
        world.clock.clone(),
        ParticipantConfig::default(),
    );
    Generic {
        transport: DirectTransport::new(participant),
        world,
        faults,
        exclusive,
    }
}

fn failed(e: impl std::fmt::Display) -> Failure {
    Failure::Failed(e.to_string())
}

fn resolved(r: participant::Resolved) -> Resolved {
    match r {
        participant::Resolved::OwnerLive | participant::Resolved::NeedsRecovery => Resolved::Left,
        participant::Resolved::Aborted => Resolved::Cancelled,
        participant::Resolved::RolledForward => Resolved::Confirmed,
        participant::Resolved::DroppedStale => Resolved::Violation,
    }
}

impl Generic {
    fn target(&self) -> Target {
        Target::Direct {
            table: self.world.accounts.clone(),
        }
    }

    fn participant(&self) -> &Participant<Faulty, DynamoTxLog, ManualClock> {
        self.transport.participant()
    }

    /// The transaction's own item, `n` at 0.
    async fn item_for(&self, tx: &TxId) -> Key {
        let label = "not a number";
        self.world
            .seed("accounts", tx.as_str(), json!({COUNTER: 0, "label": label}))
            .await;
        key(tx.as_str())
    }

    async fn read(&self, key: &Key) -> Option<ItemState> {
        let table = &self.world.accounts;
        let item = self.participant().store().read(table, key).await;
        item.expect("read the item")
    }

    /// Settles `holder` on `key` by the lock rule, as a prepare meeting it or the sweeper does.
    async fn settle(&self, key: &Key, holder: &Lock) -> Result<Resolved, Failure> {
        let table = &self.world.accounts;
        let r = self.participant().resolve(table, key, holder).await;
        r.map(resolved).map_err(failed)
    }
}

impl UnderTest for Generic {
    type Log = DynamoTxLog;

    fn log(&self) -> &DynamoTxLog {
        &self.world.log
    }

    fn clock(&self) -> &ManualClock {
        &self.world.clock
    }

    fn atomicity(&self) -> Atomicity {
        Atomicity::OneWrite
    }

    fn faults(&self) -> &Faults {
        &self.faults
    }

    async fn valid(&self, tx: &TxId) -> Entry {
        let o = if self.exclusive {
            json!({"add": {COUNTER: 1}, "set": {"memo": "conformance kit"}})
        } else {
            json!({"add": {COUNTER: 1}})
        };
        Entry {
            key: self.item_for(tx).await,
            op: op(o),
            payload: None,
        }
    }

    async fn invalid(&self, tx: &TxId) -> Entry {
        // An `add` to an attribute that is not a number: refused by the write's own condition.
        Entry {
            key: self.item_for(tx).await,
            op: op(json!({"add": {"label": 1}, "set": {"memo": "conformance kit"}})),
            payload: None,
        }
    }

    async fn prepare(&self, req: &PrepareRequest) -> Result<PrepareReply, Failure> {
        let reply = self.transport.prepare(&self.target(), req).await;
        reply.map_err(failed)
    }

    async fn commit(&self, req: &CompleteRequest) -> Result<CompleteReply, Failure> {
        let reply = self.transport.commit(&self.target(), req).await;
        reply.map_err(failed)
    }

    async fn abort(&self, req: &CompleteRequest) -> Result<CompleteReply, Failure> {
        let reply = self.transport.abort(&self.target(), req).await;
        reply.map_err(failed)
    }

    async fn inquire(&self, req: &InquireRequest) -> Result<InquireReply, Failure> {
        let reply = self.transport.inquire(&self.target(), req).await;
        reply.map_err(failed)
    }

    async fn resolve(&self, tx: &Tx) -> Result<Resolved, Failure> {
        let item = self.read(&tx.entry.key).await;
        let holder = item.and_then(|i| {
            let lock = i.lock.filter(|l| l.tx_id == tx.id);
            lock.or_else(|| i.reservations.get(&tx.id).cloned())
        });
        match holder {
            Some(holder) => self.settle(&tx.entry.key, &holder).await,
            None => Ok(Resolved::Left),
        }
    }

    /// The sweeper's pass over this table's expired locks and reservations.
    async fn sweep(&self) -> Result<Vec<(TxId, Resolved)>, Failure> {
        let (table, now) = (&self.world.accounts, self.world.clock.now_ms());
        let schema = KeySchema::string_hash("id");
        let store = self.participant().store();
        let expired = store.expired_locks(table, &schema, now, 100).await;
        let mut out = vec![];
        for (key, holder) in expired.map_err(failed)? {
            let r = self.settle(&key, &holder).await?;
            out.push((holder.tx_id, r));
        }
        Ok(out)
    }

    async fn effects(&self, tx: &Tx) -> Option<Effects> {
        let Some(item) = self.read(&tx.entry.key).await else {
            panic!("the item of {} is gone", tx.id);
        };
        let locked = item.lock.as_ref().is_some_and(|l| l.tx_id == tx.id);
        // A reservation counts in the escrow of each attribute it changes: a reservation made
        // twice would show there, not in the map of reservations keyed by transaction.
        let escrowed = item.escrow.get(COUNTER).map_or(0, |e| e.count);
        let reserved = escrowed.max(u64::from(item.reservations.contains_key(&tx.id)));
        let n = item.attributes.get(COUNTER).map(|v| v.to_string());
        let applied = n
            .as_deref()
            .unwrap_or("absent")
            .parse()
            .unwrap_or_else(|_| {
                panic!("{COUNTER} of {} is not a small count: {n:?}", tx.id);
            });
        Some(Effects {
            held: u32::from(locked) + u32::try_from(reserved).unwrap_or(u32::MAX),
            applied,
            calls: None,
        })
    }
}

mod locked {
    twopc_participant_sdk::conformance_tests!(one_write: super::generic(true).await);
}

mod reserved {
    twopc_participant_sdk::conformance_tests!(one_write: super::generic(false).await);
}
