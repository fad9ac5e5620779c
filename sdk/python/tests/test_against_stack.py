"""The client against the local stack (``twopc serve`` beside the loyalty example): run by
crates/twopc/tests/conformance.rs, which starts both, leaves one transaction pending and sets
TWOPC_STACK_URL and TWOPC_STACK_PENDING; skipped in the unit run, where no stack is up."""

import os
import uuid
from decimal import Decimal

import pytest

from dynamo2pc.client import ApiError, Client, custom, credit, debit, table

URL = os.environ.get("TWOPC_STACK_URL")
pytestmark = pytest.mark.skipif(not URL, reason="no stack: crates/twopc/tests/conformance.rs runs these")


@pytest.fixture(scope="module")
def client():
    return Client(URL, timeout=30)


def order(account, amount, member, points):
    return {"wait": "applied", "participants": [
        table("accounts", {"id": account}, debit("balance", Decimal(amount))),
        custom("loyalty", {"member": member, "points": points})]}  # fmt: skip


def test_an_order_across_a_rust_and_the_python_participant_commits_and_reads_back(client):
    key = f"py-order-{uuid.uuid4()}"
    answer = client.submit(order("alice", "0.50", "alice", 3), idempotency_key=key)
    assert (answer.status, answer.committed, answer.applied) == ("COMMITTED", True, True), answer.body
    assert [p["participant"] for p in answer.participants] == ["accounts", "loyalty"]
    assert answer.participants[1]["vote"] == "yes"
    again = client.submit(order("alice", "0.50", "alice", 3), idempotency_key=key)
    assert again.tx_id == answer.tx_id, "the same key finds the same transaction"
    assert client.status(answer.tx_id).status == "COMMITTED"
    assert client.wait(answer.tx_id, 5).finished


def test_an_order_the_python_participant_refuses_aborts_with_its_reason(client):
    answer = client.submit(order("alice", "0.50", "bob", 10**9))
    assert (answer.status, answer.code, answer.committed) == ("ABORTED", "condition", False), answer.body
    assert answer.participants[1]["reason"] == "condition"


def test_an_exact_transfer_commits_and_a_refusal_is_typed(client):
    tx = {"participants": [
        table("accounts", {"id": "bob"}, debit("balance", Decimal("0.10"))),
        table("accounts", {"id": "carol"}, credit("balance", Decimal("0.10")))]}  # fmt: skip
    assert client.submit(tx).status in ("COMMITTED", "COMMITTING")
    with pytest.raises(ApiError) as e:
        client.submit({"participants": [table("nowhere", {"id": "x"}, credit("n", Decimal(1)))]})
    assert (e.value.status, e.value.code) == (400, "unknown_participant")
    with pytest.raises(ApiError) as e:
        client.status(str(uuid.uuid4()))
    assert (e.value.status, e.value.code) == (404, "not_found")


def test_the_pending_listing_shows_the_unfinished_transaction(client):
    pending = os.environ["TWOPC_STACK_PENDING"]
    page = client.pending(limit=100)
    assert pending in [t.tx_id for t in page.transactions]
    assert all(not t.finished for t in page.transactions)
    assert client.status(pending).status == "PREPARING"
