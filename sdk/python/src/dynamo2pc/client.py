"""A client of the coordinator's HTTP API (docs/api.md), as crates/client does it: ``submit``
with one ``Idempotency-Key`` on every attempt (given, or a random UUID), so that what may pass
is retried (a failed connection, a timeout, ``429``, ``5xx``) without ever running a
transaction twice; ``status``, ``pending`` and ``wait``. Numbers are exact (``Decimal``, never
``float``). Requests to a deployed stack are signed with SigV4 (``sigv4=SigV4()``: botocore's
signer, credentials from the standard chain); a local stack takes them unsigned.

    client = Client("http://127.0.0.1:3000")
    answer = client.submit(transfer("alice", "bob", Decimal("10")), idempotency_key="order-42")
"""

from __future__ import annotations

import random
import re
import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Optional
from urllib.parse import urlsplit

import urllib3

from . import exactjson

__all__ = [
    "Client", "SigV4", "TxAnswer", "Pending", "table", "custom", "debit", "credit",
    "Error", "ApiError", "Undetermined", "Timeout", "TransportError", "ProtocolError",
    "Unfinished", "SigningError", "tx_id_for_key",
]  # fmt: skip

IDEMPOTENCY_KEY = "Idempotency-Key"
# The namespace the coordinator derives a transaction's id from its idempotency key with
# (UUID v5, crates/core/src/ids.rs).
_KEY_NAMESPACE = uuid.UUID(int=0x6B1F3C2E9D4A4E8BA0C752F1D3E90B17)
_RETRYABLE = (429, 500, 502, 503, 504)
_FINISHED = ("COMMITTED", "ABORTED")
_STATUSES = ("PREPARING", "STAGING", "COMMITTING", "COMMITTED", "ABORTING", "ABORTED")


def tx_id_for_key(idempotency_key: str) -> str:
    """The id of the transaction an idempotency key names."""
    return str(uuid.uuid5(_KEY_NAMESPACE, idempotency_key))


# --- errors ---------------------------------------------------------------------------------


class Error(Exception):
    """A failed call. ``retryable``: the same call (same idempotency key) may pass later."""

    retryable = False
    maybe_received = False


class ApiError(Error):
    """The API answered with an error ``{"code", "message"}``: a refusal (nothing written; fix
    the request), or, once retries are spent, ``unavailable``, ``throttled`` or ``internal``."""

    def __init__(self, status: int, code: str, message: str, body: Any):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.body = status, code, message, body
        self.retryable = status in _RETRYABLE
        # A 429 is the gateway's throttle: refused before the coordinator ran.
        self.maybe_received = self.retryable and status != 429


class Undetermined(Error):
    """A submit whose outcome is unknown: an attempt may have reached the coordinator and none
    got an answer. Read it with ``status(tx_id)``, or submit the same body with the same
    ``idempotency_key`` again, never with a new one."""

    retryable = maybe_received = True

    def __init__(self, tx_id: str, idempotency_key: str, last: Error):
        super().__init__(
            f"transaction {tx_id} (Idempotency-Key {idempotency_key!r}): outcome unknown "
            f"after every retry: {last}"
        )
        self.tx_id, self.idempotency_key, self.last = tx_id, idempotency_key, last

    @property
    def code(self) -> Optional[str]:
        return getattr(self.last, "code", None)


class Timeout(Error):
    """No answer within the per-request timeout."""

    retryable = maybe_received = True


class TransportError(Error):
    """The request could not be sent or its answer not read."""

    retryable = True

    def __init__(self, message: str, maybe_received: bool):
        super().__init__(message)
        self.maybe_received = maybe_received


class ProtocolError(Error):
    """An answer that is not the API's (a success that is not a transaction, say)."""


class Unfinished(Error):
    """``wait`` ran out of time; the transaction is decided and will finish: ask again later."""

    def __init__(self, tx_id: str, status: str, waited: float):
        super().__init__(f"transaction {tx_id} is still {status} after {waited:.1f} s")
        self.tx_id, self.status, self.waited = tx_id, status, waited


class SigningError(Error):
    """The request could not be signed (no credentials, no region)."""


# --- answers --------------------------------------------------------------------------------


