"""A participant SDK: a service implements three hooks (``reserve``, ``confirm``, ``cancel``)
and this package answers the coordinator around them as the Rust SDK does
(crates/participant-sdk): each hook at most once per transaction and outcome, duplicates
answered from the recorded state, an abort before its prepare recorded so the prepare is
refused, a prepare past its deadline or after the end refused, inquiries and their prevent,
every request's signature checked. State in DynamoDB (``DynamoStates``), served over HTTP
(``app``, a WSGI application; ``serve``) or as a Lambda function (``handler``).

Map: ``hooks`` (what a service writes), ``driver`` (the protocol), ``state`` (phases, moves and
answers), ``store`` (where states live), ``records`` (the coordinator's, read by the sweep),
``requests`` (the wire's requests), ``http``, ``lambda_handler``, ``errors``.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from .driver import DEFAULT_CLAIM_MS, SWEEP_LIMIT, Participant
from .errors import Busy, CallFailed, HookFailed
from .hooks import HELD, Call, Hooks, InvalidPayload, Reservation, refuse
from .http import app, make_http_server, serve
from .lambda_handler import handler
from .records import TransactionRecords
from .requests import Request, read_request
from .store import DynamoStates, MemoryStates, StateStore

__all__ = [
    "HELD", "Call", "Hooks", "InvalidPayload", "Reservation", "refuse",
    "Participant", "DEFAULT_CLAIM_MS", "SWEEP_LIMIT",
    "Busy", "CallFailed", "HookFailed",
    "app", "make_http_server", "serve", "handler",
    "DynamoStates", "MemoryStates", "StateStore", "TransactionRecords",
    "Request", "read_request", "dynamodb_participant", "dynamodb_client",
]  # fmt: skip


def dynamodb_client(endpoint_url: Optional[str] = None, region: Optional[str] = None) -> Any:
    """A boto3 DynamoDB client: AWS's, or ``endpoint_url``'s (else ``AWS_ENDPOINT_URL_DYNAMODB``;
    DynamoDB Local, which is then given placeholder credentials if none are configured). The
    region is ``region``, else ``AWS_REGION``, else us-east-1."""
    import boto3

    endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    session = boto3.session.Session(region_name=region or os.environ.get("AWS_REGION") or "us-east-1")
    local: dict[str, str] = {}
    if endpoint_url and session.get_credentials() is None:
        local = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
    return session.client("dynamodb", endpoint_url=endpoint_url, **local)


def dynamodb_participant(
    hooks: Hooks,
    table: Optional[str] = None,
    *,
    transactions_table: Optional[str] = None,
    client: Any = None,
    create_table: bool = False,
    **options: Any,
) -> Participant:
    """A participant with its states in the DynamoDB table ``table`` (default:
    ``TWOPC_PARTICIPANT_TABLE``) and the coordinator's records in ``transactions_table``
    (default: ``TWOPC_TRANSACTIONS_TABLE``; without one the sweep finishes only interrupted
    calls), through ``client`` (default: ``dynamodb_client()``). ``create_table`` creates the
    state table if missing (a deployment declares it in its template); ``options`` go to
    ``Participant`` (``clock``, ``claim_ms``)."""
    table = table or os.environ.get("TWOPC_PARTICIPANT_TABLE")
    if not table:
        raise ValueError("no state table: pass table= or set TWOPC_PARTICIPANT_TABLE")
    transactions_table = transactions_table or os.environ.get("TWOPC_TRANSACTIONS_TABLE")
    client = client if client is not None else dynamodb_client()
    store = DynamoStates(client, table)
    if create_table:
        store.create_table_if_missing()
    records = TransactionRecords(client, transactions_table) if transactions_table else None
    return Participant(hooks, store, records=records, **options)
