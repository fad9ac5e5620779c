"""A transaction's state at the participant (one record per transaction id), its legal moves,
and what each rule answers from it: the same phases, moves and answers as the Rust SDK
(crates/participant-sdk/src/state.rs and the core's rules it asks).

A hook call is bracketed by a claimed phase (``reserving``, ``confirming``, ``cancelling``),
written before the call and replaced by its result after, so that a duplicate never calls the
hook again and a crash leaves a mark the next message or the sweep acts on.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Optional


class Phase(str, enum.Enum):
    """Where a transaction stands here (stored by its value)."""

    RESERVING = "reserving"  # reserve being called (claimed until the deadline)
    RESERVED = "reserved"  # held, voted yes
    REFUSED = "refused"  # reserve refused, voted no: nothing held
    CONFIRMING = "confirming"  # confirm being called (claimed)
    CONFIRMED = "confirmed"
    CANCELLING = "cancelling"  # cancel being called (claimed)
    CANCELLED = "cancelled"
    ABORTED = "aborted"  # aborted (or prevented) before any prepare: a prepare is fenced

    def next_moves(self) -> tuple[Phase, ...]:
        return _MOVES[self]

    @property
    def terminal(self) -> bool:
        return not _MOVES[self]

    @property
    def claimed(self) -> bool:
        return self in (Phase.RESERVING, Phase.CONFIRMING, Phase.CANCELLING)


_MOVES: dict[Phase, tuple[Phase, ...]] = {
    Phase.RESERVING: (Phase.RESERVING, Phase.RESERVED, Phase.REFUSED, Phase.CANCELLING),
    Phase.RESERVED: (Phase.CONFIRMING, Phase.CANCELLING),
    Phase.CONFIRMING: (Phase.CONFIRMING, Phase.CONFIRMED),
    Phase.CANCELLING: (Phase.CANCELLING, Phase.CANCELLED),
    Phase.REFUSED: (),
    Phase.CONFIRMED: (),
    Phase.CANCELLED: (),
    Phase.ABORTED: (),
}

# The phases a transaction's first write may create.
FIRST = (Phase.RESERVING, Phase.ABORTED)


@dataclasses.dataclass(frozen=True)
class TxState:
    """One transaction's state, as stored (the Rust SDK's attribute names)."""

    tx_id: str
    phase: Phase
    revision: int  # bumped by every write; each write is conditional on the one it replaces
    deadline: int  # epoch ms
    began: int  # epoch ms
    updated_at: int  # epoch ms
    payload: Any = None  # what prepare carried (None for an abort that came first)
    claimed_until: Optional[int] = None  # in a claimed phase: the call counts as interrupted after
    refusal: Optional[tuple[str, str]] = None  # in refused: (reason, message)

    @staticmethod
    def first(tx_id: str, phase: Phase, deadline: int, began: int, now: int) -> TxState:
        return TxState(tx_id, phase, 1, deadline, began, now)

    def moved(self, phase: Phase, claim: Optional[int], now: int) -> TxState:
        """This state moved to ``phase`` (claimed until ``claim``), one revision on."""
        return dataclasses.replace(
            self, phase=phase, revision=self.revision + 1, claimed_until=claim, updated_at=now
        )

    def claim_live(self, now: int) -> bool:
        """Whether a claimed phase's hook call is still under way at ``now``."""
        return self.phase.claimed and self.claimed_until is not None and now < self.claimed_until

    @property
    def pending(self) -> bool:
        return not self.phase.terminal


# --- what each message finds ------------------------------------------------------------------
#
# The Rust SDK reads each phase through the core's rules (Phase::seen); the answers, spelled out
# per phase, are these (its tests pin the same table).

# Prepare of a transaction in a phase other than reserving/refused/reserved: fenced.
FENCED_BY = {
    Phase.CONFIRMING: "Committed",
    Phase.CONFIRMED: "Committed",
    Phase.CANCELLING: "Aborted",
    Phase.CANCELLED: "Aborted",
    Phase.ABORTED: "Aborted",
}

# Commit: None = call confirm (claim); "claimed" = a confirm under way or interrupted; a string
# = answer that (alreadyDone) or a violation's text.
COMMIT = {
    Phase.RESERVED: None,
    Phase.CONFIRMING: "claimed",
    Phase.CONFIRMED: "alreadyDone",
    Phase.RESERVING: "violation: commit of a transaction that never voted yes",
    Phase.CANCELLING: "violation: commit of a transaction being cancelled",
    Phase.REFUSED: "violation: commit of a transaction that voted no",
    Phase.CANCELLED: "violation: commit of an aborted transaction",
    Phase.ABORTED: "violation: commit of an aborted transaction",
}

# Abort: None = call cancel; "claimed" = a call under way or interrupted (reserve or cancel);
# "alreadyDone"; or a violation's text.
ABORT = {
    Phase.RESERVED: None,
    Phase.RESERVING: "claimed",
    Phase.CANCELLING: "claimed",
    Phase.REFUSED: "alreadyDone",
    Phase.CANCELLED: "alreadyDone",
    Phase.ABORTED: "alreadyDone",
    Phase.CONFIRMING: "violation: abort of a transaction being confirmed",
    Phase.CONFIRMED: "violation: abort of a committed transaction",
}


class Plan(enum.Enum):
    """What an inquiry does beyond answering."""

    RECORD_ABORTED = "record aborted"  # no state: record aborted (conditional on none)
    END_CLAIM = "end claim"  # reserve still deciding: end its claim (reserving -> cancelling)


def inquire(phase: Optional[Phase], prevent: bool, other_part: bool = False) -> str | Plan:
    """What an inquiry finds of a transaction in ``phase`` (None: no state): an answer
    (``held``, ``committed``, ``prevented``, ``open``) or, with ``prevent``, the write that
    prevents it. A reserve still deciding is neither held nor prevented until its claim ends.
    ``other_part``: the state holds another payload than the one asked about (one store reached
    through two services), no evidence of that part: a reserved state answers ``prevented``."""
    if phase is Phase.RESERVED and other_part:
        return "prevented"
    if phase is None:
        return Plan.RECORD_ABORTED if prevent else "open"
    if phase is Phase.RESERVING:
        return Plan.END_CLAIM if prevent else "open"
    if phase is Phase.RESERVED:
        return "held"
    if phase in (Phase.CONFIRMING, Phase.CONFIRMED):
        return "committed"
    return "prevented"