@dataclass
class TxAnswer:
    """Where a transaction stands, as the API answered: ``status``, ``outcome``
    (``committed``, ``aborted`` or ``pending``), ``applied``, each participant (its vote's
    fields beside its name), and for an abort its ``code`` and ``message``."""

    tx_id: str
    status: str
    outcome: str
    applied: bool
    participants: list[dict]
    code: Optional[str] = None
    message: Optional[str] = None
    body: Any = field(default=None, repr=False)

    @property
    def finished(self) -> bool:
        return self.status in _FINISHED

    @property
    def committed(self) -> bool:
        return self.outcome == "committed"

    @staticmethod
    def read(status: int, body: Any) -> TxAnswer:
        if not isinstance(body, dict) or not isinstance(body.get("txId"), str):
            raise ProtocolError(f"{status}: no txId in {str(body)[:200]}")
        tx_status = body.get("status")
        if tx_status not in _STATUSES:
            raise ProtocolError(f"{status}: no transaction status in {str(body)[:200]}")
        outcome = body.get("outcome") or {
            "COMMITTED": "committed", "COMMITTING": "committed",
            "ABORTED": "aborted", "ABORTING": "aborted",
        }.get(tx_status, "pending")  # fmt: skip
        participants = [p for p in body.get("participants") or [] if isinstance(p, dict)]
        code, message = body.get("code"), body.get("message")
        if tx_status in ("ABORTING", "ABORTED") and code is None:
            first_no = next((p for p in participants if p.get("vote") == "no"), None)
            if first_no is not None:
                code, message = first_no.get("reason"), first_no.get("message")
            else:
                code = "aborted"
                message = "the transaction was aborted (its deadline passed before it was decided)"
        applied = body.get("applied")
        return TxAnswer(
            tx_id=body["txId"],
            status=tx_status,
            outcome=outcome,
            applied=applied if isinstance(applied, bool) else tx_status in _FINISHED,
            participants=participants,
            code=code if tx_status in ("ABORTING", "ABORTED") else None,
            message=message if tx_status in ("ABORTING", "ABORTED") else None,
            body=body,
        )


@dataclass
class Pending:
    """A page of unfinished transactions, oldest deadline first; ``next`` is the cursor of the
    next page (None on the last)."""

    transactions: list[TxAnswer]
    next: Optional[str]


# --- a transaction's body -------------------------------------------------------------------


def table(participant: str, key: dict, op: dict) -> dict:
    """An item of a table's service: its key and what to do to it (docs/api.md)."""
    return {"participant": participant, "key": key, "op": op}


def custom(participant: str, payload: Any) -> dict:
    """A service with its own logic, given its work as JSON."""
    return {"participant": participant, "payload": payload}


def debit(attribute: str, amount: Decimal) -> dict:
    """Takes ``amount`` from a number that must stay at or above it: ``add -amount``,
    ``require gte amount`` (commutes with others like it: the item is reserved, not locked)."""
    amount = Decimal(amount)
    return {"add": {attribute: -amount}, "require": {attribute: {"gte": amount}}}


def credit(attribute: str, amount: Decimal) -> dict:
    """Adds ``amount`` to a number."""
    return {"add": {attribute: Decimal(amount)}}


# --- signing --------------------------------------------------------------------------------


class SigV4:
    """SigV4 for API Gateway's IAM authorisation (service ``execute-api``) with botocore's
    signer. The region is ``region``, else the one in an ``{api}.execute-api.{region}.
    amazonaws.com`` host, else the chain's; credentials are ``credentials`` (a botocore
    ``Credentials``) or the standard chain's (environment, profile, web identity, ECS, IMDS)."""

    _HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com$")

    def __init__(self, region: Optional[str] = None, credentials: Any = None):
        self.region, self.credentials = region, credentials
        self._session: Any = None

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.session import get_session

        if self._session is None:
            self._session = get_session()
        host = urlsplit(url).hostname or ""
        m = self._HOST.match(host)
        region = self.region or (m.group(1) if m else None) or self._session.get_config_variable("region")
        if not region:
            raise SigningError(f"no region for {host}: pass SigV4(region=...) or set AWS_REGION")
        creds = self.credentials or self._session.get_credentials()
        if creds is None:
            raise SigningError("no AWS credentials from the standard chain")
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(creds.get_frozen_credentials() if hasattr(creds, "get_frozen_credentials") else creds,
                  "execute-api", region).add_auth(request)
        return dict(request.headers.items())


# --- the client -----------------------------------------------------------------------------


