"""The protocol around the hooks, as the Rust SDK's conformance kit checks it, on the in-memory
store: each hook at most once, duplicates answered from the record, an abort before its
prepare, deadlines, inquiries and their prevent, failures made good, a silent coordinator."""

import threading
from decimal import Decimal
import uuid

import pytest

from dynamo2pc.participant import Busy, HookFailed, MemoryStates, Participant, read_request
from dynamo2pc.participant.state import FIRST, Phase, inquire

DEADLINE = 1_700_000_005_000


def req(action, tx, **more):
    body = {"txId": tx, "deadline": DEADLINE, "began": DEADLINE - 5_000, "key": {}}
    if action == "prepare":
        body |= {"coordinator": "c", "payload": {"amount": 1}}
    return read_request(action, body | more)


@pytest.fixture
def tx():
    return str(uuid.uuid4())


def test_prepare_reserves_once_and_a_duplicate_gets_the_same_yes(participant, hooks, tx):
    for _ in range(2):
        assert participant.prepare(req("prepare", tx)) == {"vote": "yes", "mode": "exclusive"}
    assert hooks.count("reserve") == 1


def test_a_refusal_is_recorded_and_repeated_and_its_abort_calls_nothing(participant, hooks, tx):
    for _ in range(2):
        r = participant.prepare(req("prepare", tx, payload={"amount": 0}))
        assert (r["vote"], r["reason"]) == ("no", "condition")
    assert hooks.count("reserve") == 1
    assert participant.abort(req("abort", tx, refused=True)) == {"result": "alreadyDone"}
    assert hooks.count("cancel") == 0
    assert participant.commit(req("commit", tx))["result"] == "violation"


def test_a_payload_the_service_does_not_read_is_invalid_and_no_hook_runs(participant, hooks, tx):
    r = participant.prepare(req("prepare", tx, payload={"card": 4242}))
    assert (r["vote"], r["reason"]) == ("no", "invalid")
    assert "expected" in r["message"]
    r = participant.prepare(req("prepare", str(uuid.uuid4()), payload=None))
    assert (r["vote"], r["reason"]) == ("no", "invalid")
    assert hooks.calls == []


def test_commit_confirms_once_and_a_duplicate_is_already_done(participant, hooks, tx):
    participant.prepare(req("prepare", tx))
    assert participant.commit(req("commit", tx)) == {"result": "done"}
    assert participant.commit(req("commit", tx)) == {"result": "alreadyDone"}
    assert hooks.count("confirm") == 1
    assert participant.abort(req("abort", tx))["result"] == "violation"
    assert participant.prepare(req("prepare", tx))["reason"] == "fenced"


def test_abort_cancels_once_and_a_duplicate_is_already_done(participant, hooks, tx):
    participant.prepare(req("prepare", tx))
    assert participant.abort(req("abort", tx)) == {"result": "done"}
    assert participant.abort(req("abort", tx)) == {"result": "alreadyDone"}
    assert hooks.count("cancel") == 1
    assert participant.commit(req("commit", tx))["result"] == "violation"


def test_an_abort_before_its_prepare_holds_nothing_and_refuses_the_prepare(participant, hooks, tx):
    assert participant.abort(req("abort", tx)) == {"result": "done"}
    r = participant.prepare(req("prepare", tx))
    assert (r["vote"], r["reason"]) == ("no", "fenced")
    assert hooks.calls == []


def test_a_commit_with_no_prepare_is_a_violation_and_records_nothing(participant, hooks, tx):
    assert participant.commit(req("commit", tx))["result"] == "violation"
    assert participant.store.get(tx) is None


def test_a_prepare_at_or_past_its_deadline_is_expired_and_holds_nothing(participant, hooks, clock, tx):
    clock.now = DEADLINE
    r = participant.prepare(req("prepare", tx))
    assert (r["vote"], r["reason"]) == ("no", "expired")
    assert hooks.calls == [] and participant.store.get(tx) is None


def test_a_duplicate_with_another_payload_is_refused_and_the_hold_keeps_its_own(participant, hooks, tx):
    participant.prepare(req("prepare", tx, payload={"amount": 1}))
    assert participant.prepare(req("prepare", tx, payload={"amount": Decimal("1.0")}))["vote"] == "yes"
    r = participant.prepare(req("prepare", tx, payload={"amount": 2}))
    assert (r["vote"], r["reason"]) == ("no", "invalid")
    assert participant.store.get(tx).payload == {"amount": 1}


