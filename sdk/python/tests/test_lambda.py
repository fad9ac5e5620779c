"""The Lambda handler with the events/ samples, parsed as Python's Lambda runtime parses them
(floats), and its failures named by the errorTypes the lambda transport reads."""

import json
import uuid

import pytest

from conftest import ROOT, Clock
from dynamo2pc.participant import MemoryStates, Participant, handler
from dynamo2pc.participant import errors


def event(name, tx):
    e = json.loads((ROOT / f"events/custom-participant-{name}.json").read_text())
    e["request"]["txId"] = tx
    return e


@pytest.fixture
def handle(hooks):
    # The samples' deadline is far ahead: a clock before it.
    return handler(Participant(hooks, MemoryStates(), clock=Clock(4_102_444_796_000)))


class Cards:
    """Holds the sample payment; records the amount reserve was given."""

    def __init__(self):
        self.amounts = []

    def reserve(self, call):
        from dynamo2pc.participant import HELD

        self.amounts.append(call.payload["amount"])
        return HELD

    def confirm(self, call):
        pass

    def cancel(self, call):
        pass


def test_the_sample_events_prepare_inquire_commit_and_the_amount_is_a_decimal():
    cards = Cards()
    handle = handler(Participant(cards, MemoryStates(), clock=Clock(4_102_444_796_000)))
    tx = str(uuid.uuid4())
    assert handle(event("prepare", tx)) == {"vote": "yes", "mode": "exclusive"}
    assert str(cards.amounts[0]) == "12.5"  # the value of 12.50, from the runtime's float
    assert handle(event("inquire", tx)) == {"inquiry": "held"}
    assert handle(event("commit", tx)) == {"result": "done"}
    assert handle(event("abort", tx))["result"] == "violation"


def test_failures_are_function_errors_named_as_the_transport_reads_them(handle, hooks):
    with pytest.raises(errors.Invalid):
        handle({"action": "explode", "request": {}})
    with pytest.raises(errors.Invalid):
        handle({"nothing": 1})
    hooks.fail = {"reserve"}
    failing = event("prepare", str(uuid.uuid4()))
    failing["request"]["payload"] = {"amount": 1}
    with pytest.raises(errors.Undetermined) as e:
        handle(failing)
    assert type(e.value).__name__ == "Undetermined"
