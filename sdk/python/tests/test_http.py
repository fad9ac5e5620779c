"""The WSGI application: each refusal with its code, in the documented order, before any state
is read; a signed call answered by the driver; numbers exact on the way through."""

import io
import json
import uuid

import pytest

from dynamo2pc import exactjson
from dynamo2pc.participant import MemoryStates, Participant, app
from dynamo2pc.signing import sign

SECRET = b"a secret of at least sixteen bytes"


@pytest.fixture
def call(participant):
    application = app(participant, SECRET, max_body_bytes=1024)

    def call(path, body, headers=None, method="POST", tx=None, at=None):
        data = body if isinstance(body, bytes) else exactjson.dumps(body).encode()
        if headers is None:
            headers = sign(SECRET, tx or body["txId"], at or participant.clock(), data)
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "CONTENT_LENGTH": str(len(data)),
            "wsgi.input": io.BytesIO(data),
            **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()},
        }
        status = []
        out = b"".join(application(environ, lambda s, h: status.append(int(s.split()[0]))))
        return status[0], json.loads(out)

    return call


def prepare(tx, **more):
    return {"txId": tx, "deadline": 1_700_000_005_000, "began": 1_700_000_000_000, "key": {},
            "coordinator": "c", "payload": {"amount": exactjson.loads("12.50")}} | more


def code(answer):
    return answer[0], answer[1].get("code")


def test_a_signed_prepare_is_answered_and_its_numbers_kept_exact(call, participant):
    tx = str(uuid.uuid4())
    assert call("/prepare", prepare(tx)) == (200, {"vote": "yes", "mode": "exclusive"})
    assert str(participant.store.get(tx).payload["amount"]) == "12.50"


def test_each_refusal_has_its_code_and_the_checks_run_in_the_documented_order(call, participant, clock):
    tx = str(uuid.uuid4())
    body = prepare(tx)
    data = exactjson.dumps(body).encode()
    good = sign(SECRET, tx, clock(), data)
    assert code(call("/prepare", b"x" * 1025, headers={})) == (413, "request_too_large")
    assert code(call("/prepare", body, headers={k: v for k, v in good.items() if "sig" not in k})) == (401, "unsigned")
    assert code(call("/prepare", body, headers=good | {"x-twopc-timestamp": "soon"})) == (401, "malformed_signature")
    assert code(call("/prepare", prepare(tx, deadline=1))) == (200, None)  # signed: a vote
    assert code(call("/prepare", body, headers=good | {"x-twopc-tx-id": str(uuid.uuid4())})) == (401, "bad_signature")
    assert code(call("/prepare", body, at=clock() - 300_001)) == (401, "stale_request")
    assert code(call("/prepare", b"{not json", tx=tx)) == (400, "invalid_request")
    assert code(call("/prepare", {"txId": tx, "deadline": 1}, tx=tx)) == (400, "invalid_request")
    assert code(call("/prepare", body, tx=str(uuid.uuid4()))) == (401, "wrong_transaction")
    assert code(call("/commit", prepare(tx))) == (200, None)  # unknown fields are ignored


def test_unknown_paths_and_methods_are_refused_with_json(call):
    assert code(call("/explode", {"txId": str(uuid.uuid4())})) == (404, "not_found")
    assert code(call("/prepare", {"txId": str(uuid.uuid4())}, method="GET")) == (405, "method_not_allowed")


def test_a_failed_hook_is_a_500_hook_failed_and_a_busy_copy_a_503(call, participant, hooks):
    tx = str(uuid.uuid4())
    hooks.fail = {"reserve"}
    assert code(call("/prepare", prepare(tx))) == (500, "hook_failed")
    other = str(uuid.uuid4())
    hooks.during = lambda: seen.append(call("/abort", prepare(other)))
    seen = []
    call("/prepare", prepare(other))
    assert code(seen[0]) == (503, "busy")


def test_a_secret_shorter_than_16_bytes_is_refused():
    with pytest.raises(ValueError, match="16"):
        app(Participant(None, MemoryStates()), b"short")
