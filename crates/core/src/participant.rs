//! The generic participant: prepare (lock + rules), commit (apply + unlock), abort (unlock), and
//! the resolution of an expired lock's owner. Every step is idempotent.
//!
//! The same code runs behind every transport: in the participant Lambda, in the local stack and
//! inside the coordinator (`direct`).
//!
//! Resolution here settles the item it stands on; finishing the owner's other participants is
//! the owner's coordinator's or the sweeper's job (see `docs/architecture.md`), so a participant
//! needs no transport to other services.

use tracing::{error, warn};

use crate::ids::TxId;
use crate::model::{
    CompleteReply, CompleteRequest, FenceOutcome, ItemState, Key, Lock, PrepareReply,
    PrepareRequest, TxRecord, Vote, VoteReason,
};
use crate::op::Condition;
use crate::ports::{
    Clock, CompleteWrite, Created, ParticipantStore, PortError, PrepareWrite, Swapped, TxLog,
};
use crate::status::TxStatus;

/// Tunables of the participant logic.
#[derive(Clone, Debug)]
pub struct ParticipantConfig {
    /// How long a fence entry outlives its transaction's deadline: covers clock skew between
    /// whoever checks deadlines. A prepare later than deadline + this margin is refused by the
    /// deadline check alone, so the entry is no longer needed.
    pub fence_margin_ms: u64,
    /// How many expired owners one prepare resolves before it gives up with `conflict`.
    pub max_resolutions: usize,
}

impl Default for ParticipantConfig {
    fn default() -> Self {
        ParticipantConfig {
            fence_margin_ms: 120_000,
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
            op: req.op.clone(),
            coordinator: req.coordinator.clone(),
        };
        let no = |reason, msg: String| PrepareReply {
            vote: Vote::no(reason, msg),
            prune: vec![],
        };
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
                PrepareWrite::Locked { fence } => {
                    let stale = fence
                        .iter()
                        .filter(|(id, e)| e.expires_at < now && **id != req.tx_id)
                        .map(|(id, _)| id.clone());
                    return Ok(PrepareReply {
                        vote: Vote::Yes,
                        prune: stale.collect(),
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
        let until = self.fence_until(req.deadline);
        let write = self
            .store
            .commit(table, &req.key, &req.tx_id, &req.op, until, &req.prune)
            .await?;
        let item = match write {
            CompleteWrite::Done => return Ok(CompleteReply::Done),
            CompleteWrite::Refused(None) if req.op.delete => {
                // Our delete took the item and its fence with it.
                return Ok(CompleteReply::AlreadyDone);
            }
            CompleteWrite::Refused(item) => item,
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
            // The entry may have been pruned: entries outlive the deadline by the margin only
            // (they exist to refuse late prepares). A decided commit's lock is removed by
            // nobody but its own commit, so once pruning is possible, "no lock and no entry"
            // means applied; before that it can only be a violation.
            None if item.is_some()
                && self.clock.now_ms()
                    > req.deadline.saturating_add(self.config.fence_margin_ms) =>
            {
                warn!(tx_id = %req.tx_id, table, key = %show_key(&req.key),
                    "retried commit past the fence retention: lock gone and entry pruned, taking it as applied");
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
        let until = self.fence_until(req.deadline);
        // A prepare may land between our writes; each round settles one such race.
        for _ in 0..4 {
            let item = match self
                .store
                .abort(table, &req.key, &req.tx_id, until, &req.prune)
                .await?
            {
                CompleteWrite::Done => return Ok(CompleteReply::Done),
                // No item: nothing is locked, and a late prepare of a non-creating op finds
                // nothing to lock; a late creating one leaves an orphan its resolver removes.
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
            if item.lock.as_ref().is_some_and(|l| l.tx_id == req.tx_id) {
                continue; // our prepare landed after the refused write: abort again
            }
            match self
                .store
                .fence_aborted(table, &req.key, &req.tx_id, until)
                .await?
            {
                CompleteWrite::Done => return Ok(CompleteReply::Done),
                CompleteWrite::Refused(_) => continue,
            }
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
                .transition(
                    &record.tx_id,
                    TxStatus::Preparing,
                    TxStatus::Aborting,
                    None,
                    now,
                )
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

    fn fence_until(&self, deadline: u64) -> u64 {
        self.clock.now_ms().max(deadline) + self.config.fence_margin_ms
    }
}

fn complete_request(owner: &Lock, key: &Key) -> CompleteRequest {
    CompleteRequest {
        tx_id: owner.tx_id.clone(),
        deadline: owner.expires_at,
        key: key.clone(),
        op: owner.op.clone(),
        prune: vec![],
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
                expires_at: 10,
            },
        );
        let r = classify_refusal(&item, &lock(&tx, 100, json!({"add": {"b": 1}})), 5);
        assert!(matches!(r, Refusal::Vote(VoteReason::Fenced, _)), "{r:?}");
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
