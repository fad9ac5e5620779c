//! A transaction's state at the participant (one item per transaction in the service's state
//! table), its legal moves, and how it reads to the core's rules.
//!
//! A hook call is bracketed by a *claimed* phase (`reserving`, `confirming`, `cancelling`),
//! written before the call and replaced by its result after, so that a duplicate never calls the
//! hook a second time and a crash leaves a mark the next message or the sweep can act on.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use twopc_core::ids::TxId;
use twopc_core::item::FenceOutcome;
use twopc_core::record::VoteReason;
use twopc_core::rules::{self, Holder, Inquiry, InquiryStep, Seen, Shape};

/// Where a transaction stands at the participant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// `reserve` is being called (claimed). Next: `Reserved`, `Refused`, itself (a failed call
    /// ends its claim early), or, once the claim ended (interrupted), `Cancelling` when the abort
    /// comes: `reserve` is never called twice.
    Reserving,
    /// Held, voted yes. Next: `Confirming` or `Cancelling`.
    Reserved,
    /// `reserve` refused, voted no; nothing held. Terminal (the transaction aborts).
    Refused,
    /// `confirm` is being called (claimed). Next: `Confirmed`, or itself (a claim ended early
    /// or an interrupted call taken over).
    Confirming,
    /// Confirmed. Terminal.
    Confirmed,
    /// `cancel` is being called (claimed). Next: `Cancelled`, or itself.
    Cancelling,
    /// Cancelled. Terminal.
    Cancelled,
    /// Aborted before any prepare arrived (null compensation): nothing was held, no hook ran, and
    /// a prepare arriving later is refused (anti-hanging). Terminal.
    Aborted,
}

impl Phase {
    /// The phases this one may move to (a claimed phase to itself: an interrupted call taken over).
    pub(crate) fn next_moves(self) -> &'static [Phase] {
        use Phase::*;
        match self {
            Reserving => &[Reserving, Reserved, Refused, Cancelling],
            Reserved => &[Confirming, Cancelling],
            Confirming => &[Confirming, Confirmed],
            Cancelling => &[Cancelling, Cancelled],
            Refused | Confirmed | Cancelled | Aborted => &[],
        }
    }

    /// The phases a transaction's first write may create.
    #[cfg(test)]
    pub(crate) const FIRST: &'static [Phase] = &[Phase::Reserving, Phase::Aborted];

    /// Whether `self -> to` is legal.
    #[cfg(test)]
    pub(crate) fn can_move_to(self, to: Phase) -> bool {
        self.next_moves().contains(&to)
    }

    /// Whether nothing more will happen (the state then only waits for its TTL).
    pub fn is_terminal(self) -> bool {
        self.next_moves().is_empty()
    }

    /// Whether a hook call is under way (or was interrupted) in this phase.
    pub(crate) fn is_claimed(self) -> bool {
        matches!(
            self,
            Phase::Reserving | Phase::Confirming | Phase::Cancelling
        )
    }

    /// How the core's rules see the transaction in an unclaimed phase (`None`: no state). The
    /// service is always there (`Real`): a message with no state finds a service that never heard
    /// of the transaction. Held (`Reserved`) reads as the transaction's own lock; an outcome, or
    /// a refusal (a `no` vote aborts the transaction), as its fence entry. No state is ever
    /// pruned while the transaction can still arrive, so no horizon covers it.
    pub(crate) fn seen(phase: Option<Phase>) -> Seen {
        let with = |holder, entry| Seen {
            shape: Shape::Real,
            holder,
            entry,
            ..Seen::ABSENT
        };
        match phase {
            None => with(Holder::Nobody, None),
            Some(Phase::Reserved) => with(Holder::Me, None),
            Some(Phase::Confirming | Phase::Confirmed) => {
                with(Holder::Nobody, Some(FenceOutcome::Committed))
            }
            Some(
                Phase::Reserving
                | Phase::Refused
                | Phase::Cancelling
                | Phase::Cancelled
                | Phase::Aborted,
            ) => with(Holder::Nobody, Some(FenceOutcome::Aborted)),
        }
    }

    /// What an inquiry finds of the transaction in `phase` (`None`: no state), and the write
    /// that prevents it, with `prevent`, where nothing does yet.
    ///
    /// The core's rule (`rules::inquire`) over [`Phase::seen`] answers every phase but one:
    /// `Reserved` is held, `Confirming`/`Confirmed` committed, a refusal or any abort
    /// prevented, and no state is an item that never heard of the transaction (prevent: fence
    /// it out, here by recording it aborted). `Reserving` is where the SDK differs: the rules
    /// read it as ended (a duplicate prepare must not call `reserve` again), but a `reserve`
    /// still deciding may yet hold, so an inquiry finds it neither held nor prevented until its
    /// claim is ended. `other_part`: the state holds another payload than the one asked about
    /// (the rule's [`Seen::other_op`]: one store reached through two services), which is no
    /// evidence of this part: `Reserved` then answers `prevented`, nothing written.
    pub(crate) fn inquire(phase: Option<Phase>, prevent: bool, other_part: bool) -> InquiryPlan {
        let seen = Seen {
            other_op: other_part,
            ..Phase::seen(phase)
        };
        match (phase, rules::inquire(seen, prevent)) {
            (Some(Phase::Reserving), _) if prevent => InquiryPlan::EndClaim,
            (Some(Phase::Reserving), _) => InquiryPlan::Answer(Inquiry::Open),
            (_, InquiryStep::Answer(a)) => InquiryPlan::Answer(a),
            // (`Retire` never: a state is one transaction's, a former one's none of its.)
            (None, InquiryStep::Fence | InquiryStep::Bury | InquiryStep::Retire) => {
                InquiryPlan::RecordAborted
            }
            // Every other phase is answered by the rule (a test pins each); were one not, it
            // would be left alone: "cannot tell" is always a safe answer.
            (Some(_), InquiryStep::Fence | InquiryStep::Bury | InquiryStep::Retire) => {
                InquiryPlan::Answer(Inquiry::Open)
            }
        }
    }
}

