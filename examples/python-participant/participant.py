#!/usr/bin/env python3
"""A dynamo-2pc participant in Python: a loyalty-points service.

An order may pay part of its price in points: {"participant": "loyalty", "payload":
{"member": "alice", "points": 120}}. Prepare holds the points (takes them off the member's
balance, into the transaction's record here), commit keeps them spent, abort gives them back.

Written from docs/participants.md and docs/participant-openapi.json alone: the standard
library's HTTP server, boto3 for DynamoDB. One table holds both the members
(pk "member#<id>", attribute points) and one record per transaction (pk "tx#<txId>",
attribute phase: held, refused, committed or aborted). Every rule is a read of the record and
one conditional write (a DynamoDB transaction where the balance moves with it), so copies of a
message racing each other cannot both act.

    python3 participant.py --port 3002 --secret-file secret.txt \
        --dynamodb-endpoint http://127.0.0.1:8000 --table loyalty

A prepared transaction whose coordinator goes silent is finished by the coordinator's sweeper,
which sends the decision again from the transaction's record (docs/participants.md, "A silent
coordinator"); a staged one is first asked about (POST /inquire: held, committed, prevented or
open; with "prevent", an unknown transaction is recorded aborted so its prepare is fenced).
"""

import argparse
import hashlib
import hmac
import json
import re
import sys
import time
import uuid
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import boto3.session
from botocore.exceptions import ClientError

MAX_BODY = 64 * 1024
MAX_SKEW_MS = 5 * 60 * 1000
TIMESTAMP, TX, SIGNATURE = "x-twopc-timestamp", "x-twopc-tx-id", "x-twopc-signature"
SEED = {"alice": 1000, "bob": 50, "conformance": 10**12}


class Refusal(Exception):
    """A request refused before anything is done: status, code, message."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# ------------------------------------------------------------------ the request


def verify(headers, body, secret, now_ms):
    """The signed transaction id, or a Refusal (docs/participants.md, "Signed requests")."""
    values = {}
    for name in (TIMESTAMP, TX, SIGNATURE):
        value = headers.get(name)
        if value is None:
            raise Refusal(401, "unsigned", f"the request is not signed: missing {name}")
        values[name] = value
    if not re.fullmatch(r"[0-9]{1,19}", values[TIMESTAMP]):
        raise Refusal(401, "malformed_signature", f"malformed {TIMESTAMP}")
    if not re.fullmatch(r"v1=[0-9a-fA-F]{64}", values[SIGNATURE]):
        raise Refusal(401, "malformed_signature", f"malformed {SIGNATURE}")
    signed = f"v1\n{values[TIMESTAMP]}\n{values[TX]}\n".encode() + body
    want = hmac.new(secret, signed, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, values[SIGNATURE][3:].lower()):
        raise Refusal(401, "bad_signature", "the signature does not match the request")
    skew = abs(now_ms - int(values[TIMESTAMP]))
    if skew > MAX_SKEW_MS:
        raise Refusal(
            401,
            "stale_request",
            f"signed at {values[TIMESTAMP]}, {skew} ms from the receiver's clock "
            f"(at most {MAX_SKEW_MS} ms allowed)",
        )
    return values[TX]


def read_request(action, body):
    """The call's request from its body, or a Refusal."""
    try:
        req = json.loads(body, parse_float=Decimal)  # numbers stay exact
    except (ValueError, UnicodeDecodeError) as e:
        raise Refusal(400, "invalid_request", f"the body is not JSON: {e}")
    if not isinstance(req, dict):
        raise Refusal(400, "invalid_request", "the body is not a JSON object")
    required = {"txId": str, "deadline": int, "began": int, "key": dict}
    if action == "prepare":
        required["coordinator"] = str
    for field, kind in required.items():
        value = req.get(field)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise Refusal(400, "invalid_request", f"missing or mistyped field {field!r}")
        if kind is int and value < 0:
            raise Refusal(400, "invalid_request", f"{field!r} must not be negative")
    if action == "inquire" and not isinstance(req.get("prevent", False), bool):
        raise Refusal(400, "invalid_request", "'prevent' must be true or false")
    try:
        req["txId"] = str(uuid.UUID(req["txId"]))  # lower-case, hyphenated
    except ValueError:
        raise Refusal(400, "invalid_request", f"{req['txId']!r} is not a transaction id (a UUID)")
    return req


