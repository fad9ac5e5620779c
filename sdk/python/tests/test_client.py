"""The client against a stub of the API: one Idempotency-Key on every attempt, retries of what
may pass only, Undetermined when no attempt got an answer, exact numbers out and in."""

import json
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dynamo2pc.client import ApiError, Client, Undetermined, custom, debit, table, tx_id_for_key

TX = "1c8fb081-2300-58c5-8504-1a636c82a882"


class Stub:
    """Answers each request with the next of ``script`` (status, body), recording requests."""

    def __init__(self, script):
        self.script, self.seen = list(script), []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stub.seen.append((self.command, self.path, dict(self.headers), body))
                status, answer = stub.script.pop(0)
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture
def stub():
    made = []

    def make(*script):
        made.append(Stub(script))
        return made[-1]

    yield make
    for s in made:
        s.server.shutdown()


COMMITTED = {"txId": TX, "status": "COMMITTED", "outcome": "committed", "applied": True,
             "participants": [{"participant": "accounts", "key": {"id": "alice"}, "vote": "yes", "mode": "reserved"}]}


def test_a_submit_retries_a_503_with_the_same_key_and_sends_exact_numbers(stub):
    s = stub((503, {"code": "unavailable", "message": "later"}), (200, COMMITTED))
    client = Client(s.url, backoff=0.001)
    tx = {"participants": [table("accounts", {"id": "alice"}, debit("balance", Decimal("25.50"))),
                           custom("payments", {"card": "4242", "amount": Decimal("9.99")})]}
    answer = client.submit(tx, idempotency_key="order-42")
    assert (answer.status, answer.committed, answer.finished) == ("COMMITTED", True, True)
    keys = {h["Idempotency-Key"] for _, _, h, _ in s.seen}
    assert keys == {"order-42"} and len(s.seen) == 2
    assert s.seen[0][3] == (
        b'{"participants":[{"participant":"accounts","key":{"id":"alice"},"op":{"add":{"balance":-25.50},'
        b'"require":{"balance":{"gte":25.50}}}},{"participant":"payments","payload":{"card":"4242","amount":9.99}}]}'
    )


def test_a_refusal_is_not_retried(stub):
    s = stub((400, {"code": "unknown_participant", "message": "no such service"}))
    with pytest.raises(ApiError) as e:
        Client(s.url, backoff=0.001).submit({"participants": []})
    assert (e.value.status, e.value.code, len(s.seen)) == (400, "unknown_participant", 1)


def test_an_abort_is_an_answer_with_its_code(stub):
    aborted = {"txId": TX, "status": "ABORTED", "code": "condition", "message": "declined",
               "participants": [{"participant": "payments", "vote": "no", "reason": "condition", "message": "declined"}]}
    s = stub((409, aborted))
    answer = Client(s.url).submit({"participants": []})
    assert (answer.status, answer.outcome, answer.code, answer.committed) == ("ABORTED", "aborted", "condition", False)


def test_spent_retries_with_no_answer_are_undetermined_and_name_the_transaction(stub):
    s = stub(*[(502, b"bad gateway")] * 3)
    with pytest.raises(Undetermined) as e:
        Client(s.url, retries=2, backoff=0.001).submit({"participants": []}, idempotency_key="k-1")
    assert e.value.tx_id == tx_id_for_key("k-1") and e.value.idempotency_key == "k-1"
    assert len(s.seen) == 3


def test_a_refused_connection_is_not_undetermined():
    port = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{port.server_port}"
    port.server_close()  # nothing listens there now
    with pytest.raises(Exception) as e:
        Client(url, retries=1, backoff=0.001).submit({"participants": []})
    assert not isinstance(e.value, Undetermined) and not e.value.maybe_received


def test_status_and_pending_read_the_api_answers(stub):
    page = {"transactions": [COMMITTED | {"status": "COMMITTING", "applied": False}], "next": "1700000000000." + TX}
    s = stub((200, COMMITTED), (200, page))
    client = Client(s.url)
    assert client.status(TX).status == "COMMITTED"
    got = client.pending(overdue=True, limit=5)
    assert [t.status for t in got.transactions] == ["COMMITTING"] and got.next == page["next"]
    assert s.seen[1][1] == "/transactions?status=pending&overdue=true&limit=5"


def test_an_idempotency_key_names_the_transaction_the_coordinator_derives():
    # README, "A transaction": Idempotency-Key demo-1 is transaction 1c8fb081-....
    assert tx_id_for_key("demo-1") == TX


def test_sigv4_signs_for_execute_api_in_the_hosts_region_and_the_client_sends_it(stub):
    from botocore.credentials import Credentials

    from dynamo2pc.client import SigV4

    signer = SigV4(credentials=Credentials("AKIDEXAMPLE", "a secret key"))
    url = "https://abc123.execute-api.eu-west-1.amazonaws.com/Prod/transactions"
    h = signer.sign("POST", url, {"Idempotency-Key": "k"}, b"{}")
    assert h["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in h["Authorization"]
    assert "idempotency-key" in h["Authorization"], "the key is signed"
    s = stub((200, COMMITTED))
    Client(s.url, sigv4=SigV4(region="us-east-1", credentials=Credentials("AKIDEXAMPLE", "k"))).status(TX)
    sent = s.seen[0][2]
    assert sent["Authorization"].startswith("AWS4-HMAC-SHA256") and "X-Amz-Date" in sent
