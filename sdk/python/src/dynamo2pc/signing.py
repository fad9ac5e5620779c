"""Signed requests to ``http`` participants (docs/participants.md, "Signed requests"): the
coordinator signs each request with the secret it shares with the service, HMAC-SHA256 over
``v1\\n<timestamp>\\n<txId>\\n<body>``; the service refuses a request that is unsigned, signed
with another secret or altered, or signed further than 5 minutes from its clock. Tested
against docs/signing-vectors.json, as the Rust signer is.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from pathlib import Path
from typing import Callable, Mapping, Optional, Union

__all__ = [
    "TIMESTAMP_HEADER",
    "TX_HEADER",
    "SIGNATURE_HEADER",
    "DEFAULT_MAX_SKEW_MS",
    "SignatureError",
    "sign",
    "verify",
    "read_secret_file",
]

TIMESTAMP_HEADER = "x-twopc-timestamp"
TX_HEADER = "x-twopc-tx-id"
SIGNATURE_HEADER = "x-twopc-signature"
DEFAULT_MAX_SKEW_MS = 5 * 60 * 1000

# As Rust's u64 parse: an optional "+", digits, at most 2^64 - 1.
_TIMESTAMP = re.compile(r"\+?[0-9]+")
_SIGNATURE = re.compile(r"v1=([0-9a-fA-F]{64})")
_U64_MAX = 2**64 - 1

Headers = Union[Mapping[str, str], Callable[[str], Optional[str]]]


class SignatureError(Exception):
    """A request whose signature does not hold; ``code`` is the stable code of the 401."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _string_to_sign(timestamp: str, tx_id: str, body: bytes) -> bytes:
    return f"v1\n{timestamp}\n{tx_id}\n".encode() + body


def sign(secret: bytes, tx_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three signing headers of a request for ``tx_id`` with ``body``, signed at
    ``timestamp`` (epoch ms)."""
    mac = hmac.new(secret, _string_to_sign(str(timestamp), tx_id, body), hashlib.sha256)
    return {
        TIMESTAMP_HEADER: str(timestamp),
        TX_HEADER: tx_id,
        SIGNATURE_HEADER: "v1=" + mac.hexdigest(),
    }


def verify(
    secret: bytes,
    headers: Headers,
    body: bytes,
    now_ms: int,
    max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
) -> str:
    """Checks a request's signing headers against its exact body at ``now_ms`` and returns the
    signed transaction id (the caller checks it is the body's ``txId``); raises
    ``SignatureError`` with the first failure: ``unsigned``, ``malformed_signature``,
    ``bad_signature`` (compared in constant time), ``stale_request``. ``headers`` is a mapping
    with lower-case names or a function that looks a name up."""
    get = headers if callable(headers) else headers.get
    values = []
    for name in (TIMESTAMP_HEADER, TX_HEADER, SIGNATURE_HEADER):
        value = get(name)
        if value is None:
            raise SignatureError("unsigned", f"the request is not signed: missing {name}")
        values.append(value)
    timestamp, tx_id, signature = values
    if not _TIMESTAMP.fullmatch(timestamp) or int(timestamp) > _U64_MAX:
        raise SignatureError("malformed_signature", f"malformed {TIMESTAMP_HEADER}")
    tag = _SIGNATURE.fullmatch(signature)
    if tag is None:
        raise SignatureError("malformed_signature", f"malformed {SIGNATURE_HEADER}")
    signed = int(timestamp)
    want = hmac.new(secret, _string_to_sign(str(signed), tx_id, body), hashlib.sha256).digest()
    if not hmac.compare_digest(want, bytes.fromhex(tag.group(1))):
        raise SignatureError("bad_signature", "the signature does not match the request")
    skew = abs(now_ms - signed)
    if skew > max_skew_ms:
        raise SignatureError(
            "stale_request",
            f"signed at {signed}, {skew} ms from the receiver's clock "
            f"(at most {max_skew_ms} ms allowed)",
        )
    return tx_id


def read_secret_file(path: Union[str, Path]) -> bytes:
    """The secret in a file, as ``twopc serve --signing-secret-file`` and ``twopc conformance
    --secret-file`` read it: its bytes, less one trailing newline (``\\n``; a ``\\r`` stays)."""
    data = Path(path).read_bytes()
    secret = data[:-1] if data.endswith(b"\n") else data
    if not secret:
        raise ValueError(f"{path}: the secret file is empty")
    return secret
