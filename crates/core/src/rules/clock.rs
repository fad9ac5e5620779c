//! Clocks: what a participant makes of a `began` read off another actor's clock.
//!
//! A transaction's `began` and deadline come from its stager's clock; every check is made on
//! the clock of whoever acts. Skew cannot break safety (every removed fence entry raises the
//! horizon over its `began`), but a `began` from a clock running ahead would, once its entry is
//! pruned or its abort fences it out, put an item's horizon in the future and refuse every
//! prepare there until real time catches up. So a participant refuses a prepare that began
//! further ahead of its own clock than the margin ([`too_far_ahead`]).

/// How far `began` lies ahead of `now` past `margin` (ms): `Some(ahead)` if `began - now`
/// exceeds the margin. A participant refuses such a prepare (`clockSkew`), and an abort does
/// not fence such a transaction out (its prepares are refused here for as long anyway).
pub(crate) fn too_far_ahead(began: u64, now: u64, margin: u64) -> Option<u64> {
    let ahead = began.checked_sub(now)?;
    (ahead > margin).then_some(ahead)
}

/// The fence capacity a prevent's fencing write works with ([`fence_out`](super::fence_out)):
/// the configured `capacity`, or no bound for a transaction that began further ahead of the
/// participant's clock than the margin (`ahead`: [`too_far_ahead`] said so). On a full fence the
/// write raises the horizon to the transaction's `began`, which for such a transaction lies in
/// the future: every prepare on the item would be refused for as long as the skew. So its entry
/// is written instead, past the capacity (about 31 bytes, trimmed by the next pruning release).
/// A prevent must be final, so unlike an abort it never skips the write.
pub fn prevent_capacity(capacity: usize, ahead: bool) -> usize {
    if ahead { usize::MAX } else { capacity }
}

/// The transaction's age on the participant's clock, `now - began` (ms): its prepare's time in
/// flight plus the skew between the two clocks; negative when the stager's clock runs ahead.
pub fn age(began: u64, now: u64) -> i64 {
    let signed = |t: u64| i64::try_from(t).unwrap_or(i64::MAX);
    signed(now).saturating_sub(signed(began))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_began_ahead_by_more_than_the_margin_is_too_far_ahead() {
        assert_eq!(too_far_ahead(1_000, 5_000, 10), None, "in the past");
        assert_eq!(too_far_ahead(5_010, 5_000, 10), None, "within the margin");
        assert_eq!(too_far_ahead(5_011, 5_000, 10), Some(11));
        assert_eq!(too_far_ahead(u64::MAX, 0, 10_000), Some(u64::MAX));
    }

    #[test]
    fn a_prevent_of_a_transaction_too_far_ahead_never_finds_the_fence_full() {
        use crate::rules::{FenceOut, fence_out};
        assert_eq!(
            fence_out(24, prevent_capacity(24, false)),
            FenceOut::RaiseHorizon
        );
        assert_eq!(fence_out(24, prevent_capacity(24, true)), FenceOut::Entry);
        assert_eq!(
            fence_out(usize::MAX - 1, prevent_capacity(24, true)),
            FenceOut::Entry
        );
        assert_eq!(fence_out(3, prevent_capacity(24, false)), FenceOut::Entry);
    }

    #[test]
    fn the_age_is_negative_for_a_clock_ahead() {
        assert_eq!(age(1_000, 1_250), 250);
        assert_eq!(age(1_250, 1_000), -250);
        assert_eq!(age(u64::MAX, 0), -i64::MAX);
    }
}