def read_payload(payload):
    """(member, points) of a payload, or the reason it is invalid."""
    if not isinstance(payload, dict) or set(payload) != {"member", "points"}:
        return None, 'expected {"member": "<id>", "points": <a positive whole number>}'
    member, points = payload["member"], payload["points"]
    if not isinstance(member, str) or not member:
        return None, '"member": expected a non-empty string'
    if isinstance(points, bool) or not isinstance(points, (int, Decimal)):
        return None, '"points": expected a number'
    try:
        whole = Decimal(points) == Decimal(points).to_integral_value() and points > 0
    except InvalidOperation:
        whole = False
    if not whole:
        return None, '"points": must be a whole number above 0'
    return (member, int(points)), None


# ------------------------------------------------------------------ the store


class Store:
    """The members and the per-transaction records, in one DynamoDB table."""

    def __init__(self, endpoint, table, region):
        # DynamoDB Local takes any credentials: when none are configured, give it some.
        session = boto3.session.Session()
        local = {}
        if endpoint and session.get_credentials() is None:
            local = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
        self.ddb = session.client("dynamodb", endpoint_url=endpoint, region_name=region, **local)
        self.table = table

    def ensure(self):
        try:
            self.ddb.create_table(
                TableName=self.table,
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                BillingMode="PAY_PER_REQUEST",
            )
        except ClientError as e:
            if e.response["Error"]["Code"] != "ResourceInUseException":
                raise
        self.ddb.get_waiter("table_exists").wait(TableName=self.table)
        for member, points in SEED.items():
            try:
                self.ddb.put_item(
                    TableName=self.table,
                    Item={"pk": {"S": f"member#{member}"}, "points": {"N": str(points)}},
                    ConditionExpression="attribute_not_exists(pk)",
                )
            except ClientError as e:
                if e.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise

    def record(self, tx):
        item = self.ddb.get_item(
            TableName=self.table, Key={"pk": {"S": f"tx#{tx}"}}, ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        return {k: next(iter(v.values())) for k, v in item.items()}

    def points(self, member):
        item = self.ddb.get_item(
            TableName=self.table, Key={"pk": {"S": f"member#{member}"}}, ConsistentRead=True
        ).get("Item")
        return None if item is None else int(item["points"]["N"])

    def _record_item(self, tx, phase, **more):
        item = {"pk": {"S": f"tx#{tx}"}, "phase": {"S": phase}}
        for k, v in more.items():
            item[k] = {"N": str(v)} if isinstance(v, int) else {"S": v}
        return item

    def create(self, tx, phase, **more):
        """Writes the transaction's first record; False if one exists (a copy raced us)."""
        try:
            self.ddb.put_item(
                TableName=self.table,
                Item=self._record_item(tx, phase, **more),
                ConditionExpression="attribute_not_exists(pk)",
            )
            return True
        except ClientError as e:
            if e.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise

    def hold(self, tx, member, points):
        """Takes the points off the balance and records the hold, in one transaction:
        "held", "raced" (a record appeared), "notFound" or "condition"."""
        try:
            self.ddb.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": self._record_item(tx, "held", member=member, points=points),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": {"pk": {"S": f"member#{member}"}},
                            "UpdateExpression": "SET points = points - :n",
                            "ConditionExpression": "attribute_exists(pk) AND points >= :n",
                            "ExpressionAttributeValues": {":n": {"N": str(points)}},
                        }
                    },
                ]
            )
            return "held"
        except ClientError as e:
            if e.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            reasons = [r.get("Code") for r in e.response.get("CancellationReasons", [])]
            if reasons[:1] == ["ConditionalCheckFailed"]:
                return "raced"
            return "notFound" if self.points(member) is None else "condition"

    def move(self, tx, old, new, give_back=None):
        """Moves the record from phase `old` to `new` (and gives `give_back` = (member, points)
        back in the same transaction); False if the record was not in `old`."""
        items = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": {"pk": {"S": f"tx#{tx}"}},
                    "UpdateExpression": "SET phase = :new",
                    "ConditionExpression": "phase = :old",
                    "ExpressionAttributeValues": {":new": {"S": new}, ":old": {"S": old}},
                }
            }
        ]
        if give_back:
            member, points = give_back
            items.append(
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": {"pk": {"S": f"member#{member}"}},
                        "UpdateExpression": "SET points = points + :n",
                        "ExpressionAttributeValues": {":n": {"N": str(points)}},
                    }
                }
            )
        try:
            self.ddb.transact_write_items(TransactItems=items)
            return True
        except ClientError as e:
            if e.response["Error"]["Code"] == "TransactionCanceledException":
                return False
            raise


