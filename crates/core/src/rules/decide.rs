//! The record's moves: the lock rule ([`resolve`]), the decision ([`decision`]), what a lost
//! compare-and-swap found ([`after_lost_decide`], [`after_lost_finalize`]) and recovery
//! ([`recovery`], [`completer_recovers`]).

use crate::record::TxRecord;
use crate::status::{Decision, TxStatus};

/// What a resolver does about an expired lock's owner (`docs/protocol.md`, "The lock rule"): an expired lock
/// is never free, it only gives the right to settle its owner by the owner's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resolution {
    /// Owner `PREPARING` (or its record missing) and its deadline has not passed: the lock
    /// stands (`conflict`).
    OwnerLive,
    /// Owner record missing and the lock expired: the owner never began. Record it `ABORTED`
    /// (only if still missing), then abort it here.
    RecordAborted,
    /// Owner `PREPARING` past its deadline: compare-and-swap it to `ABORTING`, then follow the
    /// record as it then is.
    DecideAbort,
    /// Owner `COMMITTING`: roll it forward on this item (commit its operation from its lock).
    RollForward,
    /// Owner `ABORTING` or `ABORTED`: abort it on this item.
    AbortHere,
    /// Owner `COMMITTED`, or its record superseded (a later transaction's under the same id:
    /// its own ended and expired): every participant acknowledged before its record ended, so
    /// this lock is a stale duplicate that slipped past the fence: drop it without applying it.
    DropStale,
    /// Owner `STAGING` past its deadline: it may be committed implicitly (every participant
    /// holding it), so nobody aborts it from one item. Its record is recovered as a whole
    /// ([`Recovery::Inquire`]: inline where the resolver can reach every participant, else
    /// by asking for it); the lock stands meanwhile (`conflict`).
    Recover,
}

/// What the lock rule finds under a holder's id in the transactions table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OwnerRecord {
    /// No record.
    Missing,
    /// The owner's record (its `createdAt` is the hold's `began`), with its status.
    Found(TxStatus),
    /// A record of another transaction under the same id (its `createdAt` is not the hold's
    /// `began`): the idempotency key was used again after the owner's record expired, which it
    /// did only once terminal.
    Superseded,
}

impl OwnerRecord {
    /// The record `record` (read under the holder's id) for a hold that began at `began`.
    pub fn of(record: Option<&TxRecord>, began: u64) -> OwnerRecord {
        match record {
            None => OwnerRecord::Missing,
            Some(r) if r.created_at == began => OwnerRecord::Found(r.status),
            Some(_) => OwnerRecord::Superseded,
        }
    }
}

/// The lock rule, from the owner's record and whether its deadline passed (a missing record's
/// deadline is the lock's expiry: a live lock of a missing record is left alone, as a staged
/// coordinator, which writes its record with its prepares, needs). A superseded record is
/// read as a `COMMITTED` one: the owner ended long ago, every participant acknowledging.
pub fn resolve(owner: OwnerRecord, deadline_passed: bool) -> Resolution {
    let status = match owner {
        OwnerRecord::Missing if deadline_passed => return Resolution::RecordAborted,
        OwnerRecord::Missing => return Resolution::OwnerLive,
        OwnerRecord::Superseded => return Resolution::DropStale,
        OwnerRecord::Found(status) => status,
    };
    match status {
        TxStatus::Preparing if deadline_passed => Resolution::DecideAbort,
        TxStatus::Staging if deadline_passed => Resolution::Recover,
        TxStatus::Preparing | TxStatus::Staging => Resolution::OwnerLive,
        TxStatus::Committing => Resolution::RollForward,
        TxStatus::Aborting | TxStatus::Aborted => Resolution::AbortHere,
        TxStatus::Committed => Resolution::DropStale,
    }
}

/// The decision from the votes: commit only if every participant voted yes (a participant that
/// did not answer counts as a no).
pub fn decision(mut yes: impl Iterator<Item = bool>) -> Decision {
    if yes.all(|y| y) {
        Decision::Commit
    } else {
        Decision::Abort
    }
}

/// What a coordinator whose decision swap was lost does, from the record as it is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AfterLostSwap {
    /// Someone decided first (a resolver or the sweeper, past the deadline): follow the
    /// recorded decision (which may already be finished).
    Follow(Decision),
    /// The record is missing, or still undecided after a failed swap: storage is broken.
    Fatal,
}

/// After a lost `PREPARING → COMMITTING | ABORTING` swap.
pub fn after_lost_decide(found: Option<TxStatus>) -> AfterLostSwap {
    match found.and_then(TxStatus::decision) {
        Some(d) => AfterLostSwap::Follow(d),
        None => AfterLostSwap::Fatal,
    }
}

/// After a lost finalize swap (`COMMITTING → COMMITTED`, `ABORTING → ABORTED`): done if someone
/// else (the sweeper) finalized it the same way, else the record is broken.
pub fn after_lost_finalize(found: Option<TxStatus>, decision: Decision) -> AfterLostSwap {
    if found == Some(TxStatus::finishing(decision)) {
        AfterLostSwap::Follow(decision)
    } else {
        AfterLostSwap::Fatal
    }
}

/// What recovery (a replay, the sweeper) does with a record, from the record alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recovery {
    /// Undecided and its deadline has not passed: its coordinator may still be at work.
    Leave,
    /// Undecided past its deadline: compare-and-swap to `ABORTING`, then complete the abort.
    DecideAbort,
    /// Decided, not finished: send the decision to every participant, then finalize.
    Complete(Decision),
    /// `STAGING` past its deadline: its stager may have answered "committed" from every
    /// participant holding it, so the deadline alone decides nothing. Ask every participant
    /// to prevent the transaction ([`inquire`](super::inquire) with `prevent`), then decide by
    /// [`staged_decision`](super::staged_decision).
    Inquire,
    /// Terminal: nothing to do.
    Ended,
}

