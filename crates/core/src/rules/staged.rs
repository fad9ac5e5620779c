//! The staged commit's recovery: what an inquiry finds of a `STAGING` transaction on one item
//! ([`inquire`]), and what the record does once every participant answered
//! ([`staged_decision`]).

use crate::item::FenceOutcome;
use crate::message::Inquiry;

use super::{Seen, Shape};

/// What an inquiry does on an item as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InquiryStep {
    /// Answer without writing.
    Answer(Inquiry),
    /// Prevent the transaction on an item that exists (not held by it, no entry, no covering
    /// horizon): the lock-free abort's write ([`fence_out`](super::fence_out): an `aborted` entry, or the
    /// horizon raised), then read the answer again.
    Fence,
    /// Prevent it on an absent key: a tombstone carrying its `aborted` entry, written only if
    /// the key is still absent. Without it, the key could be created and the transaction's
    /// late prepare land after recovery aborted it, while its stager answers "committed".
    Bury,
    /// `Fence`, but a former transaction's entry under its id ([`Seen::former_entry`]) stands
    /// where its own is to go: retire that entry first, then fence.
    Retire,
}

/// The inquiry rule: what an inquiry (a recoverer's, with `prevent`; a helper's, without)
/// finds of the transaction on one item, and the write that prevents it where nothing does yet.
/// A hold of the transaction carrying another operation than the one asked about
/// ([`Seen::other_op`]: the item named twice) is evidence of that operation, not of this one,
/// which can never be held here: the hold leaves only by the transaction's release, whose
/// entry fences it out. So it answers `Prevented`, writing nothing (checked after the
/// transaction's own fence entry, as [`prepare`](super::prepare) checks it).
pub fn inquire(seen: Seen, prevent: bool) -> InquiryStep {
    let answer = InquiryStep::Answer;
    if seen.held_by_me() && seen.other_op && seen.entry.is_none() {
        return answer(Inquiry::Prevented);
    }
    if seen.held_by_me() {
        return answer(Inquiry::Held);
    }
    match seen.entry {
        Some(FenceOutcome::Aborted) => return answer(Inquiry::Prevented),
        Some(FenceOutcome::Committed) => return answer(Inquiry::Committed),
        None if seen.covered => return answer(Inquiry::Prevented),
        None => {}
    }
    match (prevent, seen.shape) {
        (false, _) => answer(Inquiry::Open),
        (true, Shape::Absent) => InquiryStep::Bury,
        (true, _) if seen.former_entry => InquiryStep::Retire,
        (true, _) => InquiryStep::Fence,
    }
}

/// What recovery of a `STAGING` record does once each participant answered an inquiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StagedDecision {
    /// Some participant is prevented: the transaction can never hold everywhere. Compare-and-
    /// swap `STAGING → ABORTING`. One prevented participant is enough, so an abort never waits
    /// for an unreachable one.
    Abort,
    /// Every participant holds it (or committed it): compare-and-swap `STAGING → COMMITTING`.
    Commit,
    /// Neither yet (an answer missing, or open): leave the record and ask again later.
    Wait,
}

/// The staged decision rule, from each participant's answer (`None`: no answer).
pub fn staged_decision(answers: impl IntoIterator<Item = Option<Inquiry>>) -> StagedDecision {
    let mut all_held = true;
    for a in answers {
        match a {
            Some(Inquiry::Prevented) => return StagedDecision::Abort,
            Some(Inquiry::Held | Inquiry::Committed) => {}
            Some(Inquiry::Open) | None => all_held = false,
        }
    }
    if all_held {
        StagedDecision::Commit
    } else {
        StagedDecision::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::*;

    #[test]
    fn an_inquiry_reads_held_prevented_or_committed_and_prevents_only_when_asked() {
        let real = Seen {
            shape: Shape::Real,
            ..Seen::ABSENT
        };
        let held = Seen {
            holder: Holder::Me,
            ..real
        };
        let reserved = Seen {
            reserved_by_me: true,
            ..real
        };
        for prevent in [false, true] {
            assert_eq!(inquire(held, prevent), InquiryStep::Answer(Inquiry::Held));
            assert_eq!(
                inquire(reserved, prevent),
                InquiryStep::Answer(Inquiry::Held)
            );
            let aborted = Seen {
                entry: Some(FenceOutcome::Aborted),
                ..real
            };
            assert_eq!(
                inquire(aborted, prevent),
                InquiryStep::Answer(Inquiry::Prevented)
            );
            let covered = Seen {
                covered: true,
                ..real
            };
            assert_eq!(
                inquire(covered, prevent),
                InquiryStep::Answer(Inquiry::Prevented)
            );
            let committed = Seen {
                entry: Some(FenceOutcome::Committed),
                ..real
            };
            assert_eq!(
                inquire(committed, prevent),
                InquiryStep::Answer(Inquiry::Committed)
            );
        }
        // Another's lock does not protect the transaction from being prevented.
        let other = Seen {
            holder: Holder::Other { expired: false },
            ..real
        };
        assert_eq!(inquire(other, false), InquiryStep::Answer(Inquiry::Open));
        assert_eq!(inquire(other, true), InquiryStep::Fence);
        assert_eq!(
            inquire(Seen::ABSENT, false),
            InquiryStep::Answer(Inquiry::Open)
        );
        assert_eq!(inquire(Seen::ABSENT, true), InquiryStep::Bury);
        let tombstone = Seen {
            shape: Shape::Tombstone,
            ..Seen::ABSENT
        };
        assert_eq!(inquire(tombstone, true), InquiryStep::Fence);
    }

    #[test]
    fn its_own_hold_with_another_operation_is_no_evidence_and_prevents_the_inquired_one() {
        let real = Seen {
            shape: Shape::Real,
            ..Seen::ABSENT
        };
        let other_op = |s: Seen| Seen {
            other_op: true,
            ..s
        };
        let locked = Seen {
            holder: Holder::Me,
            ..real
        };
        let reserved = Seen {
            reserved_by_me: true,
            ..real
        };
        for held in [locked, reserved] {
            for prevent in [false, true] {
                // The hold carries the operation of the item's other name: this one can
                // never be held here, and nothing needs writing to make sure of it.
                assert_eq!(
                    inquire(other_op(held), prevent),
                    InquiryStep::Answer(Inquiry::Prevented)
                );
                // The same operation is the transaction's hold.
                assert_eq!(inquire(held, prevent), InquiryStep::Answer(Inquiry::Held));
            }
        }
        // Without a hold of its own there is nothing to compare.
        assert_eq!(
            inquire(other_op(real), false),
            InquiryStep::Answer(Inquiry::Open)
        );
        assert_eq!(inquire(other_op(real), true), InquiryStep::Fence);
    }

    #[test]
    fn one_prevented_participant_aborts_and_only_all_held_commits() {
        use Inquiry::*;
        assert_eq!(
            staged_decision([Some(Held), Some(Committed), Some(Held)]),
            StagedDecision::Commit
        );
        assert_eq!(staged_decision([Some(Held), None]), StagedDecision::Wait);
        assert_eq!(
            staged_decision([Some(Open), Some(Held)]),
            StagedDecision::Wait
        );
        assert_eq!(
            staged_decision([None, Some(Prevented)]),
            StagedDecision::Abort
        );
        assert_eq!(
            staged_decision([Some(Held), Some(Prevented), Some(Open)]),
            StagedDecision::Abort
        );
    }
}
