//! Transaction status and its legal moves.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a transaction stands. Every change of status is a compare-and-swap on the old one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TxStatus {
    /// Begun; participants are being asked to lock. Next: `Committing` (every vote yes) or
    /// `Aborting` (a vote no, or the deadline passed).
    Preparing,
    /// Written together with the prepares (the staged commit): the transaction is committed
    /// *implicitly* once every participant holds it, which only its stager may act on before
    /// making it explicit. Next: `Committing` (its stager saw every vote yes, or a helper or
    /// recoverer found every participant holding it) or `Aborting` (its stager saw a no, or a
    /// recoverer past the deadline prevented a participant). Never aborted for its deadline
    /// alone (`rules::recovery`).
    Staging,
    /// Decided to commit: the durable commit point. Next: `Committed`, once every participant
    /// applied its operation. Nobody may abort it any more.
    Committing,
    /// Every participant applied its operation. Terminal.
    Committed,
    /// Decided to abort. Next: `Aborted`, once every participant released its lock.
    Aborting,
    /// Every participant released its lock without applying anything. Terminal.
    Aborted,
}

/// The outcome a decided transaction is driven to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Apply every participant's operation.
    Commit,
    /// Apply none.
    Abort,
}

impl TxStatus {
    /// Every status.
    pub const ALL: [TxStatus; 6] = [
        TxStatus::Preparing,
        TxStatus::Staging,
        TxStatus::Committing,
        TxStatus::Committed,
        TxStatus::Aborting,
        TxStatus::Aborted,
    ];

    /// The statuses this one may move to.
    pub fn next_moves(self) -> &'static [TxStatus] {
        use TxStatus::*;
        match self {
            Preparing | Staging => &[Committing, Aborting],
            Committing => &[Committed],
            Aborting => &[Aborted],
            Committed | Aborted => &[],
        }
    }

    /// Whether `self -> to` is a legal transition.
    pub fn can_move_to(self, to: TxStatus) -> bool {
        self.next_moves().contains(&to)
    }

    /// Whether nothing more will happen to the transaction.
    pub fn is_terminal(self) -> bool {
        self.next_moves().is_empty()
    }

    /// The decision this status records, if any.
    pub fn decision(self) -> Option<Decision> {
        match self {
            TxStatus::Preparing | TxStatus::Staging => None,
            TxStatus::Committing | TxStatus::Committed => Some(Decision::Commit),
            TxStatus::Aborting | TxStatus::Aborted => Some(Decision::Abort),
        }
    }

    /// Whether a move from `from` to `to` is the decision (an undecided status to a decided
    /// one): what sets a record's `decidedAt`.
    pub fn decides(from: TxStatus, to: TxStatus) -> bool {
        from.decision().is_none() && to.decision().is_some()
    }

    /// The status that records `decision`.
    pub fn deciding(decision: Decision) -> TxStatus {
        match decision {
            Decision::Commit => TxStatus::Committing,
            Decision::Abort => TxStatus::Aborting,
        }
    }

    /// The terminal status `decision` ends in.
    pub fn finishing(decision: Decision) -> TxStatus {
        match decision {
            Decision::Commit => TxStatus::Committed,
            Decision::Abort => TxStatus::Aborted,
        }
    }

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            TxStatus::Preparing => "PREPARING",
            TxStatus::Staging => "STAGING",
            TxStatus::Committing => "COMMITTING",
            TxStatus::Committed => "COMMITTED",
            TxStatus::Aborting => "ABORTING",
            TxStatus::Aborted => "ABORTED",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<TxStatus> {
        TxStatus::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl fmt::Display for TxStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::TxStatus::*;
    use super::*;

    #[test]
    fn only_the_documented_transitions_exist() {
        let mut legal = vec![];
        for a in TxStatus::ALL {
            for b in TxStatus::ALL {
                if a.can_move_to(b) {
                    legal.push((a, b));
                }
            }
        }
        assert_eq!(
            legal,
            vec![
                (Preparing, Committing),
                (Preparing, Aborting),
                (Staging, Committing),
                (Staging, Aborting),
                (Committing, Committed),
                (Aborting, Aborted)
            ]
        );
    }

    #[test]
    fn committing_can_never_be_aborted() {
        assert!(!Committing.can_move_to(Aborting));
        assert!(!Committing.can_move_to(Aborted));
        assert_eq!(Committing.decision(), Some(Decision::Commit));
    }

    #[test]
    fn names_round_trip() {
        for s in TxStatus::ALL {
            assert_eq!(TxStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(TxStatus::parse("DONE"), None);
    }
}
