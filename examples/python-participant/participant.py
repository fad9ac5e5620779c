#!/usr/bin/env python3
"""A dynamo-2pc participant in Python: a loyalty-points service, on the SDK in sdk/python.

An order may pay part of its price in points: {"participant": "loyalty", "payload":
{"member": "alice", "points": 120}}. reserve takes the points off the member's balance into a
hold (one DynamoDB transaction, keyed by the transaction id, so a second call holds nothing
more), confirm drops the hold (the points stay spent), cancel gives the held points back. The
SDK does the rest: signatures, the per-transaction record, duplicates, an abort before its
prepare, deadlines, inquiries.

    python participant.py --port 3002 --secret-file secret.txt \
        --dynamodb-endpoint http://127.0.0.1:8000 --table loyalty
"""

import argparse
import re

from botocore.exceptions import ClientError
from dynamo2pc import exactjson
from dynamo2pc.participant import (HELD, InvalidPayload, app, dynamodb_client,
                                   dynamodb_participant, refuse, serve)
from dynamo2pc.signing import read_secret_file

SEED = {"alice": 1000, "bob": 50, "conformance": 10**12}


class Loyalty:
    def __init__(self, ddb, table):
        self.ddb, self.table = ddb, table

    def read_payload(self, p):
        if not isinstance(p, dict) or set(p) != {"member", "points"}:
            raise InvalidPayload('expected {"member": "<id>", "points": <a whole number above 0>}')
        if not isinstance(p["member"], str) or not p["member"]:
            raise InvalidPayload('"member": expected a non-empty string')
        if type(p["points"]) is not int or p["points"] <= 0:
            raise InvalidPayload('"points": expected a whole number above 0')
        return p["member"], p["points"]

    def reserve(self, call):
        member, points = call.payload
        try:
            self.ddb.transact_write_items(TransactItems=[
                self._hold("Put", call.tx_id, "attribute_not_exists(pk)", points),
                self._points(member, "-", points, "attribute_exists(pk) AND points >= :n")])
        except ClientError as e:
            reasons = [r["Code"] for r in e.response.get("CancellationReasons", [])]
            if reasons[:1] == ["ConditionalCheckFailed"]:
                return HELD  # held by an earlier call for this transaction
            if reasons[1:2] != ["ConditionalCheckFailed"]:
                raise
            if self.points(member) is None:
                return refuse("notFound", f"no member {member}")
            return refuse("condition", f"{member} has fewer than {points} points")
        return HELD

    def confirm(self, call):  # the points stay spent: the hold goes
        self.ddb.delete_item(TableName=self.table, Key={"pk": {"S": f"hold#{call.tx_id}"}})

    def cancel(self, call):  # the held points go back, once: only while the hold is there
        member, points = call.payload
        try:
            self.ddb.transact_write_items(TransactItems=[
                self._hold("Delete", call.tx_id, "attribute_exists(pk)"),
                self._points(member, "+", points)])
        except ClientError as e:
            if e.response.get("CancellationReasons", [{}])[0].get("Code") != "ConditionalCheckFailed":
                raise  # else nothing was held: reserve refused, or never ran

    # --- the table: members ("member#<id>", points) and holds ("hold#<txId>") ---------------

    def _hold(self, kind, tx_id, condition, points=None):
        key = {"pk": {"S": f"hold#{tx_id}"}}
        item = {"Item": {**key, "points": {"N": str(points)}}} if kind == "Put" else {"Key": key}
        return {kind: {"TableName": self.table, "ConditionExpression": condition, **item}}

    def _points(self, member, sign, n, condition="attribute_exists(pk)"):
        return {"Update": {
            "TableName": self.table, "Key": {"pk": {"S": f"member#{member}"}},
            "UpdateExpression": f"SET points = points {sign} :n", "ConditionExpression": condition,
            "ExpressionAttributeValues": {":n": {"N": str(n)}}}}

    def points(self, member):
        item = self.ddb.get_item(TableName=self.table, Key={"pk": {"S": f"member#{member}"}},
                                 ConsistentRead=True).get("Item")
        return None if item is None else int(item["points"]["N"])

    def ensure(self):
        try:
            self.ddb.create_table(
                TableName=self.table, BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        except ClientError as e:
            if e.response["Error"]["Code"] != "ResourceInUseException":
                raise
        self.ddb.get_waiter("table_exists").wait(TableName=self.table)
        for member, points in SEED.items():
            try:
                self.ddb.put_item(
                    TableName=self.table, ConditionExpression="attribute_not_exists(pk)",
                    Item={"pk": {"S": f"member#{member}"}, "points": {"N": str(points)}})
            except ClientError as e:
                if e.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise

    def members_app(self, environ, start_response):
        """GET /members/<id>: a member's balance, to see what transactions did."""
        m = re.fullmatch(r"/members/([^/]+)", environ.get("PATH_INFO", ""))
        points = self.points(m.group(1)) if m and environ["REQUEST_METHOD"] == "GET" else None
        status, body = ("200 OK", {"member": m.group(1), "points": points}) if points is not None \
            else ("404 Not Found", {"code": "not_found", "message": "GET /members/<id>"})
        start_response(status, [("Content-Type", "application/json")])
        return [exactjson.dumps(body).encode()]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3002)
    p.add_argument("--secret-file", required=True, help="the secret shared with the coordinator")
    p.add_argument("--dynamodb-endpoint", help="e.g. DynamoDB Local's URL (default: AWS's)")
    p.add_argument("--table", default="loyalty", help="the members' table; its states: <table>-twopc")
    args = p.parse_args()
    ddb = dynamodb_client(args.dynamodb_endpoint)
    loyalty = Loyalty(ddb, args.table)
    loyalty.ensure()
    participant = dynamodb_participant(loyalty, f"{args.table}-twopc", client=ddb, create_table=True)
    application = app(participant, read_secret_file(args.secret_file), fallback=loyalty.members_app)
    print(f"loyalty participant on http://{args.host}:{args.port}", flush=True)
    serve(application, args.host, args.port)


if __name__ == "__main__":
    main()