def test_an_inquiry_of_a_held_transaction_leaves_it_held_and_committable(participant, hooks, tx):
    participant.prepare(req("prepare", tx))
    for prevent in (False, True):
        assert participant.inquire(req("inquire", tx, prevent=prevent)) == {"inquiry": "held"}
    assert participant.commit(req("commit", tx)) == {"result": "done"}
    assert participant.inquire(req("inquire", tx)) == {"inquiry": "committed"}


def test_an_inquiry_about_another_payload_than_the_one_held_finds_it_prevented(participant, hooks, tx):
    participant.prepare(req("prepare", tx))
    # The same payload, its number spelled otherwise: held.
    same = {"amount": Decimal("1.0")}
    assert participant.inquire(req("inquire", tx, payload=same)) == {"inquiry": "held"}
    # Another (one store reached through two services): prevented, nothing written.
    for prevent in (False, True):
        r = participant.inquire(req("inquire", tx, payload={"amount": 2}, prevent=prevent))
        assert r == {"inquiry": "prevented"}
    assert participant.inquire(req("inquire", tx, prevent=True)) == {"inquiry": "held"}


def test_a_prevent_before_its_prepare_refuses_the_prepare(participant, hooks, tx):
    assert participant.inquire(req("inquire", tx)) == {"inquiry": "open"}
    assert participant.inquire(req("inquire", tx, prevent=True)) == {"inquiry": "prevented"}
    assert participant.prepare(req("prepare", tx))["reason"] == "fenced"
    assert hooks.calls == []


def test_a_prevent_during_the_prepare_keeps_its_late_result_from_holding(participant, hooks, tx):
    seen = {}
    hooks.during = lambda: seen.update(
        inquiry=participant.inquire(req("inquire", tx)),
        prevented=participant.inquire(req("inquire", tx, prevent=True)),
    )
    r = participant.prepare(req("prepare", tx))
    assert seen == {"inquiry": {"inquiry": "open"}, "prevented": {"inquiry": "prevented"}}
    assert (r["vote"], r["reason"]) == ("no", "fenced")
    assert hooks.count("cancel") == 1, "what the late reserve held is released"
    assert participant.abort(req("abort", tx))["result"] == "alreadyDone"
    assert hooks.count("cancel") == 1


def test_a_copy_of_a_call_under_way_is_busy_and_reserve_runs_once(participant, hooks, tx):
    answers = []
    hooks.during = lambda: answers.append(participant.prepare(req("prepare", tx)))
    assert participant.prepare(req("prepare", tx))["vote"] == "yes"
    assert answers[0]["reason"] == "conflict"
    assert hooks.count("reserve") == 1


