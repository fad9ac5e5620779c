#!/usr/bin/env python3
"""After `sam deploy`: shows that the deployed stack works end to end (`make after-deploy`).

    infra/after-deploy.py STACK [--region R] --ws-token TOKEN    a deployed stack, by its name
    infra/after-deploy.py --local URL [--data-dir D] [--lake-dir L]   the local stack (make run)

In order, each step printed as it passes (the first failure stops the run, exit 1):

1. the stack's outputs (`ApiUrl`, `WebSocketUrl`, `LakeBucketName`, read with CloudFormation's
   DescribeStacks), or the local stack's URL, WebSocket and lake folder;
2. `twopc seed`: the demo items (accounts alice 200 and bob 0, wallets bob 0), or "exist
   already" on a second run;
3. a WebSocket connection (`?token=`: a JWT of the stack's `WebSocketIssuer`, or its shared demo
   token; locally one minted by `twopc token --admin`) subscribed to bob's account;
4. `twopc transfer` of 1 from alice's account to bob's: committed;
5. `twopc status` of that transaction;
6. the push: the `entity.committed` message of bob's account for that transaction, over the
   WebSocket (within 30 s);
7. a data-lake object written since the transfer: in the bucket under `committed/` (Firehose
   buffers at least `LakeBufferSeconds`, 60 s by default: waits up to --lake-timeout), or in the
   local lake folder. An object under `errors/` since the transfer (rows Firehose could not
   convert to Parquet or partition) fails the step at once, naming it and the delivery stream's
   log group (`LakeDeliveryLogGroupName`), which says why.

Needs the `twopc` CLI (`cargo build -p twopc`; --twopc PATH) with credentials allowed to invoke
the API (any source the AWS CLI accepts: profiles, SSO, environment), boto3 and websockets (both
in make's .tools/venv).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import urllib.parse
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PUSH_TIMEOUT_S = 30


class Failed(Exception):
    pass


def step(n, text):
    print(f"{n}. {text}", flush=True)


def detail(text):
    print(f"   {text}", flush=True)


class Twopc:
    def __init__(self, binary, url):
        self.binary = binary
        self.url = url

    def run(self, *args, ok=(0,)):
        cmd = [self.binary, "--url", self.url, *args]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode not in ok:
            raise Failed(f"`{' '.join(cmd)}` exited {out.returncode}:\n{out.stdout}{out.stderr}")
        return out.stdout


def stack_outputs(stack, region):
    import boto3  # only for a deployed stack

    cfn = boto3.client("cloudformation", region_name=region)
    found = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs", [])}
    missing = [k for k in ("ApiUrl", "WebSocketUrl", "LakeBucketName") if k not in outputs]
    if missing:
        raise Failed(f"stack {stack} ({found['StackStatus']}) has no output {', '.join(missing)}")
    return outputs


class S3Lake:
    def __init__(self, bucket, region, log_group):
        import boto3

        self.bucket = bucket
        self.log_group = log_group
        self.s3 = boto3.client("s3", region_name=region)

    def where(self, prefix="committed/"):
        return f"s3://{self.bucket}/{prefix}"

    def why(self):
        where = self.log_group or "/<stack>/lake-delivery"
        return f"the delivery stream's log group {where} (CloudWatch Logs) says why"

    def new_objects(self, since, prefix="committed/"):
        found = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                if o["LastModified"] >= since:
                    found.append(f"s3://{self.bucket}/{o['Key']} ({o['Size']} bytes)")
        return found


class LocalLake:
    """The local lake folder, laid out as the bucket is (the local stack writes no errors/)."""

    def __init__(self, folder):
        self.folder = Path(folder)

    def where(self, prefix="committed/"):
        return f"{self.folder}/{prefix}"

    def why(self):
        return "the local stack's log says why"

    def new_objects(self, since, prefix="committed/"):
        found = []
        for f in sorted((self.folder / prefix).glob("**/*")):
            modified = datetime.datetime.fromtimestamp(f.stat().st_mtime, datetime.timezone.utc)
            if f.is_file() and modified >= since and f.stat().st_size > 0:
                found.append(f"{f} ({f.stat().st_size} bytes)")
        return found


def wait_for_lake(lake, since, timeout, poll_s):
    """The objects written under committed/ since `since`; fails at once when rows went under
    errors/ instead (a failed Parquet conversion or partitioning), and after `timeout`."""
    until = time.monotonic() + timeout
    while True:
        if errors := lake.new_objects(since, "errors/"):
            raise Failed(f"the rows went under {lake.where('errors/')} instead of committed/: "
                         f"{len(errors)} object(s) since the transfer, e.g. {errors[0]}; "
                         f"Firehose could not convert them to Parquet or partition them, and "
                         f"{lake.why()}")
        if found := lake.new_objects(since):
            return found
        if time.monotonic() > until:
            raise Failed(f"no data-lake object under {lake.where()} within {timeout:.0f} s, nor under "
                         f"{lake.where('errors/')}; if one appears there later, {lake.why()}")
        time.sleep(poll_s)  # polling the bucket: Firehose says nothing when it writes


def receive_json(ws, timeout):
    from websockets.exceptions import ConnectionClosed

    try:
        return json.loads(ws.recv(timeout=timeout))
    except TimeoutError:
        return None
    except ConnectionClosed as e:
        raise Failed(f"the WebSocket closed: {e}") from e


def main():
    parser = argparse.ArgumentParser(
        description="After `sam deploy`: seed, transfer, status, the WebSocket push and a data-lake object.",
        epilog="Exit status: 0 every step passed, 1 one failed (it says which and why), 2 bad arguments.")
    parser.add_argument("stack", nargs="?", help="the deployed stack's name (sam deploy's stack_name)")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))
    parser.add_argument("--ws-token", default=os.environ.get("TWOPC_WS_TOKEN"),
                        help="a WebSocket token: a JWT of the stack's WebSocketIssuer or its shared demo token (TWOPC_WS_TOKEN)")
    parser.add_argument("--local", metavar="URL", help="the local stack instead (make run: http://127.0.0.1:3000)")
    parser.add_argument("--data-dir", default=".twopc", help="--local: the stack's data folder (its WebSocket signing key)")
    parser.add_argument("--lake-dir", default="data-lake", help="--local: the stack's data-lake folder")
    parser.add_argument("--twopc", default=str(REPO / "target/debug/twopc"), help="the twopc CLI")
    parser.add_argument("--amount", default="1", help="what the transfer moves from alice's account to bob's")
    parser.add_argument("--lake-timeout", type=float, default=900,
                        help="seconds to wait for the data-lake object (Firehose buffers LakeBufferSeconds, 60 to 900)")
    args = parser.parse_args()
    if bool(args.stack) == bool(args.local):
        parser.error("name a deployed stack, or --local URL (not both)")
    try:
        return run(args)
    except Failed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1


def run(args):
    from websockets.sync.client import connect

    # 1. Where the stack is.
    if args.local:
        api = args.local.rstrip("/")
        parts = urllib.parse.urlsplit(api)
        ws_url = f"{'wss' if parts.scheme == 'https' else 'ws'}://{parts.netloc}/ws"
        lake = LocalLake(args.lake_dir)
        step(1, f"the local stack: {api}")
    else:
        outputs = stack_outputs(args.stack, args.region)
        api, ws_url = outputs["ApiUrl"], outputs["WebSocketUrl"]
        lake = S3Lake(outputs["LakeBucketName"], args.region, outputs.get("LakeDeliveryLogGroupName"))
        step(1, f"stack {args.stack}: {api}")
    detail(f"WebSocket {ws_url}")
    detail(f"data lake {lake.where()}")
    twopc = Twopc(args.twopc, api)

    # 2. The demo items.
    step(2, "twopc seed")
    for line in twopc.run("seed").splitlines():
        detail(line)

    # 3. A subscriber to bob's account.
    if args.local:
        token = subprocess.run(
            [args.twopc, "token", "--sub", "after-deploy", "--admin", "--ttl", "10m", "--data-dir", args.data_dir],
            capture_output=True, text=True, check=True).stdout.strip()
    elif args.ws_token:
        token = args.ws_token
    else:
        raise Failed("a deployed stack's WebSocket needs a token: --ws-token (or TWOPC_WS_TOKEN), "
                     "a JWT of its WebSocketIssuer or its shared demo token (WebSocketTokenSecretArn)")
    step(3, "WebSocket: subscribe to accounts bob")
    with connect(f"{ws_url}?token={urllib.parse.quote(token, safe='')}", open_timeout=15) as ws:
        ws.send(json.dumps({"action": "subscribe", "entities": [{"participant": "accounts", "key": {"id": "bob"}}]}))
        # Every change committed after the answer is pushed: the transfer waits for it.
        ack = receive_json(ws, 15)
        if not ack or ack.get("type") != "subscribed" or not isinstance(ack.get("from"), int):
            raise Failed(f"the subscription was not acknowledged (with `from`): {ack}")
        detail(json.dumps(ack, separators=(",", ":")))

        # 4. The transfer (its own idempotency key: a rerun transfers again).
        since = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        step(4, f"twopc transfer --from alice --to bob --amount {args.amount}")
        answer = json.loads(twopc.run("--json", "transfer", "--from", "alice", "--to", "bob", "--amount", args.amount,
                                      "--idempotency-key", f"after-deploy-{uuid.uuid4()}"))
        tx = answer["txId"]
        if answer.get("outcome") != "committed":
            raise Failed(f"the transfer was not committed: {json.dumps(answer)}")
        detail(f"committed {tx}")

        # 5. Its status.
        step(5, f"twopc status {tx}")
        for line in twopc.run("status", tx).splitlines():
            detail(line)

        # 6. The push.
        step(6, "WebSocket: the push of bob's account")
        until = time.monotonic() + PUSH_TIMEOUT_S
        while True:
            message = receive_json(ws, max(0.1, until - time.monotonic()))
            if message is None:
                raise Failed(f"no entity.committed message for {tx} within {PUSH_TIMEOUT_S} s")
            if message.get("type") == "entity.committed" and message.get("txId") == tx:
                detail(json.dumps({k: message.get(k) for k in ("type", "participant", "key", "txId", "item")},
                                  separators=(",", ":")))
                break

    # 7. The data lake.
    step(7, f"data lake: an object since {since.isoformat()}")
    found = wait_for_lake(lake, since, args.lake_timeout, 2 if args.local else 15)
    for f in found[:3]:
        detail(f)
    print("OK: seed, transfer, status, push and data lake all work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