/// The recovery rule.
pub fn recovery(status: TxStatus, deadline_passed: bool) -> Recovery {
    match (status, status.decision()) {
        (TxStatus::Preparing, _) if deadline_passed => Recovery::DecideAbort,
        (TxStatus::Staging, _) if deadline_passed => Recovery::Inquire,
        (TxStatus::Preparing | TxStatus::Staging, _) => Recovery::Leave,
        (s, _) if s.is_terminal() => Recovery::Ended,
        (_, Some(d)) => Recovery::Complete(d),
        (_, None) => Recovery::Leave,
    }
}

/// Whether the completer (on the transactions table's stream) recovers a record after a
/// change: only when the change is a participant's ask (`recoveryAsked` newly set) on a record
/// still `STAGING`. A participant asks only after the deadline on its own clock, so the
/// recovery it triggers is [`Recovery::Inquire`] (`recovery(Staging, true)`), whatever the
/// completer's clock says: preventing is safe at any time; every other change is its coordinator's (or a recoverer's) own work
/// in progress, which the completer must not duplicate. At-least-once delivery repeats a
/// recovery, which changes nothing twice (every step is a compare-and-swap).
pub fn completer_recovers(asked_before: bool, status: TxStatus, asked: bool) -> bool {
    status == TxStatus::Staging && asked && !asked_before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_rule_follows_the_owners_record() {
        use OwnerRecord::{Found, Missing};
        use TxStatus::*;
        assert_eq!(resolve(Missing, true), Resolution::RecordAborted);
        assert_eq!(resolve(Missing, false), Resolution::OwnerLive);
        assert_eq!(resolve(Found(Preparing), false), Resolution::OwnerLive);
        assert_eq!(resolve(Found(Preparing), true), Resolution::DecideAbort);
        assert_eq!(resolve(Found(Committing), true), Resolution::RollForward);
        assert_eq!(resolve(Found(Aborting), true), Resolution::AbortHere);
        assert_eq!(resolve(Found(Aborted), false), Resolution::AbortHere);
        assert_eq!(resolve(Found(Committed), true), Resolution::DropStale);
    }

    #[test]
    fn a_hold_whose_record_was_superseded_under_its_id_is_dropped_as_stale() {
        let record = |created_at, status| TxRecord {
            status,
            created_at,
            ..TxRecord::never_began(&crate::ids::TxId::random(), 1)
        };
        let later = record(2_000, TxStatus::Committing);
        assert_eq!(
            OwnerRecord::of(Some(&later), 2_000),
            OwnerRecord::Found(TxStatus::Committing)
        );
        let of_former = OwnerRecord::of(Some(&later), 1_000);
        assert_eq!(of_former, OwnerRecord::Superseded);
        // Never rolled forward under the later transaction's decision, whatever it is.
        for deadline_passed in [false, true] {
            assert_eq!(resolve(of_former, deadline_passed), Resolution::DropStale);
        }
        assert_eq!(OwnerRecord::of(None, 1_000), OwnerRecord::Missing);
    }

    #[test]
    fn the_record_moves_by_the_votes_and_lost_swaps_follow_the_record() {
        use TxStatus::*;
        assert_eq!(decision([true, true].into_iter()), Decision::Commit);
        assert_eq!(decision([true, false].into_iter()), Decision::Abort);
        assert_eq!(
            after_lost_decide(Some(Aborting)),
            AfterLostSwap::Follow(Decision::Abort)
        );
        assert_eq!(
            after_lost_decide(Some(Committed)),
            AfterLostSwap::Follow(Decision::Commit)
        );
        assert_eq!(after_lost_decide(Some(Preparing)), AfterLostSwap::Fatal);
        assert_eq!(after_lost_decide(None), AfterLostSwap::Fatal);
        assert_eq!(
            after_lost_finalize(Some(Committed), Decision::Commit),
            AfterLostSwap::Follow(Decision::Commit)
        );
        assert_eq!(
            after_lost_finalize(Some(Aborted), Decision::Commit),
            AfterLostSwap::Fatal
        );
        assert_eq!(recovery(Preparing, false), Recovery::Leave);
        // The completer acts on a participant's ask, once, and only while STAGING.
        assert!(completer_recovers(false, Staging, true));
        assert!(
            !completer_recovers(true, Staging, true),
            "asked before: a repeat"
        );
        assert!(
            !completer_recovers(false, Staging, false),
            "the stager's own write"
        );
        assert!(
            !completer_recovers(false, Committing, true),
            "decided meanwhile"
        );
        assert_eq!(recovery(Preparing, true), Recovery::DecideAbort);
        assert_eq!(
            recovery(Committing, false),
            Recovery::Complete(Decision::Commit)
        );
        assert_eq!(recovery(Aborted, true), Recovery::Ended);
    }

    #[test]
    fn a_staging_owner_is_never_aborted_for_its_deadline_alone() {
        let staging = OwnerRecord::Found(TxStatus::Staging);
        assert_eq!(resolve(staging, false), Resolution::OwnerLive);
        assert_eq!(resolve(staging, true), Resolution::Recover);
        assert_eq!(recovery(TxStatus::Staging, false), Recovery::Leave);
        assert_eq!(recovery(TxStatus::Staging, true), Recovery::Inquire);
        // PREPARING keeps today's rule: aborted once its deadline passed.
        assert_eq!(recovery(TxStatus::Preparing, true), Recovery::DecideAbort);
    }
}
