//! The generic participant: prepare (lock + rules), commit (apply + unlock), abort (unlock), and
//! the resolution of an expired lock's owner. Every step is idempotent.
//!
//! The same code runs behind every transport: in the participant Lambda, in the local stack and
//! inside the coordinator (`direct`).
//!
//! Resolution here settles the item it stands on; finishing the owner's other participants is
//! the owner's coordinator's or the sweeper's job (see `docs/architecture.md`), so a participant
//! needs no transport to other services.

use std::collections::BTreeMap;

use tracing::{error, info, warn};

use crate::ids::TxId;
use crate::model::{
    CompleteReply, CompleteRequest, FenceEntry, FenceOutcome, ItemState, Key, Lock, PrepareReply,
    PrepareRequest, Prune, TxRecord, Vote, VoteReason,
};
use crate::op::Condition;
use crate::ports::{
    Clock, CompleteWrite, Created, ParticipantStore, PortError, PrepareWrite, Swapped, TxLog,
};
use crate::status::TxStatus;

/// Tunables of the participant logic.
///
/// Neither fence setting bears on safety: whenever an entry is removed, the item's horizon
/// rises to cover its transaction (see "The fence horizon" in `docs/architecture.md`). They
/// trade item size against refusing a live transaction's slow prepare.
#[derive(Clone, Debug)]
pub struct ParticipantConfig {
    /// How long past its transaction's deadline a fence entry is kept when the fence has room
    /// for it. Sized to the clock skew between coordinators and participants: a prepare can
    /// only be refused by the horizon a stale entry raised if its transaction began before one
    /// whose deadline plus this margin had passed.
    pub fence_margin_ms: u64,
    /// Most entries a fence keeps after a commit or abort that prunes (a lock-free abort may add
    /// one past it until the next). Bounds the item's size: an entry takes ~90 bytes, so the
    /// default costs at most ~3 KB. A prepare is refused by the horizon only if more than this
    /// many transactions that began after its own ended on the item before it landed.
    pub fence_capacity: usize,
    /// How many expired owners one prepare resolves before it gives up with `conflict`.
    pub max_resolutions: usize,
}

impl Default for ParticipantConfig {
    fn default() -> Self {
        ParticipantConfig {
            fence_margin_ms: 10_000,
            fence_capacity: 32,
            max_resolutions: 3,
        }
    }
}

/// The participant logic over a store of items and the transaction log.
#[derive(Clone, Debug)]
pub struct Participant<S, L, C> {
    store: S,
    log: L,
    clock: C,
    config: ParticipantConfig,
}

/// What resolving an expired lock's owner did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The owner is still live (its deadline has not passed): the lock stands.
    OwnerLive,
    /// The owner was (or is now) aborted; its lock on this item is gone.
    Aborted,
    /// The owner had decided to commit; its operation is now applied here.
    RolledForward,
    /// The owner was committed; this lock was a stale duplicate, removed unapplied.
    DroppedStale,
}

