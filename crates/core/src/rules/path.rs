//! Which path a transaction takes ([`route`]), from what is known of each participant
//! ([`PathFacts`]): native ([`native`](super::native)) where the store can commit it alone and
//! nothing known is in the way; else staged (one round) where recovery can always end it
//! ([`stages`]); else classic (five rounds). A native attempt that gives way takes
//! [`protocol_path`].
//!
//! A `STAGING` record past its deadline is ended only by what every participant answers
//! ([`staged_decision`](super::staged_decision)): one that never answers keeps the
//! transaction, and every item it holds elsewhere, undecided until it does. A classic record
//! is aborted at its deadline from the record alone, and its healthy items are released. So a
//! transaction is staged only when every participant's answer comes from a log as available as
//! the record's (Cornus's premise): an item of a table the stack reaches itself, or a service
//! whose configuration says so.

use super::{NotNative, native};

/// How the coordinator commits a transaction (`TWOPC_COMMIT_MODE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CommitMode {
    /// Begin, prepare, decide, complete, finalize; answered at the end (five rounds).
    Classic,
    /// The record written `STAGING` with the prepares; answered once every vote is yes and the
    /// put is acknowledged (one round; an abort two), finished after the answer.
    Staged,
    /// The default. A transaction the store can commit alone ([`native`](super::native)) is one native
    /// `TransactWriteItems`; any other, or one the protocol holds an item of, is staged if
    /// every participant answers recovery from a highly available log
    /// ([`stages`]), else classic.
    #[default]
    Auto,
}

impl CommitMode {
    /// Every mode.
    pub const ALL: [CommitMode; 3] = [CommitMode::Classic, CommitMode::Staged, CommitMode::Auto];

    /// The configured name.
    pub fn as_str(self) -> &'static str {
        match self {
            CommitMode::Classic => "classic",
            CommitMode::Staged => "staged",
            CommitMode::Auto => "auto",
        }
    }

    /// Parses a configured name.
    pub fn parse(s: &str) -> Option<CommitMode> {
        CommitMode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

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

/// One participant of a transaction, as the path rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PathFacts {
    /// A table's item on the generic participant (not a service with its own logic).
    pub table: bool,
    /// How it is reached.
    pub reach: Reach,
    /// Its service's configuration opts in to staging (`"highlyAvailable": true`): its
    /// answers are as available as the transaction record, and a transaction left `STAGING`
    /// may wait for it.
    pub highly_available: bool,
    /// Its service is marked hot (`"hot": true`): a hint that its items are always contended.
    pub hot: bool,
    /// The coordinator knows the item to be contended now: a live heat mark it learned from an
    /// earlier native attempt ([`heat`](super::heat)).
    pub heated: bool,
    /// The operation deletes the item.
    pub deletes: bool,
}

impl PathFacts {
    /// A plain table's item reached `direct`, nothing known of it: the native path's case.
    pub const DIRECT_TABLE: PathFacts = PathFacts {
        table: true,
        reach: Reach::Direct,
        highly_available: false,
        hot: false,
        heated: false,
        deletes: false,
    };
}

/// The path a transaction takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// One `TransactWriteItems`: the record and every item's change.
    Native,
    /// The record put `STAGING` with every prepare; answered after one round.
    Staged,
    /// Begin, prepare, decide, complete, finalize; answered at the end.
    Classic,
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

/// The path a transaction takes in `mode`, given its participants and an upper estimate of a
/// native request's bytes (`native_store`: whether the coordinator can commit natively at all).
/// [`CommitMode::Auto`]: native where [`native`] admits it, else [`protocol_path`]; the other
/// modes name their path. The first reason a path was not taken is for logs.
pub fn route(
    mode: CommitMode,
    participants: &[PathFacts],
    bytes: usize,
    native_store: bool,
) -> (Path, Option<NotNative>) {
    if mode != CommitMode::Auto || !native_store {
        return (protocol_path(mode, participants).0, None);
    }
    match native(participants.iter().copied(), bytes) {
        Ok(()) => (Path::Native, None),
        Err(why) => (protocol_path(mode, participants).0, Some(why)),
    }
}

