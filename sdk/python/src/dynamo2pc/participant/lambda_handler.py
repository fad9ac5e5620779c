"""The Lambda adapter, for the coordinator's ``lambda`` transport: the event is
``{"action": "prepare"|"commit"|"abort"|"inquire", "request": {...}}`` and the reply is the
answer. A failure is a function error whose ``errorType`` is one of ``Retryable``,
``Undetermined``, ``Invalid``, ``Fatal`` (the exception's class name), as the Rust SDK's.

Python's Lambda runtime parses the event with ``float`` numbers before the handler runs: the
handler turns each back into the ``Decimal`` of its shortest text (``12.5`` for ``12.50``), exact
for numbers of up to 15 significant digits. Payloads with longer numbers should carry them as
strings, or be served over HTTP, where the body's text is read.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable

from . import errors
from .driver import Participant
from .requests import read_request

_KINDS = (errors.Retryable, errors.Undetermined, errors.Invalid, errors.Fatal)


def _exact(v: Any) -> Any:
    if isinstance(v, float):
        return Decimal(repr(v))
    if isinstance(v, dict):
        return {k: _exact(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_exact(x) for x in v]
    return v


def handler(participant: Participant) -> Callable[[Any, Any], dict]:
    """``handler(participant)`` is the function to name as the Lambda's handler."""

    def handle(event: Any, context: Any = None) -> dict:
        try:
            event = _exact(event)
            if not isinstance(event, dict) or "action" not in event or "request" not in event:
                raise errors.Invalid(
                    'the event is not a participant call; expected {"action": "prepare"|"commit"'
                    '|"abort"|"inquire", "request": {...}}'
                )
            req = read_request(event["action"], event["request"])
            return getattr(participant, req.action)(req)
        except errors.CallFailed as e:
            kind = next(k for k in _KINDS if isinstance(e, k))
            raise kind(str(e)) from e
        except Exception as e:
            raise errors.Fatal(f"{type(e).__name__}: {e}") from e

    return handle