impl<S: ParticipantStore, L: TxLog, C: Clock> Participant<S, L, C> {
    /// Wires the logic.
    pub fn new(store: S, log: L, clock: C, config: ParticipantConfig) -> Self {
        Participant {
            store,
            log,
            clock,
            config,
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Prepare: lock the item for the transaction and check the operation's rules.
    pub async fn prepare(
        &self,
        table: &str,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, PortError> {
        let lock = Lock {
            tx_id: req.tx_id.clone(),
            expires_at: req.deadline,
            began: req.began,
            op: req.op.clone(),
            coordinator: req.coordinator.clone(),
        };
        let no = |reason, msg: String| PrepareReply::no(reason, msg);
        for attempt in 0..=self.config.max_resolutions {
            let now = self.clock.now_ms();
            if now >= req.deadline {
                return Ok(no(
                    VoteReason::Expired,
                    format!(
                        "the transaction's deadline passed {} ms ago",
                        now - req.deadline
                    ),
                ));
            }
            let item = match self.store.prepare(table, &req.key, &lock).await? {
                PrepareWrite::Locked { fence, horizon } => {
                    return Ok(PrepareReply {
                        vote: Vote::Yes,
                        prune: plan_prune(
                            &fence,
                            horizon,
                            &req.tx_id,
                            now,
                            self.config.fence_capacity,
                        ),
                    });
                }
                PrepareWrite::Refused(None) => {
                    return Ok(no(
                        VoteReason::NotFound,
                        format!("no item with key {}", show_key(&req.key)),
                    ));
                }
                PrepareWrite::Refused(Some(item)) => item,
            };
            match classify_refusal(&item, &lock, now) {
                Refusal::Vote(reason, message) => return Ok(no(reason, message)),
                Refusal::ExpiredOwner(owner) => {
                    if attempt == self.config.max_resolutions {
                        break;
                    }
                    if self.resolve(table, &req.key, &owner).await? == Resolution::OwnerLive {
                        return Ok(no(
                            VoteReason::Conflict,
                            format!("locked by live transaction {}", owner.tx_id),
                        ));
                    }
                }
            }
        }
        Ok(no(
            VoteReason::Conflict,
            "the item kept being locked by other transactions".to_owned(),
        ))
    }

    /// Commit: apply the operation of the record and release the lock.
    pub async fn commit(
        &self,
        table: &str,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, PortError> {
        let entry = self.entry(FenceOutcome::Committed, req);
        let mut prune = req.prune.as_ref();
        let item = loop {
            let write = self
                .store
                .commit(table, &req.key, &req.tx_id, &req.op, entry, prune)
                .await?;
            match write {
                CompleteWrite::Done => return Ok(CompleteReply::Done),
                CompleteWrite::Refused(None) if req.op.delete => {
                    // Our prepare locked the item and only our delete could consume that lock;
                    // it left a tombstone, which someone outside the protocol removed since.
                    return Ok(CompleteReply::AlreadyDone);
                }
                // Still ours: the horizon rose past the prune's since our prepare (a lock-free
                // abort of a full fence). Commit without pruning rather than lower it.
                CompleteWrite::Refused(Some(item))
                    if prune.is_some() && holds(&item, &req.tx_id) =>
                {
                    prune = None;
                }
                CompleteWrite::Refused(item) => break item,
            }
        };
        let found = item
            .as_deref()
            .and_then(|i| i.fence.get(&req.tx_id))
            .map(|e| e.outcome);
        Ok(match found {
            Some(FenceOutcome::Committed) => CompleteReply::AlreadyDone,
            Some(FenceOutcome::Aborted) => violation(
                table,
                &req.key,
                &req.tx_id,
                "commit of a transaction this item recorded as aborted",
            ),
            // The entry may have been pruned, and then the horizon covers the transaction. A
            // decided commit's lock is removed by nobody but its own commit, so "no lock, no
            // entry, covered by the horizon" means applied; uncovered, it is a violation.
            None if item.as_deref().is_some_and(|i| req.began <= i.horizon) => {
                info!(tx_id = %req.tx_id, table, key = %show_key(&req.key),
                    "retried commit: lock gone and entry pruned under the horizon, so it was applied");
                CompleteReply::AlreadyDone
            }
            None => {
                let lock = item
                    .as_deref()
                    .and_then(|i| i.lock.as_ref())
                    .map(|l| l.tx_id.to_string());
                violation(
                    table,
                    &req.key,
                    &req.tx_id,
                    &format!(
                        "commit found neither its lock nor its fence entry (item {}, lock held by {})",
                        if item.is_some() { "present" } else { "absent" },
                        lock.as_deref().unwrap_or("nobody")
                    ),
                )
            }
        })
    }

    /// Abort: release the lock without applying anything, and fence the transaction out.
    pub async fn abort(
        &self,
        table: &str,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, PortError> {
        let entry = self.entry(FenceOutcome::Aborted, req);
        let mut prune = req.prune.as_ref();
        // Whose write comes first: the lock holder's release, unless this item refused the
        // prepare (then the lock is most likely someone else's or nobody's, and fencing
        // first saves the release's refused write).
        let mut release = !req.refused;
        // A prepare may land between our writes; each write settles one such race.
        for _ in 0..6 {
            let write = if release {
                self.store
                    .abort(table, &req.key, &req.tx_id, entry, prune)
                    .await?
            } else {
                self.store
                    .fence_aborted(
                        table,
                        &req.key,
                        &req.tx_id,
                        entry,
                        self.config.fence_capacity,
                    )
                    .await?
            };
            let item = match write {
                CompleteWrite::Done => return Ok(CompleteReply::Done),
                // No item: nothing is locked and nothing fences us out. A late prepare of ours
                // finds nothing to lock, unless someone creates the item first (or ours is a
                // creating op): then it leaves an orphan lock, which the lock rule removes once
                // it expires, applying nothing (its record is aborted). Accepted: fencing a key
                // that does not exist would take a write and leave a tombstone for every
                // failed transaction naming a missing key (docs/architecture.md).
                CompleteWrite::Refused(None) => return Ok(CompleteReply::AlreadyDone),
                CompleteWrite::Refused(Some(item)) => item,
            };
            match item.fence.get(&req.tx_id).map(|e| e.outcome) {
                Some(FenceOutcome::Aborted) => return Ok(CompleteReply::AlreadyDone),
                Some(FenceOutcome::Committed) => {
                    return Ok(violation(
                        table,
                        &req.key,
                        &req.tx_id,
                        "abort of a transaction this item recorded as committed",
                    ));
                }
                None => {}
            }
            if holds(&item, &req.tx_id) {
                // Our prepare holds the lock (it landed after a refused write), or the horizon
                // rose past the prune's since our prepare: release, without pruning.
                prune = None;
                release = true;
                continue;
            }
            if req.began <= item.horizon {
                // No prepare of ours can land here any more: nothing to fence.
                return Ok(CompleteReply::AlreadyDone);
            }
            // Someone else's lock, or none: fence the transaction out.
            release = false;
        }
        Err(PortError::Retryable {
            context: format!("abort of {} on {table}", req.tx_id),
            source: "the item kept changing under the abort".into(),
        })
    }

    /// Settles an expired lock's owner on this item, following the lock rule of DESIGN.md.
    pub async fn resolve(
        &self,
        table: &str,
        key: &Key,
        owner: &Lock,
    ) -> Result<Resolution, PortError> {
        let now = self.clock.now_ms();
        let record = match self.log.get(&owner.tx_id).await? {
            Some(record) => record,
            None => match self.log.create_aborted(&owner.tx_id, now).await? {
                // The owner never began: it is now recorded aborted and can never begin.
                Created::New => {
                    warn!(tx_id = %owner.tx_id, table, "lock of a transaction that never began: recorded it ABORTED");
                    self.abort_here(table, key, owner).await?;
                    return Ok(Resolution::Aborted);
                }
                Created::Exists(record) => *record,
            },
        };
        self.follow(table, key, owner, record).await
    }

    async fn follow(
        &self,
        table: &str,
        key: &Key,
        owner: &Lock,
        record: TxRecord,
    ) -> Result<Resolution, PortError> {
        let now = self.clock.now_ms();
        let record = if record.status == TxStatus::Preparing {
            if now <= record.deadline {
                return Ok(Resolution::OwnerLive);
            }
            // Past its deadline and undecided: decide abort, by compare-and-swap. If the owner's
            // coordinator decided first, we follow its decision instead.
            match self
                .log
                .transition(&record, TxStatus::Aborting, None, now)
                .await?
            {
                Swapped::Done(r) => *r,
                Swapped::Lost(Some(r)) => *r,
                Swapped::Lost(None) => {
                    return Err(PortError::Fatal {
                        context: format!("resolving {}", record.tx_id),
                        source: "the transaction record vanished".into(),
                    });
                }
            }
        } else {
            record
        };
        match record.status {
            TxStatus::Preparing => Ok(Resolution::OwnerLive),
            TxStatus::Committing => {
                let req = complete_request(owner, key);
                let reply = self.commit(table, &req).await?;
                if !reply.acknowledged() {
                    return Err(PortError::Fatal {
                        context: format!("rolling {} forward on {table}", owner.tx_id),
                        source: "protocol violation (logged)".into(),
                    });
                }
                Ok(Resolution::RolledForward)
            }
            TxStatus::Aborting | TxStatus::Aborted => {
                self.abort_here(table, key, owner).await?;
                Ok(Resolution::Aborted)
            }
            TxStatus::Committed => {
                // Every participant acknowledged before COMMITTED was written, so this lock is a
                // duplicate prepare that slipped past the fence: drop it, never apply it.
                error!(tx_id = %owner.tx_id, table, key = %show_key(key),
                    "stale lock of a COMMITTED transaction found; removing it without applying its operation");
                self.store.drop_lock(table, key, &owner.tx_id).await?;
                Ok(Resolution::DroppedStale)
            }
        }
    }

    async fn abort_here(&self, table: &str, key: &Key, owner: &Lock) -> Result<(), PortError> {
        let reply = self.abort(table, &complete_request(owner, key)).await?;
        if reply.acknowledged() {
            Ok(())
        } else {
            Err(PortError::Fatal {
                context: format!("aborting {} on {table}", owner.tx_id),
                source: "protocol violation (logged)".into(),
            })
        }
    }

    /// The fence entry a commit or abort of `req` writes.
    fn entry(&self, outcome: FenceOutcome, req: &CompleteRequest) -> FenceEntry {
        FenceEntry {
            outcome,
            began: req.began,
            expires_at: self.clock.now_ms().max(req.deadline) + self.config.fence_margin_ms,
        }
    }
}

/// What the lock holder's commit or abort prunes from the fence it found when its prepare took
/// the lock (pure): every stale entry (past its `expires_at`), and the oldest entries (by
/// `began`) beyond `capacity - 1`, leaving room for its own. The horizon rises to the latest
/// `began` removed, so no prepare of a removed transaction can ever land again. `None`: nothing
/// to prune.
pub fn plan_prune(
    fence: &BTreeMap<TxId, FenceEntry>,
    horizon: u64,
    holder: &TxId,
    now: u64,
    capacity: usize,
) -> Option<Prune> {
    let mut others: Vec<(&TxId, &FenceEntry)> =
        fence.iter().filter(|(id, _)| *id != holder).collect();
    // Newest first: those are the ones whose prepares may still be in flight.
    others.sort_by(|a, b| b.1.began.cmp(&a.1.began).then_with(|| a.0.cmp(b.0)));
    let room = capacity.saturating_sub(1);
    let (mut kept, mut ids, mut new_horizon) = (0, vec![], horizon);
    for (id, e) in others {
        if e.expires_at < now || kept >= room {
            ids.push(id.clone());
            new_horizon = new_horizon.max(e.began);
        } else {
            kept += 1;
        }
    }
    (!ids.is_empty()).then_some(Prune {
        ids,
        horizon: new_horizon,
    })
}

fn holds(item: &ItemState, tx: &TxId) -> bool {
    item.lock.as_ref().is_some_and(|l| &l.tx_id == tx)
}

fn complete_request(owner: &Lock, key: &Key) -> CompleteRequest {
    CompleteRequest {
        tx_id: owner.tx_id.clone(),
        deadline: owner.expires_at,
        began: owner.began,
        key: key.clone(),
        op: owner.op.clone(),
        prune: None,
        refused: false,
    }
}

fn violation(table: &str, key: &Key, tx: &TxId, what: &str) -> CompleteReply {
    error!(tx_id = %tx, table, key = %show_key(key), "PROTOCOL VIOLATION: {what}");
    CompleteReply::Violation {
        message: format!("{what} (table {table}, key {})", show_key(key)),
    }
}

/// Renders a key for messages.
pub fn show_key(key: &Key) -> String {
    serde_json::to_string(key).unwrap_or_else(|_| "?".to_owned())
}

/// Why a conditional prepare was refused, read off the item as it was.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// Vote no.
    Vote(VoteReason, String),
    /// Another transaction's lock expired: resolve its owner, then try again.
    ExpiredOwner(Lock),
}

/// Classifies a refused prepare from the item it found (pure).
pub fn classify_refusal(item: &ItemState, lock: &Lock, now: u64) -> Refusal {
    if let Some(entry) = item.fence.get(&lock.tx_id) {
        let outcome = match entry.outcome {
            FenceOutcome::Committed => "committed",
            FenceOutcome::Aborted => "aborted",
        };
        return Refusal::Vote(
            VoteReason::Fenced,
            format!("transaction {} already {outcome} on this item", lock.tx_id),
        );
    }
    if item.lock.as_ref().is_none_or(|o| o.tx_id != lock.tx_id) && lock.began <= item.horizon {
        return Refusal::Vote(
            VoteReason::Fenced,
            format!(
                "transaction {} began at or before this item's fence horizon ({} ms): it ended here already, or more than the fence's capacity of later transactions ended here before this prepare",
                lock.tx_id, item.horizon
            ),
        );
    }
    if let Some(owner) = item.lock.as_ref().filter(|o| o.tx_id != lock.tx_id) {
        if now > owner.expires_at {
            return Refusal::ExpiredOwner(owner.clone());
        }
        return Refusal::Vote(
            VoteReason::Conflict,
            format!(
                "locked by transaction {} (deadline in {} ms)",
                owner.tx_id,
                owner.expires_at - now
            ),
        );
    }
    if item.tombstone {
        return if lock.op.creates() {
            // A creating prepare may take a tombstone; refused, it met a race.
            Refusal::Vote(
                VoteReason::Conflict,
                "the deleted item changed while preparing".to_owned(),
            )
        } else {
            Refusal::Vote(
                VoteReason::NotFound,
                "no such item (it was deleted)".to_owned(),
            )
        };
    }
    if lock.op.creates() {
        return Refusal::Vote(
            VoteReason::Condition,
            "put: the item already exists".to_owned(),
        );
    }
    if item.placeholder {
        return Refusal::Vote(
            VoteReason::NotFound,
            "no such item (it is being created)".to_owned(),
        );
    }
    for name in lock.op.add.keys() {
        if let Some(v) = item.attributes.get(name).filter(|v| !v.is_number()) {
            return Refusal::Vote(
                VoteReason::Invalid,
                format!("add: attribute {name:?} is not a number (it is {v})"),
            );
        }
    }
    let failed: Vec<String> = lock
        .op
        .require
        .iter()
        .map(|(name, cond)| {
            let current = item
                .attributes
                .get(name)
                .map_or_else(|| "absent".to_owned(), |v| v.to_string());
            let want = match cond {
                Condition::Exists => "exists".to_owned(),
                Condition::NotExists => "notExists".to_owned(),
                Condition::Compare(c, v) => format!("{} {v}", c.name()),
            };
            format!("{name} {want} (is {current})")
        })
        .collect();
    Refusal::Vote(
        VoteReason::Condition,
        format!("a required condition does not hold: {}", failed.join(", ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FenceEntry;
    use crate::op::Operation;
    use serde_json::json;

    fn lock(tx: &TxId, expires_at: u64, op: serde_json::Value) -> Lock {
        Lock {
            tx_id: tx.clone(),
            expires_at,
            began: expires_at - 5,
            op: Operation::from_json("op", &op).expect("op"),
            coordinator: "t".into(),
        }
    }

    #[test]
    fn fence_entry_refuses_a_late_prepare() {
        let tx = TxId::random();
        let mut item = ItemState::default();
        item.fence.insert(
            tx.clone(),
            FenceEntry {
                outcome: FenceOutcome::Committed,
                began: 1,
                expires_at: 10,
            },
        );
        let r = classify_refusal(&item, &lock(&tx, 100, json!({"add": {"b": 1}})), 5);
        assert!(matches!(r, Refusal::Vote(VoteReason::Fenced, _)), "{r:?}");
    }

    #[test]
    fn the_horizon_refuses_a_prepare_that_began_at_or_before_it_unless_the_lock_is_its_own() {
        let tx = TxId::random();
        let mine = lock(&tx, 100, json!({"add": {"b": 1}})); // began 95
        let mut item = ItemState {
            horizon: 95,
            ..Default::default()
        };
        let r = classify_refusal(&item, &mine, 5);
        assert!(
            matches!(&r, Refusal::Vote(VoteReason::Fenced, m) if m.contains("horizon")),
            "{r:?}"
        );
        item.horizon = 94;
        assert!(
            !matches!(
                classify_refusal(&item, &mine, 5),
                Refusal::Vote(VoteReason::Fenced, _)
            ),
            "a transaction that began after the horizon is not fenced by it"
        );
        item.horizon = 99;
        item.lock = Some(mine.clone());
        assert!(
            !matches!(
                classify_refusal(&item, &mine, 5),
                Refusal::Vote(VoteReason::Fenced, _)
            ),
            "a retried prepare finding its own lock is not fenced by a horizon raised meanwhile"
        );
    }

    fn fence(entries: &[(u64, u64)]) -> (Vec<TxId>, BTreeMap<TxId, FenceEntry>) {
        let ids: Vec<TxId> = entries.iter().map(|_| TxId::random()).collect();
        let map = ids
            .iter()
            .zip(entries)
            .map(|(id, &(began, expires_at))| {
                (
                    id.clone(),
                    FenceEntry {
                        outcome: FenceOutcome::Committed,
                        began,
                        expires_at,
                    },
                )
            })
            .collect();
        (ids, map)
    }

    #[test]
    fn prune_removes_stale_entries_and_raises_the_horizon_to_the_latest_removed() {
        // (began, expires_at); now = 100
        let (ids, f) = fence(&[(10, 50), (30, 99), (40, 200), (20, 300)]);
        let me = TxId::random();
        let p = plan_prune(&f, 5, &me, 100, 32).expect("something to prune");
        let mut want = vec![ids[0].clone(), ids[1].clone()];
        want.sort();
        let mut got = p.ids.clone();
        got.sort();
        assert_eq!(got, want);
        assert_eq!(p.horizon, 30, "the latest began among removed entries");
        // Nothing stale, room enough: nothing to do.
        assert_eq!(plan_prune(&f, 5, &me, 0, 32), None);
        // A horizon already above the removed entries stays.
        assert_eq!(plan_prune(&f, 77, &me, 100, 32).expect("prune").horizon, 77);
    }

    #[test]
    fn prune_keeps_the_newest_entries_within_capacity_and_never_its_own() {
        let (ids, mut f) = fence(&[(10, 500), (40, 500), (20, 500), (30, 500)]);
        let me = TxId::random();
        f.insert(
            me.clone(),
            FenceEntry {
                outcome: FenceOutcome::Aborted,
                began: 1,
                expires_at: 0,
            },
        );
        // Capacity 3: room for two others besides the holder's own entry.
        let p = plan_prune(&f, 0, &me, 100, 3).expect("over capacity");
        let mut got = p.ids.clone();
        got.sort();
        let mut want = vec![ids[0].clone(), ids[2].clone()]; // began 10 and 20
        want.sort();
        assert_eq!(got, want);
        assert_eq!(p.horizon, 20);
        assert!(!p.ids.contains(&me));
    }

    #[test]
    fn live_lock_is_a_conflict_and_expired_lock_is_resolved_not_taken() {
        let (me, other) = (TxId::random(), TxId::random());
        let item = ItemState {
            lock: Some(lock(&other, 50, json!({"add": {"b": 1}}))),
            ..Default::default()
        };
        let mine = lock(&me, 100, json!({"add": {"b": 1}}));
        assert!(matches!(
            classify_refusal(&item, &mine, 49),
            Refusal::Vote(VoteReason::Conflict, _)
        ));
        assert!(
            matches!(classify_refusal(&item, &mine, 51), Refusal::ExpiredOwner(l) if l.tx_id == other)
        );
    }

    #[test]
    fn failed_require_names_the_current_value() {
        let tx = TxId::random();
        let item = ItemState {
            attributes: [("balance".to_owned(), json!(50))].into(),
            ..Default::default()
        };
        let r = classify_refusal(
            &item,
            &lock(
                &tx,
                100,
                json!({"add": {"balance": -100}, "require": {"balance": {"gte": 100}}}),
            ),
            1,
        );
        match r {
            Refusal::Vote(VoteReason::Condition, m) => {
                assert!(m.contains("balance gte 100 (is 50)"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn add_to_a_non_number_is_invalid() {
        let tx = TxId::random();
        let item = ItemState {
            attributes: [("balance".to_owned(), json!("x"))].into(),
            ..Default::default()
        };
        let r = classify_refusal(&item, &lock(&tx, 100, json!({"add": {"balance": 1}})), 1);
        assert!(matches!(r, Refusal::Vote(VoteReason::Invalid, _)), "{r:?}");
    }

    #[test]
    fn put_on_an_existing_item_fails_its_condition() {
        let tx = TxId::random();
        let r = classify_refusal(
            &ItemState::default(),
            &lock(&tx, 100, json!({"put": {"a": 1}})),
            1,
        );
        assert!(
            matches!(r, Refusal::Vote(VoteReason::Condition, _)),
            "{r:?}"
        );
    }
}
