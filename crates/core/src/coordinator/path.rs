//! Which path a transaction takes ([`rules::route`]): from the mode, each participant's
//! configuration and what this coordinator learned of each item's heat.

use tracing::{debug, info};

use crate::ports::{Clock, Transport, TxLog};
use crate::record::{Target, TxRecord};
use crate::rules::{self, Path, PathFacts, Reach};
use crate::service::ServiceKind;

use super::Coordinator;

impl<L: TxLog, T: Transport, C: Clock> Coordinator<L, T, C> {
    /// The path `record`'s transaction takes first (`docs/protocol.md`, "Which path").
    pub(super) fn path(&self, record: &TxRecord) -> Path {
        let facts = self.path_facts(record);
        // The record carries every operation, and the writes each one again: twice the
        // record's size bounds a native request.
        let bytes = serde_json::to_vec(record).map_or(usize::MAX, |b| b.len().saturating_mul(2));
        let (path, not_native) =
            rules::route(self.config.mode, &facts, bytes, self.native.is_some());
        if let Some(why) = not_native {
            debug!(tx_id = %record.tx_id, why = why.as_str(), "not native");
        }
        if path == Path::Classic {
            self.classic_why(record, &facts);
        }
        path
    }

    /// The protocol's path for `record`'s transaction, whose native attempt gave way.
    pub(super) fn protocol_path(&self, record: &TxRecord) -> Path {
        let facts = self.path_facts(record);
        let path = rules::protocol_path(self.config.mode, &facts).0;
        if path == Path::Classic {
            self.classic_why(record, &facts);
        }
        path
    }

    fn classic_why(&self, record: &TxRecord, facts: &[PathFacts]) {
        if let (_, Some(why)) = rules::protocol_path(self.config.mode, facts) {
            info!(tx_id = %record.tx_id, why = why.as_str(), "classic path");
        }
    }

    /// What the path rules read of each participant: its service's configuration, its
    /// transport, its operation, and whether this coordinator knows its item contended now.
    fn path_facts(&self, record: &TxRecord) -> Vec<PathFacts> {
        let now = self.clock.now_ms();
        record
            .participants
            .iter()
            .map(|p| {
                let service = self.config.services.get(&p.participant);
                PathFacts {
                    table: service.is_some_and(|s| s.kind == ServiceKind::Table),
                    reach: match p.target {
                        Target::Direct { .. } => Reach::Direct,
                        Target::Lambda { .. } => Reach::Lambda,
                        Target::Http { .. } => Reach::Http,
                    },
                    highly_available: service.is_some_and(|s| s.highly_available),
                    hot: service.is_some_and(|s| s.hot),
                    heated: match &p.target {
                        Target::Direct { table } => self.heat.is_hot(table, &p.key, now),
                        _ => false,
                    },
                    deletes: p.op.delete,
                }
            })
            .collect()
    }
}
