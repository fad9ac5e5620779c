//! Which path a protocol transaction takes: staged or classic, by the mode and, in the
//! default mode, by [`rules::stages`].

use tracing::info;

use crate::ports::{Clock, Transport, TxLog};
use crate::record::{Target, TxRecord};
use crate::rules;
use crate::service::ServiceKind;

use super::{CommitMode, Coordinator};

impl<L: TxLog, T: Transport, C: Clock> Coordinator<L, T, C> {
    /// Whether `record`'s transaction is staged: always in [`CommitMode::Staged`], never in
    /// [`CommitMode::Classic`]; in [`CommitMode::Auto`], only if every participant answers
    /// recovery from a highly available log (`docs/protocol.md`, "Which path").
    pub(super) fn stages(&self, record: &TxRecord) -> bool {
        match self.config.mode {
            CommitMode::Classic => false,
            CommitMode::Staged => true,
            CommitMode::Auto => {
                let facts = record.participants.iter().map(|p| {
                    let service = self.config.services.get(&p.participant);
                    rules::StageFacts {
                        table: service.is_some_and(|s| s.kind == ServiceKind::Table),
                        reach: match p.target {
                            Target::Direct { .. } => rules::Reach::Direct,
                            Target::Lambda { .. } => rules::Reach::Lambda,
                            Target::Http { .. } => rules::Reach::Http,
                        },
                        highly_available: service.is_some_and(|s| s.highly_available),
                    }
                });
                match rules::stages(facts) {
                    Ok(()) => true,
                    Err(why) => {
                        info!(tx_id = %record.tx_id, why = why.as_str(), "classic path");
                        false
                    }
                }
            }
        }
    }
}