/// The protocol's path in `mode` (a transaction not native, or whose native attempt gave way):
/// classic in [`CommitMode::Classic`], staged in [`CommitMode::Staged`]; in
/// [`CommitMode::Auto`], staged only if [`stages`] admits it.
pub fn protocol_path(mode: CommitMode, participants: &[PathFacts]) -> (Path, Option<NotStaged>) {
    match mode {
        CommitMode::Classic => (Path::Classic, None),
        CommitMode::Staged => (Path::Staged, None),
        CommitMode::Auto => match stages(participants.iter().copied()) {
            Ok(()) => (Path::Staged, None),
            Err(why) => (Path::Classic, Some(why)),
        },
    }
}

/// Whether a protocol transaction is staged in the default mode: only if every participant
/// answers recovery from a highly available log ([`PathFacts`]); the first that does not
/// says why not. (`TWOPC_COMMIT_MODE=staged` stages every transaction, `classic` none.)
pub fn stages(participants: impl IntoIterator<Item = PathFacts>) -> Result<(), NotStaged> {
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

    const TABLE: PathFacts = PathFacts::DIRECT_TABLE;

    #[test]
    fn only_participants_that_always_answer_recovery_are_staged() {
        let lambda = PathFacts {
            reach: Reach::Lambda,
            ..TABLE
        };
        assert_eq!(stages([TABLE, lambda]), Ok(()));
        let custom = PathFacts {
            table: false,
            ..lambda
        };
        assert_eq!(stages([TABLE, custom]), Err(NotStaged::Custom));
        let http = PathFacts {
            reach: Reach::Http,
            ..TABLE
        };
        assert_eq!(stages([http, TABLE]), Err(NotStaged::Http));
        assert_eq!(
            stages([PathFacts {
                table: false,
                reach: Reach::Http,
                ..TABLE
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
            let opted = PathFacts {
                table,
                reach,
                highly_available: true,
                ..TABLE
            };
            assert_eq!(stages([TABLE, opted]), Ok(()), "{opted:?}");
        }
    }

    #[test]
    fn the_default_mode_goes_native_unless_something_known_is_in_the_way() {
        let auto = |facts: &[PathFacts]| route(CommitMode::Auto, facts, 1_000, true);
        assert_eq!(auto(&[TABLE, TABLE]), (Path::Native, None));
        // A contended item, learned or marked: staged, where transactions reserve it together.
        let heated = PathFacts {
            heated: true,
            ..TABLE
        };
        assert_eq!(
            auto(&[TABLE, heated]),
            (Path::Staged, Some(NotNative::Heated))
        );
        let hot = PathFacts { hot: true, ..TABLE };
        assert_eq!(auto(&[hot, TABLE]), (Path::Staged, Some(NotNative::Hot)));
        // A custom participant: classic unless it opted in.
        let custom = PathFacts {
            table: false,
            reach: Reach::Http,
            ..TABLE
        };
        assert_eq!(
            auto(&[TABLE, custom]),
            (Path::Classic, Some(NotNative::Custom))
        );
        // Without a native store, the protocol's path.
        assert_eq!(
            route(CommitMode::Auto, &[TABLE], 1_000, false),
            (Path::Staged, None)
        );
    }

    #[test]
    fn the_other_modes_name_their_path_whatever_is_known() {
        for facts in [
            TABLE,
            PathFacts {
                heated: true,
                ..TABLE
            },
        ] {
            assert_eq!(
                route(CommitMode::Staged, &[facts], 1, true),
                (Path::Staged, None)
            );
            assert_eq!(
                route(CommitMode::Classic, &[facts], 1, true),
                (Path::Classic, None)
            );
        }
    }

    #[test]
    fn a_native_attempt_that_gives_way_takes_the_protocols_path() {
        assert_eq!(
            protocol_path(CommitMode::Auto, &[TABLE, TABLE]),
            (Path::Staged, None)
        );
        let http = PathFacts {
            reach: Reach::Http,
            ..TABLE
        };
        assert_eq!(
            protocol_path(CommitMode::Auto, &[http]),
            (Path::Classic, Some(NotStaged::Http))
        );
    }
}
