//! The transaction log in memory: conditional status swaps, the overdue query, the backoff,
//! and what an operator lists and notes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::ids::TxId;
use crate::operator::{ActionNote, Counts, ListCursor, ListPage, ListQuery};
use crate::ports::{Created, OperatorLog, PortError, Swapped, TxLog, check_transition};
use crate::record::{TxRecord, Vote};
use crate::status::TxStatus;

use super::poisoned;

/// The transaction log in memory. Clones share the records.
#[derive(Clone, Debug, Default)]
pub struct MemoryTxLog {
    pub(super) records: Arc<Mutex<BTreeMap<TxId, TxRecord>>>,
}

impl MemoryTxLog {
    /// Removes `tx`'s record, as its time-to-live (`expireAt`) does once it ended: its id may
    /// begin again (an idempotency key used after its window).
    pub fn expire(&self, tx: &TxId) {
        let _ = self.with(|r| r.remove(tx));
    }

    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<TxId, TxRecord>) -> T) -> Result<T, PortError> {
        let mut records = self.records.lock().map_err(|_| poisoned("log"))?;
        Ok(f(&mut records))
    }
}

impl TxLog for MemoryTxLog {
    async fn create(&self, record: &TxRecord) -> Result<Created, PortError> {
        self.with(|r| match r.get(&record.tx_id) {
            Some(existing) => Created::Exists(Box::new(existing.clone())),
            None => {
                r.insert(record.tx_id.clone(), record.clone());
                Created::New
            }
        })
    }

    async fn get(&self, tx: &TxId) -> Result<Option<TxRecord>, PortError> {
        self.with(|r| r.get(tx).cloned())
    }

    async fn transition(
        &self,
        record: &TxRecord,
        to: TxStatus,
        votes: Option<&[Vote]>,
        now: u64,
    ) -> Result<Swapped, PortError> {
        check_transition(record, to)?;
        let (tx, from) = (&record.tx_id, record.status);
        self.with(|r| match r.get_mut(tx) {
            Some(stored) if stored.status == from => {
                // The swap writes only the status, the time, the votes and (terminal) clears
                // the backoff: the rest of the stored record stays as it is.
                let moved = stored.moved(to, votes, now);
                *stored = moved;
                Swapped::Done(Box::new(record.moved(to, votes, now)))
            }
            Some(stored) => Swapped::Lost(Some(Box::new(stored.clone()))),
            None => Swapped::Lost(None),
        })
    }

    async fn create_aborted(&self, tx: &TxId, began: u64, now: u64) -> Result<Created, PortError> {
        self.create(&TxRecord::never_began(tx, now).created(began))
            .await
    }

    async fn overdue(&self, now: u64, limit: usize) -> Result<Vec<TxRecord>, PortError> {
        self.with(|r| {
            let mut found: Vec<TxRecord> = r
                .values()
                .filter(|x| !x.status.is_terminal() && x.deadline < now)
                .filter(|x| x.retry_after.is_none_or(|t| t < now))
                .cloned()
                .collect();
            found.sort_by_key(|x| x.deadline);
            found.truncate(limit);
            found
        })
    }

    async fn oldest_pending_deadline(&self) -> Result<Option<u64>, PortError> {
        self.with(|r| {
            r.values()
                .filter(|x| !x.status.is_terminal())
                .map(|x| x.deadline)
                .min()
        })
    }

    async fn note_failed_attempt(
        &self,
        tx: &TxId,
        retry_after: u64,
        now: u64,
    ) -> Result<(), PortError> {
        self.with(|r| {
            if let Some(x) = r.get_mut(tx).filter(|x| !x.status.is_terminal()) {
                x.attempts += 1;
                x.retry_after = Some(retry_after);
                x.updated_at = now;
            }
        })
    }

    async fn ask_recovery(&self, tx: &TxId, now: u64) -> Result<bool, PortError> {
        self.with(|r| match r.get_mut(tx) {
            Some(x) if x.status == TxStatus::Staging && x.recovery_asked.is_none() => {
                x.recovery_asked = Some(now);
                x.updated_at = now;
                true
            }
            _ => false,
        })
    }
}

impl OperatorLog for MemoryTxLog {
    async fn list(&self, q: &ListQuery) -> Result<ListPage, PortError> {
        self.with(|r| {
            // The index's entries, in its order: (deadline, id) ascending for unfinished records;
            // (end, id) descending for ended ones (the end is a terminal record's `updatedAt`).
            let ended = q.ended();
            let mut entries: Vec<(ListCursor, &TxRecord)> = r
                .values()
                .filter(|x| x.status.is_terminal() == ended)
                .map(|x| {
                    let at = if ended { x.updated_at } else { x.deadline };
                    let c = ListCursor {
                        at,
                        tx_id: x.tx_id.clone(),
                    };
                    (c, x)
                })
                .filter(|(c, _)| match ended {
                    true => q.since.is_none_or(|s| c.at >= s) && q.until.is_none_or(|u| c.at < u),
                    false => q.overdue_at.is_none_or(|o| c.at < o),
                })
                .filter(|(c, _)| match (&q.after, ended) {
                    (None, _) => true,
                    (Some(a), false) => c > a,
                    (Some(a), true) => c < a,
                })
                .collect();
            entries.sort_by(|a, b| if ended { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) });
            let limit = q.limit.max(1);
            let next = (entries.len() > limit).then(|| entries[limit - 1].0.clone());
            entries.truncate(limit);
            ListPage {
                records: entries
                    .into_iter()
                    .map(|(_, x)| x)
                    .filter(|x| q.admits(x))
                    .cloned()
                    .collect(),
                next,
            }
        })
    }

    async fn counts(&self, since: u64, now: u64) -> Result<Counts, PortError> {
        self.with(|r| {
            let mut c = Counts {
                since,
                ..Counts::default()
            };
            for x in r.values() {
                match x.status {
                    TxStatus::Committed if x.updated_at >= since => c.committed += 1,
                    TxStatus::Aborted if x.updated_at >= since => c.aborted += 1,
                    s if !s.is_terminal() => {
                        c.pending += 1;
                        c.overdue += u64::from(x.deadline < now);
                    }
                    _ => {}
                }
            }
            c
        })
    }

    async fn note_action(&self, tx: &TxId, note: &ActionNote) -> Result<bool, PortError> {
        self.with(|r| match r.get_mut(tx) {
            Some(x) => {
                x.operator_actions.push(note.clone());
                true
            }
            None => false,
        })
    }
}
