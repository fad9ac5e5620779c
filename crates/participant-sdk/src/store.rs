//! The port for the per-transaction state, and its in-memory implementation (the DynamoDB one
//! is [`crate::dynamo`]; one contract suite, `tests/store_contract.rs`, runs against both).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use twopc_core::ids::TxId;
use twopc_core::ports::PortError;

use crate::state::TxState;

/// What a conditional write did.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// Written.
    Done,
    /// The condition failed: the state as it is (None: there is none).
    Lost(Option<Box<TxState>>),
}

/// Per-transaction state, one entry per transaction id.
pub trait StateStore: Send + Sync {
    /// Reads a state (strongly consistent).
    fn get(&self, tx: &TxId) -> impl Future<Output = Result<Option<TxState>, PortError>> + Send;

    /// Writes `state` if the transaction has none yet.
    fn create(&self, state: &TxState) -> impl Future<Output = Result<Written, PortError>> + Send;

    /// Writes `state` over the one whose revision is `state.revision - 1`.
    fn replace(&self, state: &TxState) -> impl Future<Output = Result<Written, PortError>> + Send;

    /// Unfinished states whose deadline passed before `now` (through a sparse index, never a
    /// scan), earliest deadline first, at most `limit`.
    fn overdue(
        &self,
        now: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TxState>, PortError>> + Send;
}

/// States in memory. Clones share them.
#[derive(Clone, Debug, Default)]
pub struct MemoryStates {
    states: Arc<Mutex<BTreeMap<TxId, TxState>>>,
}

impl MemoryStates {
    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<TxId, TxState>) -> T) -> Result<T, PortError> {
        let mut states = self.states.lock().map_err(|_| PortError::Fatal {
            context: "in-memory participant states".into(),
            source: "a lock was poisoned by a panic".into(),
        })?;
        Ok(f(&mut states))
    }
}

impl StateStore for MemoryStates {
    async fn get(&self, tx: &TxId) -> Result<Option<TxState>, PortError> {
        self.with(|s| s.get(tx).cloned())
    }

    async fn create(&self, state: &TxState) -> Result<Written, PortError> {
        self.with(|s| match s.get(&state.tx_id) {
            Some(found) => Written::Lost(Some(Box::new(found.clone()))),
            None => {
                s.insert(state.tx_id.clone(), state.clone());
                Written::Done
            }
        })
    }

    async fn replace(&self, state: &TxState) -> Result<Written, PortError> {
        self.with(|s| match s.get(&state.tx_id) {
            Some(found) if found.revision + 1 == state.revision => {
                s.insert(state.tx_id.clone(), state.clone());
                Written::Done
            }
            found => Written::Lost(found.cloned().map(Box::new)),
        })
    }

    async fn overdue(&self, now: u64, limit: usize) -> Result<Vec<TxState>, PortError> {
        self.with(|s| {
            let mut found: Vec<TxState> = s
                .values()
                .filter(|st| st.is_pending() && st.deadline < now)
                .cloned()
                .collect();
            found.sort_by_key(|st| st.deadline);
            found.truncate(limit);
            found
        })
    }
}
