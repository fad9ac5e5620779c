//! The participant's view of other actors' clocks ([`rules::too_far_ahead`], [`rules::age`]):
//! a prepare from a clock too far ahead is refused, its abort does not fence it out, and
//! its prevent fences it by its entry, never by the horizon.

use crate::message::PrepareReply;
use crate::ports::Clock;
use crate::record::VoteReason;
use crate::rules;

use super::Participant;

impl<S, L, C: Clock> Participant<S, L, C> {
    /// The no vote for a prepare whose `began` lies further ahead of this participant's clock
    /// than the margin: its entry, once pruned, or its abort's fencing write on a full fence,
    /// would raise the item's horizon into the future and refuse every prepare there until
    /// real time caught up. `None`: within the margin.
    pub(super) fn too_far_ahead(&self, began: u64) -> Option<PrepareReply> {
        let margin = self.config.clock_margin_ms;
        let ahead = rules::too_far_ahead(began, self.clock.now_ms(), margin)?;
        Some(PrepareReply::no(
            VoteReason::ClockSkew,
            format!(
                "the transaction began {ahead} ms ahead of this participant's clock (at most {margin} ms, TWOPC_FENCE_MARGIN_MS): the coordinator's clock runs ahead"
            ),
        ))
    }

    /// Whether the transaction began too far ahead of this clock: every prepare of it is refused
    /// here until real time comes within the margin, and a fencing write on a full fence would
    /// put the horizon in the future. An abort leaves it unfenced (a prepare of it landing after
    /// that, a copy delayed by more than the skew, holds the item for a decided abort: the next
    /// prepare there, or the sweeper at its deadline, aborts it, `docs/limitations.md`); a
    /// prevent, which must be final, fences it by its entry ([`rules::prevent_capacity`]).
    pub(super) fn began_too_far_ahead(&self, began: u64) -> bool {
        let margin = self.config.clock_margin_ms;
        rules::too_far_ahead(began, self.clock.now_ms(), margin).is_some()
    }

    /// The transaction's age on this participant's clock, `now - began` (ms): time in flight
    /// plus skew, negative when the coordinator's clock runs ahead (the `BeganAge` metric).
    pub fn age(&self, began: u64) -> i64 {
        rules::age(began, self.clock.now_ms())
    }
}