# ------------------------------------------------------------------ the rules


def no(reason, message):
    return {"vote": "no", "reason": reason, "message": message}


def answer_of(record, tx):
    """A prepare's answer from the record a previous message left."""
    phase = record["phase"]
    if phase == "held":
        return {"vote": "yes", "mode": "exclusive"}  # a duplicate: the same yes
    if phase == "refused":
        return no(record["reason"], record["message"])  # a duplicate: the same no
    return no("fenced", f"transaction {tx} already ended here ({phase})")


def prepare(store, req, now_ms):
    tx = req["txId"]
    for _ in range(5):  # each pass either answers or finds that a copy raced it
        record = store.record(tx)
        if record is not None:
            return answer_of(record, tx)
        if now_ms > req["deadline"]:
            refusal = ("expired", f"the deadline {req['deadline']} has passed")
        else:
            asked, why = read_payload(req.get("payload"))
            if asked is None:
                refusal = ("invalid", why if "payload" in req else "no payload")
            else:
                held = store.hold(tx, *asked)
                if held == "held":
                    return {"vote": "yes", "mode": "exclusive"}
                if held == "raced":
                    continue
                member, points = asked
                refusal = (
                    ("notFound", f"no member {member}")
                    if held == "notFound"
                    else ("condition", f"{member} has fewer than {points} points")
                )
        if store.create(tx, "refused", reason=refusal[0], message=refusal[1]):
            return no(*refusal)
    raise RuntimeError(f"transaction {tx}: the record kept changing")


def complete(store, req, commit):
    tx = req["txId"]
    for _ in range(5):
        record = store.record(tx)
        phase = record and record["phase"]
        if commit:
            if phase == "committed":
                return {"result": "alreadyDone"}
            if phase != "held":
                return {
                    "result": "violation",
                    "message": f"transaction {tx}: commit found {phase or 'no prepare'} here",
                }
            if store.move(tx, "held", "committed"):  # the points stay spent
                return {"result": "done"}
        else:
            if phase == "aborted":
                return {"result": "alreadyDone"}
            if phase == "committed":
                return {"result": "violation", "message": f"transaction {tx}: abort after commit"}
            if phase is None:
                # An abort before its prepare: recorded, so the prepare is fenced when it comes.
                if store.create(tx, "aborted"):
                    return {"result": "done"}
            elif phase == "refused":
                if store.move(tx, "refused", "aborted"):
                    return {"result": "done"}
            elif store.move(tx, "held", "aborted", (record["member"], int(record["points"]))):
                return {"result": "done"}
    raise RuntimeError(f"transaction {tx}: the record kept changing")