def test_concurrent_duplicates_take_effect_once(hooks, clock, tx):
    participant = Participant(hooks, MemoryStates(), clock=clock)
    participant.prepare(req("prepare", tx))
    results, start = [], threading.Barrier(4)

    def commit():
        start.wait()
        try:
            results.append(participant.commit(req("commit", tx))["result"])
        except Busy:
            results.append("busy")

    threads = [threading.Thread(target=commit) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert hooks.count("confirm") == 1
    assert results.count("done") == 1, results


def test_a_failed_call_is_made_good_by_the_next_message(participant, hooks, tx):
    hooks.fail = {"reserve"}
    with pytest.raises(HookFailed):
        participant.prepare(req("prepare", tx))
    assert participant.prepare(req("prepare", tx))["reason"] == "conflict", "never reserve twice"
    assert participant.abort(req("abort", tx)) == {"result": "done"}
    assert hooks.count("cancel") == 1, "the failed reserve may have held: cancelled"

    other = str(uuid.uuid4())
    participant.prepare(req("prepare", other))
    hooks.fail = {"confirm"}
    with pytest.raises(HookFailed):
        participant.commit(req("commit", other))
    assert participant.commit(req("commit", other)) == {"result": "done"}
    assert hooks.count("confirm") == 2


def test_an_interrupted_call_is_taken_over_once_its_claim_expires(participant, hooks, clock, tx):
    participant.prepare(req("prepare", tx))
    s = participant.store.get(tx)
    # A commit that crashed after claiming its confirm: the claim stands until it expires.
    participant.store.replace(s.moved(Phase.CONFIRMING, clock.now + 1_000, clock.now))
    with pytest.raises(Busy):
        participant.commit(req("commit", tx))
    clock.now += 1_000
    assert participant.commit(req("commit", tx)) == {"result": "done"}
    assert hooks.count("confirm") == 1


class Records:
    def __init__(self, statuses):
        self.statuses = statuses

    def status(self, tx):
        return self.statuses.get(tx)


def test_a_silent_coordinator_is_resolved_by_the_record_never_here(hooks, clock):
    committed, aborted, undecided = (str(uuid.uuid4()) for _ in range(3))
    records = Records({committed: "COMMITTING", aborted: "ABORTED", undecided: "PREPARING"})
    participant = Participant(hooks, MemoryStates(), records=records, clock=clock)
    for tx in (committed, aborted, undecided):
        participant.prepare(req("prepare", tx))
    assert participant.sweep() == [], "nothing is overdue before the deadline"
    clock.now = DEADLINE + 1
    assert sorted(participant.sweep()) == sorted(
        [(committed, "confirmed"), (aborted, "cancelled"), (undecided, "left")]
    )
    assert participant.store.get(undecided).phase is Phase.RESERVED, "left to the coordinator's sweeper"
    assert (hooks.count("confirm"), hooks.count("cancel")) == (1, 1)


def test_the_moves_and_the_inquiry_table_are_the_rust_sdks():
    legal = [(a, b) for a in Phase for b in Phase if b in a.next_moves()]
    assert legal == [
        (Phase.RESERVING, Phase.RESERVING), (Phase.RESERVING, Phase.RESERVED),
        (Phase.RESERVING, Phase.REFUSED), (Phase.RESERVING, Phase.CANCELLING),
        (Phase.RESERVED, Phase.CONFIRMING), (Phase.RESERVED, Phase.CANCELLING),
        (Phase.CONFIRMING, Phase.CONFIRMING), (Phase.CONFIRMING, Phase.CONFIRMED),
        (Phase.CANCELLING, Phase.CANCELLING), (Phase.CANCELLING, Phase.CANCELLED),
    ]  # fmt: skip
    assert FIRST == (Phase.RESERVING, Phase.ABORTED)
    answers = {p: (inquire(p, False), inquire(p, True)) for p in [None, *Phase]}
    assert {p: tuple(str(getattr(a, "value", a)) for a in v) for p, v in answers.items()} == {
        None: ("open", "record aborted"),
        Phase.RESERVING: ("open", "end claim"),
        Phase.RESERVED: ("held", "held"),
        Phase.REFUSED: ("prevented", "prevented"),
        Phase.CONFIRMING: ("committed", "committed"),
        Phase.CONFIRMED: ("committed", "committed"),
        Phase.CANCELLING: ("prevented", "prevented"),
        Phase.CANCELLED: ("prevented", "prevented"),
        Phase.ABORTED: ("prevented", "prevented"),
    }


WEEK = 7 * 24 * 3_600_000


def again(action, tx, **more):
    """A message of a later transaction under `tx`'s id: its Idempotency-Key used again after
    its 7-day window (the same id, a later `began`)."""
    return req(action, tx, deadline=DEADLINE + WEEK + 1, began=DEADLINE + WEEK - 4_999, **more)


def test_a_key_used_again_after_its_window_is_a_new_transaction_here(participant, hooks, clock, tx):
    # GIVEN a transaction committed here, its record long expired
    participant.prepare(req("prepare", tx))
    assert participant.commit(req("commit", tx)) == {"result": "done"}
    clock.now += WEEK
    # WHEN the same key names a new transaction: the former's state answers nothing for it
    assert participant.inquire(again("inquire", tx, prevent=False)) == {"inquiry": "open"}
    assert participant.prepare(again("prepare", tx)) == {"vote": "yes", "mode": "exclusive"}
    assert participant.inquire(again("inquire", tx, prevent=False)) == {"inquiry": "held"}
    assert participant.commit(again("commit", tx)) == {"result": "done"}
    # THEN it reserved and confirmed again, as its own transaction
    assert (hooks.count("reserve"), hooks.count("confirm")) == (2, 2)
    assert participant.store.get(tx).began == DEADLINE + WEEK - 4_999
    # AND the former's late messages replace nothing of the new one's
    assert participant.commit(req("commit", tx))["result"] == "violation"
    with pytest.raises(Exception, match="later than this message"):
        participant.abort(req("abort", tx))
    assert participant.store.get(tx).phase is Phase.CONFIRMED


@pytest.mark.parametrize("prevent", [False, True])
def test_an_abort_or_prevent_of_a_key_used_again_is_recorded_over_the_former(participant, hooks, clock, tx, prevent):
    participant.prepare(req("prepare", tx))
    participant.commit(req("commit", tx))
    clock.now += WEEK
    if prevent:
        assert participant.inquire(again("inquire", tx, prevent=True)) == {"inquiry": "prevented"}
    else:
        assert participant.abort(again("abort", tx)) == {"result": "done"}
    assert participant.prepare(again("prepare", tx))["reason"] == "fenced"
    assert (hooks.count("reserve"), hooks.count("cancel")) == (1, 0)
