"""The driver: prepare, commit, abort and inquire as the coordinator sends them, and the sweep
of states whose coordinator went silent. Each reads the transaction's state, asks what it
answers (``state.py``), claims the hook call with a conditional write, calls the hook, and
records its result with another: the Rust SDK's steps (crates/participant-sdk/src/participant).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from decimal import Decimal
from typing import Any, Callable, Optional

from . import state as rules
from .errors import Busy, HookFailed, Invalid, StoreUnavailable
from .hooks import Call, Hooks, InvalidPayload, Reservation
from .records import TransactionRecords
from .requests import Request
from .state import Phase, Plan, TxState
from .store import Lost, StateStore

log = logging.getLogger("dynamo2pc.participant")

DEFAULT_CLAIM_MS = 30_000
SWEEP_LIMIT = 100
_ROUNDS = 6  # lost writes in a row before a call gives up (503): the state kept changing


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def no(reason: str, message: str) -> dict:
    return {"vote": "no", "reason": reason, "message": message}


YES = {"vote": "yes", "mode": "exclusive"}


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values, numbers by value (``12.50`` is ``12.5``; ``true`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, Decimal)) and isinstance(b, (int, Decimal)):
        return Decimal(a) == Decimal(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class Participant:
    """A service's hooks and the protocol around them, its states in ``store``. ``records``
    (the coordinator's transactions table) lets ``sweep`` finish states whose coordinator went
    silent; ``clock`` gives epoch ms; ``claim_ms`` bounds a ``confirm`` or ``cancel`` call."""

    def __init__(
        self,
        hooks: Hooks,
        store: StateStore,
        *,
        records: Optional[TransactionRecords] = None,
        clock: Callable[[], int] = now_ms,
        claim_ms: int = DEFAULT_CLAIM_MS,
    ):
        self.hooks, self.store, self.records = hooks, store, records
        self.clock, self.claim_ms = clock, claim_ms

    # --- prepare -------------------------------------------------------------------------

    def prepare(self, req: Request) -> dict:
        """``reserve`` once, yes or no; a duplicate gets the same answer without a call; a
        prepare after the transaction ended here (or was aborted first) is ``fenced``."""
        now = self.clock()
        if now >= req.deadline:
            return no("expired", f"the transaction's deadline passed {now - req.deadline} ms ago")
        if req.payload is None:
            return no("invalid", "no payload: this participant takes a payload, not an operation")
        claim = self._claim_reserve(req, now)
        if isinstance(claim, dict):
            return claim
        try:
            reservation = self._reserve(req)
        except HookFailed as failed:
            self._end_reserve_claim(claim, late_hold=False)
            raise failed
        if self.clock() >= req.deadline:  # not stopped, but too late: as if it had timed out
            self._end_reserve_claim(claim, late_hold=reservation.held)
            raise HookFailed(f"reserve of transaction {req.tx_id} finished after its deadline")
        return self._record_vote(req, claim, reservation)

    def _claim_reserve(self, req: Request, now: int) -> TxState | dict:
        found, former = _as_of(self.store.get(req.tx_id), req.began)
        for _ in range(_ROUNDS):
            answer = _answer_prepare(found, req.payload, now)
            if answer is not None:
                return answer
            claim = TxState.first(req.tx_id, Phase.RESERVING, req.deadline, req.began, now)
            claim = _with(claim, payload=req.payload, claimed_until=req.deadline)
            lost, claim = self._create_over(claim, former)
            if lost is None:
                return claim
            found, former = _as_of(lost.found, req.began)
        raise StoreUnavailable(f"transaction {req.tx_id}: its state kept changing under the prepare")

    def _reserve(self, req: Request) -> Reservation:
        try:
            payload = self._read_payload(req.payload)
        except (InvalidPayload, ValueError, TypeError, KeyError) as e:
            return Reservation(False, "invalid", f"the payload is not one this participant reads: {e}")
        call = Call(req.tx_id, payload, req.deadline, req.began)
        try:
            reservation = self.hooks.reserve(call)
        except Exception as e:
            raise HookFailed(f"reserve of transaction {req.tx_id} failed: {e}") from e
        if not isinstance(reservation, Reservation):
            raise HookFailed(f"reserve returned {reservation!r}: return HELD or refuse(reason, message)")
        return reservation

    def _end_reserve_claim(self, claim: TxState, late_hold: bool) -> None:
        """A failed or late ``reserve``: its claim ends now (the abort then cancels at once).
        Where an abort already took the claim over, its ``cancel`` may have run before a late
        hold was made: cancel it again (hooks are idempotent per transaction)."""
        now = self.clock()
        lost = self.store.replace(claim.moved(Phase.RESERVING, now, now))
        if lost is not None:
            log.warning("transaction %s: the failed reserve's state moved meanwhile", claim.tx_id)
            if late_hold:
                self._call_hook("cancel", claim, now + self.claim_ms)

    def _record_vote(self, req: Request, claim: TxState, r: Reservation) -> dict:
        now = self.clock()
        if r.held:
            next_state, vote = claim.moved(Phase.RESERVED, None, now), dict(YES)
        else:
            next_state = _with(claim.moved(Phase.REFUSED, None, now), refusal=(r.reason, r.message))
            vote = no(r.reason or "invalid", r.message)
        lost = self.store.replace(next_state)
        if lost is None:
            return vote
        # The claim was ended under the call (an inquiry's prevent, or an abort that found it
        # expired): the transaction is being cancelled, and what the call held must go too.
        log.warning("transaction %s: reserve finished after its claim was ended", req.tx_id)
        if r.held:
            self._cancel_late_hold(claim, lost.found)
        if self.clock() < req.deadline:
            return no("fenced", "this transaction was prevented here while its reserve ran")
        return no("expired", "the reserve finished after the transaction's deadline")

    def _cancel_late_hold(self, claim: TxState, found: Optional[TxState]) -> None:
        now = self.clock()
        if found is not None and found.phase is Phase.CANCELLING and not found.claim_live(now):
            try:
                if self._finish(claim.tx_id, "abort", None) == {"result": "done"}:
                    return
            except Busy:
                pass
        self._call_hook("cancel", claim, now + self.claim_ms)

    # --- commit and abort ----------------------------------------------------------------

    def commit(self, req: Request) -> dict:
        """``confirm`` once; a duplicate is ``alreadyDone``; a commit of a transaction that did
        not vote yes here is a ``violation``."""
        return self._finish(req.tx_id, "commit", req)

    def abort(self, req: Request) -> dict:
        """``cancel`` once if held; an abort before (or instead of) its prepare is recorded, so
        that prepare is refused, and calls nothing."""
        return self._finish(req.tx_id, "abort", req)

    def _finish(self, tx: str, decision: str, req: Optional[Request]) -> dict:
        began = None if req is None else req.began
        found, former = _as_of(self.store.get(tx), began)
        for _ in range(_ROUNDS):
            now = self.clock()
            if found is None:
                if decision == "commit" or req is None:
                    return _violation(tx, f"{decision} with no state")
                aborted = TxState.first(tx, Phase.ABORTED, req.deadline, req.began, now)
                lost, _ = self._create_over(aborted, former)
                if lost is None:
                    return {"result": "done"}
                found, former = _as_of(lost.found, began)
                continue
            answer = (rules.COMMIT if decision == "commit" else rules.ABORT)[found.phase]
            if answer == "claimed" and found.claim_live(now):
                raise Busy(f"transaction {tx}: a {found.phase.value} call is under way until {found.claimed_until}")
            if answer == "alreadyDone":
                return {"result": "alreadyDone"}
            if answer is not None and answer != "claimed":
                return _violation(tx, answer.removeprefix("violation: "))
            lost = self._call_and_record(found, decision, now)
            if lost is None:
                return {"result": "done"}
            found, former = _as_of(lost.found, began)
        raise StoreUnavailable(f"transaction {tx}: its state kept changing under the {decision}")

    def _create_over(self, state: TxState, former: Optional[TxState]) -> tuple[Optional[Lost], TxState]:
        """Writes ``state``, a transaction's first: created where its id holds none, or written
        over ``former``, a former transaction's under the same id (its Idempotency-Key used again
        after its window), once that one is finished; returns what it wrote (its revision
        follows the former's). An unfinished former state, which the protocol never leaves
        behind, fails the step (503, retried); one that began later is a successor's, so this
        message is a late one of a transaction long ended: refused, nothing written."""
        if former is None:
            return self.store.create(state), state
        what = (
            f"transaction {state.tx_id}: a state ({former.phase.value}) of another transaction"
            f" under this id, began {former.began}"
        )
        if former.began > state.began:
            raise Invalid(f"{what}, later than this message's {state.began}")
        if not former.phase.terminal:
            raise StoreUnavailable(f"{what}, still unfinished")
        log.info("transaction %s: a former transaction's state (began %d) replaced", state.tx_id, former.began)
        over = _with(state, revision=former.revision + 1)
        return self.store.replace(over), over

    def _call_and_record(self, s: TxState, decision: str, now: int) -> Optional[Lost]:
        calling, done, hook = (
            (Phase.CONFIRMING, Phase.CONFIRMED, "confirm")
            if decision == "commit"
            else (Phase.CANCELLING, Phase.CANCELLED, "cancel")
        )
        until = now + self.claim_ms
        claim = s.moved(calling, until, now)
        lost = self.store.replace(claim)
        if lost is not None:
            return lost
        self._call_hook(hook, claim, until)
        lost = self.store.replace(claim.moved(done, None, self.clock()))
        if lost is not None:  # our claim was taken over after it expired: the hook ran twice
            log.warning("transaction %s: the %s call outlived its claim", s.tx_id, hook)
        return lost

    def _call_hook(self, hook: str, s: TxState, until: int) -> None:
        """Calls ``confirm`` or ``cancel`` for the claimed state; a failure ends the claim now
        (the next message calls it again at once) and is ``HookFailed``."""
        try:
            payload = self._read_payload(s.payload)
        except (InvalidPayload, ValueError, TypeError, KeyError) as e:
            if hook == "cancel":  # reserve never ran on a payload that does not read
                return
            raise HookFailed(f"the recorded payload no longer reads as this participant's: {e}")
        try:
            getattr(self.hooks, hook)(Call(s.tx_id, payload, until, s.began))
        except Exception as e:
            now = self.clock()
            try:
                self.store.replace(s.moved(s.phase, now, now))
            except Exception:  # the claim then ends at its time
                log.exception("transaction %s: ending the failed %s's claim", s.tx_id, hook)
            raise HookFailed(f"{hook} of transaction {s.tx_id} failed: {e}") from e

    def _read_payload(self, raw: Any) -> Any:
        read = getattr(self.hooks, "read_payload", None)
        return raw if read is None else read(raw)

    # --- inquire -------------------------------------------------------------------------

    def inquire(self, req: Request) -> dict:
        """``held`` once reserve said yes and it was recorded, ``committed`` once committed,
        ``prevented`` once refused or aborted; otherwise ``open`` or, with ``prevent``,
        prevented first by one conditional write. Calls no hook."""
        tx = req.tx_id
        found, former = _as_of(self.store.get(tx), req.began)
        for _ in range(_ROUNDS):
            now = self.clock()
            other_part = (
                found is not None
                and found.payload is not None
                and req.payload is not None
                and not same_json(found.payload, req.payload)
            )
            plan = rules.inquire(found.phase if found else None, req.prevent, other_part)
            if isinstance(plan, str):
                return {"inquiry": plan}
            if plan is Plan.RECORD_ABORTED:
                aborted = TxState.first(tx, Phase.ABORTED, req.deadline, req.began, now)
                lost, _ = self._create_over(aborted, former)
            else:
                assert found is not None
                lost = self.store.replace(found.moved(Phase.CANCELLING, now, now))
            if lost is None:
                log.info("transaction %s: staged transaction prevented here", tx)
                return {"inquiry": "prevented"}
            found, former = _as_of(lost.found, req.began)
        raise StoreUnavailable(f"transaction {tx}: its state kept changing under the inquiry")

    # --- a silent coordinator ------------------------------------------------------------

    def resolve(self, tx: str) -> str:
        """Finishes one state whose coordinator may have gone silent, by the transaction's
        record (read, never written here): ``confirmed``, ``cancelled``, ``violation`` or
        ``left`` (nothing to do yet, or the coordinator's sweeper decides)."""
        s = self.store.get(tx)
        if s is None or s.phase.terminal:
            return "left"
        decision = None
        if s.phase is Phase.CONFIRMING:
            decision = "commit"
        elif s.phase is Phase.CANCELLING:
            decision = "abort"
        elif self.records is not None:
            status = self.records.status(tx)
            if status == "COMMITTING" and s.phase is Phase.RESERVED:
                decision = "commit"
            elif status in ("COMMITTING", "COMMITTED"):
                log.error("transaction %s: the record (%s) contradicts %s here", tx, status, s.phase.value)
                return "violation"
            elif status in ("ABORTING", "ABORTED"):
                decision = "abort"
        if decision is None:
            return "left"
        reply = self._finish(tx, decision, None)
        if reply["result"] == "violation":
            return "violation"
        return "confirmed" if decision == "commit" else "cancelled"

    def sweep(self, limit: int = SWEEP_LIMIT) -> list[tuple[str, str]]:
        """One pass over the unfinished states past their deadline (at most ``limit``)."""
        done = []
        for s in self.store.overdue(self.clock(), limit):
            try:
                done.append((s.tx_id, self.resolve(s.tx_id)))
            except Busy:
                done.append((s.tx_id, "left"))
        return done


def _answer_prepare(found: Optional[TxState], payload: Any, now: int) -> Optional[dict]:
    """What the state found answers a prepare of ``payload`` (None: no state, claim the call)."""
    if found is None:
        return None
    if found.phase is Phase.REFUSED:
        reason, message = found.refusal or ("invalid", "")
        return no(reason, message)
    if found.phase is Phase.RESERVING:
        if found.claim_live(now):
            return no("conflict", "a prepare of this transaction is under way")
        return no("conflict", "a prepare of this transaction was interrupted")
    if found.phase in rules.FENCED_BY:
        return no("fenced", f"this transaction already ended here ({rules.FENCED_BY[found.phase]})")
    if found.payload is not None and not same_json(found.payload, payload):
        return no(
            "invalid",
            "this transaction holds this participant already with another payload: refused, "
            "what it holds keeps its payload",
        )
    return dict(YES)  # reserved: a retry gets its yes again


def _as_of(s: Optional[TxState], began: Optional[int]) -> tuple[Optional[TxState], Optional[TxState]]:
    """``(own, former)``: the state under a transaction's id as the transaction that began at
    ``began`` reads it (None: the sweep, which reads it as it is). A transaction is its id and
    its ``began``: a state of another ``began`` is a former transaction's (an Idempotency-Key
    used again after its 7-day window), none of this one's."""
    if s is not None and began is not None and s.began != began:
        return None, s
    return s, None


def _with(s: TxState, **changes: Any) -> TxState:
    return dataclasses.replace(s, **changes)


def _violation(tx: str, what: str) -> dict:
    log.error("transaction %s: protocol violation: %s", tx, what)
    return {"result": "violation", "message": f"transaction {tx}: {what}"}
