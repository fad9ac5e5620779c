"""One contract, two stores: the in-memory one the protocol tests use, and DynamoStates on a
real DynamoDB engine (DynamoDB Local at TWOPC_DYNAMODB_ENDPOINT, which make test sets)."""

import os
import uuid
from decimal import Decimal

import pytest

from dynamo2pc.participant import DynamoStates, MemoryStates, dynamodb_client
from dynamo2pc.participant.state import Phase, TxState
from dynamo2pc.participant.store import shard_of

ENDPOINT = os.environ.get("TWOPC_DYNAMODB_ENDPOINT")


@pytest.fixture(params=["memory", "dynamodb"])
def store(request):
    if request.param == "memory":
        return MemoryStates()
    if not ENDPOINT:
        pytest.skip("TWOPC_DYNAMODB_ENDPOINT is not set (make test sets it)")
    s = DynamoStates(dynamodb_client(ENDPOINT), f"py-states-{uuid.uuid4().hex[:8]}")
    s.create_table_if_missing()
    s.create_table_if_missing()  # idempotent
    return s


def state(phase=Phase.RESERVING, deadline=2_000, **more):
    s = TxState.first(str(uuid.uuid4()), phase, deadline, 1_000, 1_500)
    payload = {"amount": Decimal("12.50"), "n": 7, "card": "4242", "tags": ["a", True, None]}
    return TxState(**{**s.__dict__, "payload": payload, "claimed_until": deadline, **more})


def test_create_is_conditional_on_no_state_and_reads_back_exactly(store):
    s = state()
    assert store.create(s) is None
    assert store.get(s.tx_id) == s
    assert store.create(s.moved(Phase.RESERVED, None, 1_600)).found == s
    assert store.get(str(uuid.uuid4())) is None


def test_replace_is_conditional_on_the_revision_it_replaces(store):
    s = state()
    store.create(s)
    held = s.moved(Phase.RESERVED, None, 1_600)
    assert store.replace(held) is None
    assert store.replace(s.moved(Phase.REFUSED, None, 1_700)).found == held, "a stale revision loses"
    refused = state(Phase.REFUSED, refusal=("condition", "declined"), claimed_until=None)
    assert store.replace(refused).found is None, "no state to replace"
    store.create(refused)
    assert store.get(refused.tx_id).refusal == ("condition", "declined")


def test_overdue_lists_unfinished_states_past_their_deadline_oldest_first(store):
    late, later, early_done, future = state(deadline=2_000), state(deadline=1_000), state(), state(deadline=9_000)
    for s in (late, later, future):
        store.create(s)
    store.create(early_done)
    store.replace(early_done.moved(Phase.RESERVED, None, 1_600))
    store.replace(store.get(early_done.tx_id).moved(Phase.CANCELLING, 1, 1_700))
    store.replace(store.get(early_done.tx_id).moved(Phase.CANCELLED, None, 1_800))
    found = [s.tx_id for s in store.overdue(5_000, 10) if s.tx_id in {late.tx_id, later.tx_id, early_done.tx_id, future.tx_id}]
    assert found == [later.tx_id, late.tx_id]


def test_the_index_shard_is_the_rust_sdks():
    # crates/dynamo/src/tables.rs shard_of: h = h * 31 + byte (u32, wrapping), P<h % 4>.
    assert shard_of("0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69") == "P" + str(
        sum(b * pow(31, i, 2**32) for i, b in enumerate(reversed(b"0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69"))) % 2**32 % 4
    )


def test_a_store_that_cannot_be_reached_is_retryable_and_nothing_is_written():
    from dynamo2pc.participant.errors import Retryable, StoreUnavailable

    import boto3
    from botocore.config import Config

    client = boto3.client(
        "dynamodb", endpoint_url="http://127.0.0.1:9", region_name="us-east-1",  # nothing listens
        aws_access_key_id="local", aws_secret_access_key="local",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2),
    )
    s = DynamoStates(client, "nowhere")
    with pytest.raises(StoreUnavailable) as e:
        s.get(str(uuid.uuid4()))
    assert isinstance(e.value, Retryable) and e.value.status == 503
