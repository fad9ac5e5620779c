"""The coordinator's transactions table, read (never written) to finish a state whose
coordinator went silent: key ``txId``, attribute ``status``."""

from __future__ import annotations

from typing import Any, Optional


class TransactionRecords:
    """Reads transaction records from ``table`` (``TWOPC_TRANSACTIONS_TABLE``)."""

    def __init__(self, client: Any, table: str):
        self.client, self.table = client, table

    def status(self, tx_id: str) -> Optional[str]:
        """The record's status (``PREPARING``, ``STAGING``, ``COMMITTING``, ``COMMITTED``,
        ``ABORTING``, ``ABORTED``), or None when there is no record."""
        item = self.client.get_item(
            TableName=self.table,
            Key={"txId": {"S": tx_id}},
            ConsistentRead=True,
            ProjectionExpression="#s",
            ExpressionAttributeNames={"#s": "status"},
        ).get("Item")
        return None if item is None else item.get("status", {}).get("S")