/// What an inquiry (the staged commit's recovery, `rules::inquire`) does with a transaction's
/// state here: answer, or prevent the transaction with one conditional write first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum InquiryPlan {
    /// Answer without writing.
    Answer(Inquiry),
    /// No state: record the transaction `Aborted` (conditional on no state), as an abort
    /// before its prepare does; its prepare, arriving later, is then refused (`fenced`).
    RecordAborted,
    /// `reserve` is being called (or was interrupted): end its claim, `Reserving → Cancelling`
    /// with the claim already over, over the revision read. The call's result is written over
    /// the claim's revision, so it can no longer land; the abort that follows (or the sweep)
    /// calls `cancel`.
    EndClaim,
}

/// Why `reserve` refused, kept so a duplicate prepare gets the same answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReserveRefusal {
    /// The vote's reason.
    pub reason: VoteReason,
    /// For people.
    pub message: String,
}

/// One transaction's state, as stored (names: `twopc_core::layout`, pinned by a test).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TxState {
    /// The transaction (the table's key).
    pub tx_id: TxId,
    /// Where it stands.
    pub phase: Phase,
    /// Bumped by every write; each write is conditional on the one it replaces.
    pub revision: u64,
    /// Its deadline (epoch ms): past it, a prepared state is resolved through the record.
    pub deadline: u64,
    /// When it began (epoch ms).
    pub began: u64,
    /// What prepare carried (absent for an abort that came first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// In a claimed phase: the hook call counts as interrupted after then (epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_until: Option<u64>,
    /// In `Refused`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<ReserveRefusal>,
    /// Epoch ms.
    pub updated_at: u64,
}

impl TxState {
    /// A transaction's first state.
    pub fn first(tx_id: &TxId, phase: Phase, deadline: u64, began: u64, now: u64) -> TxState {
        TxState {
            tx_id: tx_id.clone(),
            phase,
            revision: 1,
            deadline,
            began,
            payload: None,
            claimed_until: None,
            refusal: None,
            updated_at: now,
        }
    }

    /// The state moved to `phase` (claimed until `claim`, if given), one revision on.
    pub fn moved(&self, phase: Phase, claim: Option<u64>, now: u64) -> TxState {
        TxState {
            phase,
            revision: self.revision + 1,
            claimed_until: claim,
            updated_at: now,
            ..self.clone()
        }
    }

    /// Whether a claimed phase's hook call is still under way at `now`.
    pub(crate) fn claim_live(&self, now: u64) -> bool {
        self.phase.is_claimed() && self.claimed_until.is_some_and(|until| now < until)
    }

