"""What a service implements (three hooks) and what each is given and may answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol

# The reasons a hook may refuse with; the SDK itself answers expired and fenced.
HOOK_REASONS = ("conflict", "condition", "notFound", "invalid")


@dataclass(frozen=True)
class Call:
    """One hook call: the transaction, its payload (as ``read_payload`` returned it), and when
    the call must be done by (epoch ms): the transaction's deadline for ``reserve``, the end of
    the call's claim for ``confirm`` and ``cancel``."""

    tx_id: str
    payload: Any
    deadline: int
    #: When the transaction began (epoch ms). A transaction is its id and this: an
    #: Idempotency-Key used again after its 7-day window names a new transaction under the same
    #: id, with a later ``began``; make hooks idempotent per both.
    began: int = 0


@dataclass(frozen=True)
class Reservation:
    """What ``reserve`` decided: ``HELD``, or refused with a vote reason (nothing held)."""

    held: bool
    reason: Optional[str] = None
    message: str = ""


HELD = Reservation(True)


def refuse(reason: str, message: str) -> Reservation:
    """Refused, nothing held: a ``no`` vote with ``reason`` (``condition`` for a business rule,
    ``invalid`` for a payload the service cannot use, ``notFound``, ``conflict``)."""
    if reason not in HOOK_REASONS:
        raise ValueError(f"{reason!r}: a hook refuses with one of {', '.join(HOOK_REASONS)}")
    return Reservation(False, reason, message)


class InvalidPayload(ValueError):
    """Raised by ``read_payload``: the payload is not one this service reads (an ``invalid``
    vote; no hook is called)."""


class Hooks(Protocol):
    """A service's business logic. The SDK calls each hook at most once per transaction and
    outcome; a hook is called again only when an earlier call of it failed (raised) or was
    interrupted before its result was recorded, so each must be idempotent per transaction:
    ``tx_id`` and ``began`` (both in a gateway's idempotency key). ``cancel`` may find nothing
    held.

    Optionally, ``read_payload(raw)`` turns the payload's JSON (``Decimal`` numbers) into the
    service's own type, raising ``InvalidPayload`` (or ``ValueError``, ``TypeError``,
    ``KeyError``) for one it does not read: an ``invalid`` vote, and no hook is called."""

    def reserve(self, call: Call) -> Reservation: ...

    def confirm(self, call: Call) -> None: ...

    def cancel(self, call: Call) -> None: ...
