"""Where the per-transaction states live: ``MemoryStates`` (tests) and ``DynamoStates`` (a
DynamoDB table of the service's own, laid out as the Rust SDK's: key ``txId``, the sparse
``pending-by-deadline`` index of unfinished states, TTL ``expireAt`` once finished). Every write
is conditional: ``create`` on no state, ``replace`` on the revision it replaces. Both answer a
lost write with the state as it is (``Lost``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional, Protocol

from .errors import StoreUndetermined, StoreUnavailable
from .state import Phase, TxState

# Names as the Rust SDK spells them (crates/core/src/layout.rs).
TX_ID, PHASE, REVISION, DEADLINE, BEGAN = "txId", "phase", "revision", "deadline", "began"
PAYLOAD, CLAIMED_UNTIL, REFUSAL, UPDATED_AT = "payload", "claimedUntil", "refusal", "updatedAt"
PENDING, EXPIRE_AT, PENDING_INDEX, RETRY_AFTER = "pending", "expireAt", "pending-by-deadline", "retryAfter"
INDEX_SHARDS = 4
# Finished states are kept this long (the transaction log's retention), then TTL removes them.
RETENTION_SECS = 7 * 24 * 3600


@dataclass(frozen=True)
class Lost:
    """A conditional write that lost: the state as it is (None: there is none)."""

    found: Optional[TxState]


class StateStore(Protocol):
    def get(self, tx_id: str) -> Optional[TxState]: ...

    def create(self, state: TxState) -> Optional[Lost]: ...

    def replace(self, state: TxState) -> Optional[Lost]: ...

    def overdue(self, now: int, limit: int) -> list[TxState]: ...


class MemoryStates:
    """States in memory, with the same conditions (for tests)."""

    def __init__(self) -> None:
        self._states: dict[str, TxState] = {}
        self._lock = threading.Lock()

    def get(self, tx_id: str) -> Optional[TxState]:
        with self._lock:
            return self._states.get(tx_id)

    def create(self, state: TxState) -> Optional[Lost]:
        with self._lock:
            if state.tx_id in self._states:
                return Lost(self._states[state.tx_id])
            self._states[state.tx_id] = state
            return None

    def replace(self, state: TxState) -> Optional[Lost]:
        with self._lock:
            found = self._states.get(state.tx_id)
            if found is None or found.revision + 1 != state.revision:
                return Lost(found)
            self._states[state.tx_id] = state
            return None

    def overdue(self, now: int, limit: int) -> list[TxState]:
        with self._lock:
            found = [s for s in self._states.values() if s.pending and s.deadline < now]
        return sorted(found, key=lambda s: s.deadline)[:limit]


def shard_of(tx_id: str, prefix: str = "P") -> str:
    """The index partition of a transaction id, as the Rust SDK computes it."""
    h = 0
    for b in tx_id.encode():
        h = (h * 31 + b) & 0xFFFFFFFF
    return f"{prefix}{h % INDEX_SHARDS}"


def _to_plain(v: Any) -> Any:
    """DynamoDB's numbers (all Decimal) back to JSON's: those without a fraction as int."""
    if isinstance(v, Decimal):
        return int(v) if v.as_tuple().exponent >= 0 else v
    if isinstance(v, dict):
        return {k: _to_plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_to_plain(x) for x in v]
    return v


class DynamoStates:
    """States in a DynamoDB table (boto3's low-level client)."""

    def __init__(self, client: Any, table: str, retention_secs: int = RETENTION_SECS):
        from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

        self.client, self.table, self.retention_secs = client, table, retention_secs
        self._ser, self._de = TypeSerializer(), TypeDeserializer()

    def create_table_if_missing(self) -> None:
        """Creates the table as the Rust SDK does (key, sparse index, TTL) and waits for it."""
        from botocore.exceptions import ClientError

        try:
            self.client.describe_table(TableName=self.table)
        except ClientError as e:
            if e.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            try:
                self.client.create_table(**_table_spec(self.table))
            except ClientError as e2:
                if e2.response["Error"]["Code"] != "ResourceInUseException":
                    raise
        self.client.get_waiter("table_exists").wait(TableName=self.table)
        ttl = self.client.describe_time_to_live(TableName=self.table)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
            self.client.update_time_to_live(
                TableName=self.table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": EXPIRE_AT},
            )

    # --- items ---------------------------------------------------------------------------

    def _item(self, s: TxState) -> dict:
        plain: dict[str, Any] = {
            TX_ID: s.tx_id,
            PHASE: s.phase.value,
            REVISION: s.revision,
            DEADLINE: s.deadline,
            BEGAN: s.began,
            UPDATED_AT: s.updated_at,
        }
        if s.payload is not None:
            plain[PAYLOAD] = s.payload
        if s.claimed_until is not None:
            plain[CLAIMED_UNTIL] = s.claimed_until
        if s.refusal is not None:
            plain[REFUSAL] = {"reason": s.refusal[0], "message": s.refusal[1]}
        if s.pending:
            plain[PENDING] = shard_of(s.tx_id)
        else:
            plain[EXPIRE_AT] = s.updated_at // 1000 + self.retention_secs
        return {k: self._ser.serialize(v) for k, v in plain.items()}

    def _state(self, item: dict) -> TxState:
        v = {k: self._de.deserialize(x) for k, x in item.items()}
        refusal = v.get(REFUSAL)
        return TxState(
            tx_id=v[TX_ID],
            phase=Phase(v[PHASE]),
            revision=int(v[REVISION]),
            deadline=int(v[DEADLINE]),
            began=int(v[BEGAN]),
            updated_at=int(v[UPDATED_AT]),
            payload=_to_plain(v.get(PAYLOAD)),
            claimed_until=int(v[CLAIMED_UNTIL]) if CLAIMED_UNTIL in v else None,
            refusal=(refusal["reason"], refusal["message"]) if refusal else None,
        )

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
        )

        try:
            return fn(**kwargs)
        except ClientError as e:
            code = e.response["Error"]["Code"]
            if code in _RETRYABLE:
                raise StoreUnavailable(f"{what}: {code}") from e
            raise
        except (EndpointConnectionError, ConnectTimeoutError) as e:  # nothing was sent
            raise StoreUnavailable(f"{what}: {e}") from e
        except BotoCoreError as e:  # sent, no answer: a write may have landed
            raise StoreUndetermined(f"{what}: {e}") from e

    def get(self, tx_id: str) -> Optional[TxState]:
        out = self._call(
            f"reading the state of transaction {tx_id}",
            self.client.get_item,
            TableName=self.table,
            Key={TX_ID: {"S": tx_id}},
            ConsistentRead=True,
        )
        item = out.get("Item")
        return None if item is None else self._state(item)

    def _put(self, s: TxState, condition: str, values: Optional[dict]) -> Optional[Lost]:
        from botocore.exceptions import ClientError

        kwargs: dict[str, Any] = dict(
            TableName=self.table,
            Item=self._item(s),
            ConditionExpression=condition,
            ExpressionAttributeNames={"#k": TX_ID} if values is None else {"#r": REVISION},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if values is not None:
            kwargs["ExpressionAttributeValues"] = values
        try:
            self._call(f"writing the state of transaction {s.tx_id}", self.client.put_item, **kwargs)
            return None
        except ClientError as e:
            if e.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            item = e.response.get("Item")
            return Lost(None if item is None else self._state(item))

    def create(self, state: TxState) -> Optional[Lost]:
        return self._put(state, "attribute_not_exists(#k)", None)

    def replace(self, state: TxState) -> Optional[Lost]:
        previous = {":r": {"N": str(state.revision - 1)}}
        return self._put(state, "#r = :r", previous)

    def overdue(self, now: int, limit: int) -> list[TxState]:
        """Unfinished states whose deadline passed, through the sparse index (never a scan)."""
        found: list[TxState] = []
        for shard in range(INDEX_SHARDS):
            out = self._call(
                "querying overdue participant states",
                self.client.query,
                TableName=self.table,
                IndexName=PENDING_INDEX,
                KeyConditionExpression="#p = :p AND #d < :now",
                ExpressionAttributeNames={"#p": PENDING, "#d": DEADLINE},
                ExpressionAttributeValues={":p": {"S": f"P{shard}"}, ":now": {"N": str(now)}},
                Limit=max(1, min(limit, 1000)),
            )
            for key in out.get("Items", []):
                s = self.get(key[TX_ID]["S"])
                if s is not None and s.pending and s.deadline < now:
                    found.append(s)
        return sorted(found, key=lambda s: s.deadline)[:limit]


_RETRYABLE = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionConflictException",
}


def _table_spec(name: str) -> dict:
    return dict(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": TX_ID, "AttributeType": "S"},
            {"AttributeName": PENDING, "AttributeType": "S"},
            {"AttributeName": DEADLINE, "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": TX_ID, "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": PENDING_INDEX,
                "KeySchema": [
                    {"AttributeName": PENDING, "KeyType": "HASH"},
                    {"AttributeName": DEADLINE, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": [RETRY_AFTER]},
            }
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