def inquire(store, req):
    """The staged commit's recovery asks: does this participant hold the transaction, or can it
    never take it? With "prevent", make sure of the second where the first is not so: record the
    transaction aborted (conditional on no record), so its prepare, arriving later, is fenced. A
    prepare here is one conditional write, so it is never half done: no record means no hold."""
    tx = req["txId"]
    for _ in range(5):
        record = store.record(tx)
        phase = record and record["phase"]
        if phase == "held":
            return {"inquiry": "held"}  # and it stays held until commit or abort
        if phase == "committed":
            return {"inquiry": "committed"}
        if phase in ("refused", "aborted"):
            return {"inquiry": "prevented"}  # final: a prepare now is fenced
        if not req.get("prevent"):
            return {"inquiry": "open"}
        if store.create(tx, "aborted"):
            return {"inquiry": "prevented"}
    raise RuntimeError(f"transaction {tx}: the record kept changing")


# ------------------------------------------------------------------ HTTP


def handler(store, secret):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self, status, body):
            data = json.dumps(body, default=str).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            action = self.path.rstrip("/").rsplit("/", 1)[-1]
            length = int(self.headers.get("Content-Length") or 0)
            try:
                if action not in ("prepare", "commit", "abort", "inquire"):
                    raise Refusal(
                        404, "not_found", f"no call {self.path}: POST /prepare, /commit, /abort or /inquire"
                    )
                if length > MAX_BODY:
                    self.close_connection = True  # the body is left unread
                    raise Refusal(413, "request_too_large", f"the body is over {MAX_BODY} bytes")
                body = self.rfile.read(length)
                signed = verify(self.headers, body, secret, int(time.time() * 1000))
                req = read_request(action, body)
                if req["txId"] != signed:
                    raise Refusal(
                        401,
                        "wrong_transaction",
                        f"signed for transaction {signed}, the body is for {req['txId']}",
                    )
                now_ms = int(time.time() * 1000)
                if action == "prepare":
                    reply = prepare(store, req, now_ms)
                elif action == "inquire":
                    reply = inquire(store, req)
                else:
                    reply = complete(store, req, action == "commit")
                if reply.get("result") == "violation":
                    print(f"protocol violation: {reply['message']}", file=sys.stderr)
                self.answer(200, reply)
            except Refusal as r:
                self.answer(r.status, {"code": r.code, "message": r.message})
            except ClientError as e:
                # DynamoDB failed: the call may have acted (a 5xx); the coordinator retries.
                self.answer(503, {"code": "unavailable", "message": str(e)})
            except Exception as e:  # noqa: BLE001 - the coordinator must get JSON, and retries
                self.answer(500, {"code": "internal", "message": str(e)})

        def do_GET(self):
            # GET /members/<id>: a member's balance, to see what transactions did.
            m = re.fullmatch(r"/members/([^/]+)", self.path)
            points = store.points(m.group(1)) if m else None
            if points is None:
                return self.answer(404, {"code": "not_found", "message": f"no member at {self.path}"})
            self.answer(200, {"member": m.group(1), "points": points})

        def log_message(self, fmt, *args):  # quiet: one line per refusal is printed above
            pass

    return Handler


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3002)
    p.add_argument("--secret-file", required=True, help="the secret shared with the coordinator")
    p.add_argument("--dynamodb-endpoint", help="e.g. DynamoDB Local's URL (default: AWS's)")
    p.add_argument("--table", default="loyalty")
    p.add_argument("--region", default="us-east-1")
    args = p.parse_args()
    with open(args.secret_file, "rb") as f:
        secret = f.read()
    secret = secret[:-1] if secret.endswith(b"\n") else secret
    if not secret:
        sys.exit(f"{args.secret_file} is empty: the participant refuses to run unsigned")
    store = Store(args.dynamodb_endpoint, args.table, args.region)
    store.ensure()
    server = ThreadingHTTPServer((args.host, args.port), handler(store, secret))
    print(f"loyalty participant on http://{args.host}:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