class Client:
    """A client of the API at ``base_url``. Each attempt is abandoned after ``timeout``
    seconds (API Gateway gives up at 29 s); up to ``retries`` more attempts for what may pass,
    the first ``backoff`` seconds later, doubled up to ``max_backoff``, each jittered."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        poll: float = 0.1,
        sigv4: Optional[SigV4] = None,
    ):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base URL {base_url!r}: expected http://... or https://...")
        self.base = base_url.rstrip("/")
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.max_backoff, self.poll, self.sigv4 = max_backoff, poll, sigv4
        self._http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout))

    def submit(self, transaction: dict, idempotency_key: Optional[str] = None) -> TxAnswer:
        """Submits ``transaction`` (the body of ``POST /transactions``: ``{"participants":
        [...]}``). Every attempt carries the same idempotency key, so a retry never runs it
        twice. Returns the answer: committed, aborted (``code``), or decided and not finished
        (``202``: ``wait`` for it). Raises ``ApiError`` for a refusal, ``Undetermined`` when
        no attempt got an answer and one may have arrived."""
        key = idempotency_key if idempotency_key is not None else str(uuid.uuid4())
        if not (1 <= len(key) <= 255 and all(33 <= ord(c) <= 126 or c == " " for c in key)):
            raise ValueError(f"Idempotency-Key {key!r} must be 1 to 255 visible ASCII characters")
        body = exactjson.dumps(transaction).encode()
        maybe_received = False
        for attempt in range(self.retries + 1):
            try:
                status, answer = self._exchange("POST", "/transactions", body, {IDEMPOTENCY_KEY: key})
                if status in (200, 202) or (status == 409 and isinstance(answer, dict) and "status" in answer):
                    return TxAnswer.read(status, answer)
                if 200 <= status < 300:
                    raise ProtocolError(f"a success that is not a transaction: {answer}")
                error: Error = _api_error(status, answer)
                if not error.retryable:
                    raise error
            except (Timeout, TransportError) as e:
                error = e
            maybe_received |= error.maybe_received
            if attempt < self.retries:
                time.sleep(self._delay(attempt))
        if maybe_received:
            raise Undetermined(tx_id_for_key(key), key, error)
        raise error

    def status(self, tx_id: str) -> TxAnswer:
        """The transaction as it stands (``GET /transactions/{txId}``); an unknown id is an
        ``ApiError`` with code ``not_found``."""
        return TxAnswer.read(200, self._get(f"/transactions/{uuid.UUID(tx_id)}"))

    def pending(self, overdue: bool = False, limit: Optional[int] = None, next: Optional[str] = None) -> Pending:  # noqa: A002
        """One page of unfinished transactions (``GET /transactions?status=pending``), oldest
        deadline first: with ``overdue`` only those past their deadline; ``limit`` 1 to 100;
        ``next`` the previous page's cursor."""
        path = "/transactions?status=pending"
        if overdue:
            path += "&overdue=true"
        if limit is not None:
            path += f"&limit={int(limit)}"
        if next is not None:
            if not re.fullmatch(r"[A-Za-z0-9.-]+", next):
                raise ValueError(f"{next!r} is not a page cursor: pass the previous page's next")
            path += f"&next={next}"
        answer = self._get(path)
        if not isinstance(answer, dict) or not isinstance(answer.get("transactions"), list):
            raise ProtocolError(f'a listing without "transactions": {str(answer)[:200]}')
        cursor = answer.get("next")
        if cursor is not None and not isinstance(cursor, str):
            raise ProtocolError(f'"next" is not a string: {cursor!r}')
        return Pending([TxAnswer.read(200, t) for t in answer["transactions"]], cursor)

    def wait(self, tx_id: str, within: float = 30.0) -> TxAnswer:
        """Asks for the transaction until it is finished, at most ``within`` seconds (for a
        submit answered ``202``); then ``Unfinished``."""
        started, every = time.monotonic(), self.poll
        while True:
            answer = self.status(tx_id)
            if answer.finished:
                return answer
            waited = time.monotonic() - started
            if waited + every > within:
                raise Unfinished(answer.tx_id, answer.status, waited)
            time.sleep(every)
            every = min(every * 2, self.max_backoff)

    # --- one exchange ---------------------------------------------------------------------

    def _get(self, path: str) -> Any:
        for attempt in range(self.retries + 1):
            try:
                status, answer = self._exchange("GET", path, b"", {})
                if status == 200:
                    return answer
                error: Error = _api_error(status, answer)
                if not error.retryable:
                    raise error
            except (Timeout, TransportError) as e:
                error = e
            if attempt < self.retries:
                time.sleep(self._delay(attempt))
        raise error

    def _delay(self, attempt: int) -> float:
        full = min(self.backoff * 2**attempt, self.max_backoff)
        return full * random.uniform(0.5, 1.0)

    def _exchange(self, method: str, path: str, body: bytes, extra: dict[str, str]) -> tuple[int, Any]:
        url = self.base + path
        headers = {"Accept": "application/json", **extra}
        if body:
            headers["Content-Type"] = "application/json"
        if self.sigv4 is not None:
            headers = self.sigv4.sign(method, url, headers, body)
        try:
            r = self._http.request(method, url, body=body or None, headers=headers, preload_content=True)
        except (urllib3.exceptions.ConnectTimeoutError, urllib3.exceptions.NewConnectionError) as e:
            raise TransportError(f"the connection failed: {e}", maybe_received=False) from e
        except urllib3.exceptions.TimeoutError as e:
            raise Timeout(f"no answer within {self.timeout} s") from e
        except urllib3.exceptions.HTTPError as e:
            raise TransportError(f"the request failed: {e}", maybe_received=True) from e
        return r.status, _json_or_text(r.data)


def _json_or_text(data: bytes) -> Any:
    if not data.strip():
        return None
    try:
        return exactjson.loads(data)
    except (ValueError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")


_CODE_BY_STATUS = {401: "unauthorized", 403: "unauthorized", 404: "not_found",
                   405: "method_not_allowed", 413: "request_too_large",
                   415: "unsupported_media_type", 429: "throttled", 503: "unavailable"}


def _api_error(status: int, body: Any) -> ApiError:
    code = body.get("code") if isinstance(body, dict) else None
    if not isinstance(code, str):
        code = _CODE_BY_STATUS.get(status, "internal" if status >= 500 else "invalid_request")
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str):
        message = f"HTTP {status}" if body is None else str(body)[:200]
    return ApiError(status, code, message, body)
