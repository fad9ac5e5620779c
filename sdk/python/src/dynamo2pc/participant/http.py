"""The HTTP adapter: a WSGI application answering ``POST /prepare``, ``/commit``, ``/abort``
and ``/inquire``, every request's signature checked before its body is parsed
(docs/participants.md, "Signed requests"). Serve it with any WSGI server (gunicorn, waitress),
or with ``serve`` (the standard library's, one thread per request). A refusal is a JSON error
with a stable ``code``, as the Rust SDK's router answers.
"""

from __future__ import annotations

import logging
import socketserver
from typing import Any, Callable, Iterable, Optional
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from .. import exactjson
from ..signing import DEFAULT_MAX_SKEW_MS, SignatureError, verify
from .driver import Participant
from .errors import CallFailed, Invalid
from .requests import ACTIONS, read_request

log = logging.getLogger("dynamo2pc.participant")

MAX_BODY_BYTES = 64 * 1024
MIN_SECRET_BYTES = 16
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 411: "Length Required", 413: "Payload Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}

App = Callable[[dict, Callable], Iterable[bytes]]


def _answer(start_response: Callable, status: int, body: Any) -> list[bytes]:
    data = exactjson.dumps(body).encode()
    start_response(
        f"{status} {_REASONS.get(status, '')}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
    )
    return [data]


def _error(start_response: Callable, status: int, code: str, message: str) -> list[bytes]:
    return _answer(start_response, status, {"code": code, "message": message})


def app(
    participant: Participant,
    secret: bytes,
    *,
    max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
    max_body_bytes: int = MAX_BODY_BYTES,
    fallback: Optional[App] = None,
) -> App:
    """The WSGI application answering for ``participant``; requests must be signed with
    ``secret`` (at least 16 bytes). Any other path goes to ``fallback`` (a service's own
    routes), else ``404 not_found``."""
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"the signing secret has {len(secret)} bytes; at least {MIN_SECRET_BYTES}")
    calls = {
        "prepare": participant.prepare,
        "commit": participant.commit,
        "abort": participant.abort,
        "inquire": participant.inquire,
    }

    def application(environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        action = path.strip("/")
        if action not in ACTIONS:
            if fallback is not None:
                return fallback(environ, start_response)
            return _error(start_response, 404, "not_found",
                          f"no call {path}: POST /prepare, /commit, /abort or /inquire")
        if environ.get("REQUEST_METHOD") != "POST":
            return _error(start_response, 405, "method_not_allowed", f"{path} takes POST only")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _error(start_response, 400, "invalid_request", "Content-Length is not a number")
        # 1. The size, before reading: an oversized body is never read.
        if length > max_body_bytes:
            return _error(start_response, 413, "request_too_large",
                          f"the body is over {max_body_bytes} bytes")
        body = environ["wsgi.input"].read(length) if length else b""
        try:
            # 2.-5. The signature over the body's exact bytes, before they are parsed.
            signed = verify(secret, lambda n: environ.get("HTTP_" + n.upper().replace("-", "_")),
                            body, participant.clock(), max_skew_ms)
            # 6. The body, as the call's request.
            try:
                parsed = exactjson.loads(body)
            except (ValueError, UnicodeDecodeError) as e:
                raise Invalid(f"the body is not JSON: {e}")
            req = read_request(action, parsed)
            # 7. The signed transaction is the body's.
            if req.tx_id != signed:
                raise SignatureError("wrong_transaction",
                                     f"signed for transaction {signed}, the body is for {req.tx_id}")
            return _answer(start_response, 200, calls[action](req))
        except SignatureError as e:
            return _error(start_response, 401, e.code, e.message)
        except CallFailed as e:
            if e.status >= 500:
                log.warning("%s: %s", action, e)
            return _error(start_response, e.status, e.code, str(e))
        except Exception as e:  # the coordinator gets JSON, and reads a 500 as undetermined
            log.exception("%s failed", action)
            return _error(start_response, 500, "internal", f"{type(e).__name__}: {e}")

    return application


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        log.debug(format, *args)


def make_http_server(application: App, host: str = "127.0.0.1", port: int = 0) -> WSGIServer:
    """A threaded HTTP server of ``application`` (``server.server_port`` is its port); call
    ``serve_forever()`` on it."""
    return make_server(host, port, application, server_class=_ThreadingServer,
                       handler_class=_QuietHandler)


def serve(application: App, host: str = "127.0.0.1", port: int = 3002) -> None:
    """Serves ``application`` until the process stops (Ctrl-C ends it quietly)."""
    with make_http_server(application, host, port) as server:
        log.info("participant on http://%s:%d", host, server.server_port)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
