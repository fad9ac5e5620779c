//! Which protocol path a transaction takes in the default mode ([`stages`]): staged (one
//! round) only where recovery can always end it, else classic (five rounds).
//!
//! A `STAGING` record past its deadline is ended only by what every participant answers
//! ([`staged_decision`](super::staged_decision)): one that never answers keeps the
//! transaction, and every item it holds elsewhere, undecided until it does. A classic record
//! is aborted at its deadline from the record alone, and its healthy items are released. So a
//! transaction is staged only when every participant's answer comes from a log as available as
//! the record's (Cornus's premise): an item of a table the stack reaches itself, or a service
//! whose configuration says so.

/// How the coordinator reaches a participant (its target's transport).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reach {
    /// The coordinator writes the table itself (its own account and Region).
    Direct,
    /// Through a Lambda function (AWS Lambda's availability, the function's state in DynamoDB).
    Lambda,
    /// Through an HTTP endpoint: a server someone runs, which may be down for as long as it is.
    Http,
}

/// One participant of a transaction, as [`stages`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StageFacts {
    /// A table's item on the generic participant (not a service with its own logic).
    pub table: bool,
    /// How it is reached.
    pub reach: Reach,
    /// Its service's configuration opts in to staging (`"highlyAvailable": true`): its
    /// answers are as available as the transaction record, and a transaction left `STAGING`
    /// may wait for it.
    pub highly_available: bool,
}

/// Why a transaction takes the classic path in the default mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotStaged {
    /// A custom participant (its own logic and its own log) that did not opt in.
    Custom,
    /// A table's participant reached over HTTP that did not opt in.
    Http,
}

impl NotStaged {
    /// For logs.
    pub fn as_str(self) -> &'static str {
        match self {
            NotStaged::Custom => "custom participant not marked highlyAvailable",
            NotStaged::Http => "http participant not marked highlyAvailable",
        }
    }
}

/// Whether a protocol transaction is staged in the default mode: only if every participant
/// answers recovery from a highly available log ([`StageFacts`]); the first that does not
/// says why not. (`TWOPC_COMMIT_MODE=staged` stages every transaction, `classic` none.)
pub fn stages(participants: impl IntoIterator<Item = StageFacts>) -> Result<(), NotStaged> {
    for p in participants {
        if p.highly_available {
            continue;
        }
        if !p.table {
            return Err(NotStaged::Custom);
        }
        if p.reach == Reach::Http {
            return Err(NotStaged::Http);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: StageFacts = StageFacts {
        table: true,
        reach: Reach::Direct,
        highly_available: false,
    };

    #[test]
    fn only_participants_that_always_answer_recovery_are_staged() {
        let lambda = StageFacts {
            reach: Reach::Lambda,
            ..TABLE
        };
        assert_eq!(stages([TABLE, lambda]), Ok(()));
        let custom = StageFacts {
            table: false,
            ..lambda
        };
        assert_eq!(stages([TABLE, custom]), Err(NotStaged::Custom));
        let http = StageFacts {
            reach: Reach::Http,
            ..TABLE
        };
        assert_eq!(stages([http, TABLE]), Err(NotStaged::Http));
        assert_eq!(
            stages([StageFacts {
                table: false,
                reach: Reach::Http,
                highly_available: false,
            }]),
            Err(NotStaged::Custom),
            "the first reason"
        );
    }

    #[test]
    fn a_service_that_opts_in_is_staged_whatever_it_is() {
        for (table, reach) in [
            (false, Reach::Http),
            (false, Reach::Lambda),
            (true, Reach::Http),
        ] {
            let opted = StageFacts {
                table,
                reach,
                highly_available: true,
            };
            assert_eq!(stages([TABLE, opted]), Ok(()), "{opted:?}");
        }
    }
}