    /// Whether the sweep should look at it (not finished).
    pub fn is_pending(&self) -> bool {
        !self.phase.is_terminal()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use twopc_core::layout;
    use twopc_core::rules::{self, AbortStep, CommitStep, PrepareRefusal, PrepareStep, Reply};

    use super::Phase::*;
    use super::*;

    const ALL: [Phase; 8] = [
        Reserving, Reserved, Refused, Confirming, Confirmed, Cancelling, Cancelled, Aborted,
    ];

    #[test]
    fn only_the_documented_moves_exist() {
        let mut legal = vec![];
        for a in ALL {
            for b in ALL {
                if a.can_move_to(b) {
                    legal.push((a, b));
                }
            }
        }
        assert_eq!(
            legal,
            vec![
                (Reserving, Reserving),
                (Reserving, Reserved),
                (Reserving, Refused),
                (Reserving, Cancelling),
                (Reserved, Confirming),
                (Reserved, Cancelling),
                (Confirming, Confirming),
                (Confirming, Confirmed),
                (Cancelling, Cancelling),
                (Cancelling, Cancelled),
            ]
        );
        assert!(
            !Confirming.can_move_to(Cancelling),
            "a commit is never undone"
        );
        assert!(
            !Reserving.can_move_to(Confirming),
            "only a yes vote is confirmed"
        );
    }

    #[test]
    fn the_core_rules_read_each_unclaimed_phase_as_the_protocol_would() {
        let no_state = Phase::seen(None);
        assert_eq!(rules::prepare(no_state, false), PrepareStep::Lock);
        assert_eq!(
            rules::abort(no_state),
            AbortStep::FenceOut,
            "abort first fences out"
        );
        assert!(matches!(
            rules::commit(no_state, false),
            CommitStep::Answer(Reply::Violation(_))
        ));
        let held = Phase::seen(Some(Reserved));
        assert_eq!(
            rules::prepare(held, false),
            PrepareStep::Lock,
            "a retry: yes again"
        );
        assert_eq!(rules::commit(held, false), CommitStep::Apply);
        assert_eq!(rules::abort(held), AbortStep::Release);
        for ended in [Refused, Cancelled, Aborted] {
            let s = Phase::seen(Some(ended));
            assert_eq!(
                rules::prepare(s, false),
                PrepareStep::Refuse(PrepareRefusal::Fenced(FenceOutcome::Aborted))
            );
            assert_eq!(rules::abort(s), AbortStep::Answer(Reply::AlreadyDone));
            assert!(matches!(
                rules::commit(s, false),
                CommitStep::Answer(Reply::Violation(_))
            ));
        }
        let confirmed = Phase::seen(Some(Confirmed));
        assert_eq!(
            rules::commit(confirmed, false),
            CommitStep::Answer(Reply::AlreadyDone)
        );
        assert!(matches!(
            rules::abort(confirmed),
            AbortStep::Answer(Reply::Violation(_))
        ));
    }

    #[test]
    fn a_state_holding_another_payload_is_no_evidence_of_the_part_asked_about() {
        use Inquiry::*;
        // Reserved with another payload (one store reached through two services): prevented,
        // nothing written; what it holds stays its own part's.
        for prevent in [false, true] {
            assert_eq!(
                Phase::inquire(Some(Reserved), prevent, true),
                InquiryPlan::Answer(Prevented)
            );
        }
        // An end it reached is the transaction's, whatever payload it held.
        assert_eq!(
            Phase::inquire(Some(Confirmed), false, true),
            InquiryPlan::Answer(Committed)
        );
    }

    #[test]
    fn an_inquiry_reads_each_phase_and_prevents_only_what_has_not_held() {
        use Inquiry::*;
        let answer = InquiryPlan::Answer;
        // (phase, read-only, with prevent)
        let table = [
            (None, answer(Open), InquiryPlan::RecordAborted),
            (Some(Reserving), answer(Open), InquiryPlan::EndClaim),
            (Some(Reserved), answer(Held), answer(Held)),
            (Some(Refused), answer(Prevented), answer(Prevented)),
            (Some(Confirming), answer(Committed), answer(Committed)),
            (Some(Confirmed), answer(Committed), answer(Committed)),
            (Some(Cancelling), answer(Prevented), answer(Prevented)),
            (Some(Cancelled), answer(Prevented), answer(Prevented)),
            (Some(Aborted), answer(Prevented), answer(Prevented)),
        ];
        assert_eq!(table.len(), ALL.len() + 1, "every phase, and no state");
        for (phase, read, prevent) in table {
            assert_eq!(
                Phase::inquire(phase, false, false),
                read,
                "{phase:?}, read-only"
            );
            assert_eq!(
                Phase::inquire(phase, true, false),
                prevent,
                "{phase:?}, prevent"
            );
        }
        // Each prevent writes a move the phases allow, to a phase the inquiry then reads as
        // prevented for good.
        assert!(Phase::FIRST.contains(&Aborted));
        assert!(Reserving.can_move_to(Cancelling));
        for ended in [Aborted, Cancelling] {
            assert_eq!(Phase::inquire(Some(ended), false, false), answer(Prevented));
            assert!(
                ended
                    .next_moves()
                    .iter()
                    .all(|&n| n == ended || n == Cancelled)
            );
        }
    }

    #[test]
    fn the_serde_derive_spells_the_layouts_names() {
        let mut s = TxState::first(&TxId::random(), Refused, 2, 1, 1);
        s.payload = Some(serde_json::from_str(r#"{"amount": 0.10}"#).expect("json"));
        s.claimed_until = Some(3);
        s.refusal = Some(ReserveRefusal {
            reason: VoteReason::Invalid,
            message: "m".into(),
        });
        let v = serde_json::to_value(&s).expect("state");
        let keys: BTreeSet<&str> = v
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                layout::TX_ID,
                layout::PHASE,
                layout::REVISION,
                layout::DEADLINE,
                layout::BEGAN,
                layout::PAYLOAD,
                layout::CLAIMED_UNTIL,
                layout::REFUSAL,
                layout::UPDATED_AT,
            ]
            .into()
        );
        assert_eq!(v[layout::PAYLOAD]["amount"].to_string(), "0.10", "exact");
        let back: TxState = serde_json::from_value(v).expect("back");
        assert_eq!(back, s);
    }
}
