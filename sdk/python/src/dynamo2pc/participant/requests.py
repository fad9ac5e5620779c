"""The calls' request bodies read as the Rust types read them (crates/core/src/message.rs):
required fields checked, unknown ones ignored, ``txId`` normalised to a lower-case UUID."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from .errors import Invalid

ACTIONS = ("prepare", "commit", "abort", "inquire")
_U64_MAX = 2**64 - 1


@dataclass(frozen=True)
class Request:
    """One call's request: every call's fields, and those of its own."""

    action: str
    tx_id: str
    deadline: int
    began: int
    key: dict
    payload: Any = None  # prepare, inquire: the payload (None when absent or null)
    prevent: bool = False  # inquire
    refused: bool = False  # abort: this participant voted no


def read_request(action: str, body: Any) -> Request:
    """``body`` (parsed JSON) as the request of ``action``, or ``Invalid`` saying what is wrong."""
    if action not in ACTIONS:
        raise Invalid(f"unknown action {action!r}; expected prepare, commit, abort or inquire")
    if not isinstance(body, dict):
        raise Invalid(f"the {action} request is not a JSON object")
    fields = {"txId": str, "deadline": int, "began": int, "key": dict}
    if action == "prepare":
        fields["coordinator"] = str
    for name, kind in fields.items():
        value = body.get(name)
        if value is None:
            raise Invalid(f"{action} request: missing field `{name}`")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise Invalid(f"{action} request: `{name}` is not {_KIND[kind]}")
        if kind is int and not 0 <= value <= _U64_MAX:
            raise Invalid(f"{action} request: `{name}` is not a whole number of milliseconds")
    for flag in ("prevent", "refused"):
        if not isinstance(body.get(flag, False), bool):
            raise Invalid(f"{action} request: `{flag}` is not true or false")
    try:
        tx_id = str(uuid.UUID(body["txId"]))
    except ValueError:
        raise Invalid(f"{action} request: {body['txId'][:80]!r} is not a transaction id (a UUID)")
    return Request(
        action=action,
        tx_id=tx_id,
        deadline=body["deadline"],
        began=body["began"],
        key=body["key"],
        payload=body.get("payload") if action in ("prepare", "inquire") else None,
        prevent=body.get("prevent", False),
        refused=body.get("refused", False),
    )


_KIND = {str: "a string", int: "a whole number", dict: "an object"}
