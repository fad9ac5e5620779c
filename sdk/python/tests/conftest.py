"""Shared fixtures: the repository's files, a controllable clock, hooks that record their calls."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dynamo2pc.participant import HELD, InvalidPayload, MemoryStates, Participant, refuse

ROOT = Path(__file__).resolve().parents[3]


class Clock:
    """Epoch ms, moved by the test."""

    def __init__(self, now: int = 1_700_000_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


class Recording:
    """Hooks that hold any payload {"amount": n} with n > 0, refuse n == 0 (condition), and
    record every call; ``fail`` names hooks that raise (once each), ``during`` runs inside
    reserve (a test's interleaving)."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []
        self.fail: set[str] = set()
        self.during = None
        self.lock = threading.Lock()

    def read_payload(self, raw):
        if not isinstance(raw, dict) or set(raw) != {"amount"}:
            raise InvalidPayload('expected {"amount": <number>}')
        return raw["amount"]

    def _record(self, hook, call):
        with self.lock:
            self.calls.append((hook, call.tx_id))
        if hook in self.fail:
            self.fail.discard(hook)
            raise RuntimeError(f"{hook} failed (as the test asked)")

    def reserve(self, call):
        self._record("reserve", call)
        if self.during is not None:
            self.during()
        return HELD if call.payload > 0 else refuse("condition", "nothing to hold")

    def confirm(self, call):
        self._record("confirm", call)

    def cancel(self, call):
        self._record("cancel", call)

    def count(self, hook):
        return sum(1 for h, _ in self.calls if h == hook)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def hooks():
    return Recording()


@pytest.fixture
def participant(hooks, clock):
    return Participant(hooks, MemoryStates(), clock=clock, claim_ms=1_000)
