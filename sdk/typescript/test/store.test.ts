// One contract for the state stores: the in-memory one, and DynamoStates on DynamoDB Local
// (TWOPC_DYNAMODB_ENDPOINT, which `make test` sets; without it the DynamoDB half is skipped,
// saying so, unless TWOPC_TS_REQUIRE_DYNAMODB=1, as in `make test`, makes that a failure).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import {
  DynamoStates,
  DynamoTxLog,
  MemoryStates,
  type StateStore,
  type TxState,
  canonical,
  dynamoClient,
  first,
  fromAttr,
  moved,
  parseJson,
  shardOf,
  toAttr,
} from "../src/participant/index.js";

const endpoint = process.env.TWOPC_DYNAMODB_ENDPOINT;
if (!endpoint && process.env.TWOPC_TS_REQUIRE_DYNAMODB === "1") {
  throw new Error("TWOPC_DYNAMODB_ENDPOINT is not set: run under infra/dynamodb-local.sh run");
}

async function contract(store: StateStore) {
  const now = 1_000_000;
  const txId = randomUUID();
  const payload = parseJson('{"amount": 12345678901234567890.123456789, "card": "4242", "tags": [1, null, true]}');
  const s: TxState = { ...first(txId, "reserving", now + 50, now, now), payload, claimedUntil: now + 50 };
  assert.equal(await store.get(txId), undefined);
  assert.deepEqual(await store.create(s), { done: true });
  const lost = await store.create({ ...s, phase: "aborted" });
  assert.equal(lost.done, false);
  assert.equal(!lost.done && lost.found?.phase, "reserving", "a lost create finds the state");

  const read = await store.get(txId);
  assert.ok(read);
  assert.equal(canonical(read.payload ?? null), canonical(payload), "numbers exact");
  assert.equal(read.claimedUntil, now + 50);

  const refused = { ...moved(s, "refused", undefined, now + 1), refusal: { reason: "condition" as const, message: "no" } };
  assert.deepEqual(await store.replace(refused), { done: true });
  const stale = await store.replace(moved(s, "reserved", undefined, now + 2));
  assert.equal(!stale.done && stale.found?.phase, "refused", "a write over an old revision loses");
  const back = await store.get(txId);
  assert.deepEqual(back?.refusal, { reason: "condition", message: "no" });
  assert.equal(back?.claimedUntil, undefined);

  // Overdue: unfinished ones past their deadline, earliest first, at most `limit`.
  const ids: string[] = [randomUUID(), randomUUID(), randomUUID()];
  for (const [i, id] of ids.entries()) {
    assert.ok((await store.create(first(id, "reserving", now + 100 - i, now, now))).done);
  }
  const overdue = (await store.overdue(now + 1_000, 10)).map((x) => x.txId).filter((id) => ids.includes(id));
  assert.deepEqual(overdue, [...ids].reverse());
  assert.ok(!(await store.overdue(now + 1_000, 10)).some((x) => x.txId === txId), "refused is finished");
  assert.equal((await store.overdue(now + 1_000, 2)).length, 2);
  assert.deepEqual((await store.overdue(now, 10)).filter((x) => ids.includes(x.txId)), [], "not yet overdue");
}

test("the in-memory store keeps the contract", () => contract(new MemoryStates()));

test("DynamoStates keeps the contract on DynamoDB Local", { skip: !endpoint && "TWOPC_DYNAMODB_ENDPOINT is not set" }, async () => {
  const client = dynamoClient(endpoint);
  const store = new DynamoStates(client, `ts-${randomUUID().slice(0, 8)}-state`);
  await store.createTableIfMissing();
  await store.createTableIfMissing(); // again: nothing to do
  await contract(store);
  const log = new DynamoTxLog(client, store.table); // any table keyed by txId reads the same
  assert.equal(await log.status(randomUUID()), undefined);
});

test("attributes carry numbers as their text, and the pending shard is Rust's", () => {
  const v = parseJson('{"a": 0.10, "b": [1e3, "x", false, null], "c": {}}');
  assert.deepEqual(toAttr(v), {
    M: {
      a: { N: "0.10" },
      b: { L: [{ N: "1e3" }, { S: "x" }, { BOOL: false }, { NULL: true }] },
      c: { M: {} },
    },
  });
  assert.equal(canonical(fromAttr(toAttr(v))), canonical(v));
  // crates/dynamo/src/tables.rs shard_of: h = h * 31 + byte (u32, wrapping), "P" + h % 4.
  let h = 0n;
  const id = "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69";
  for (const b of Buffer.from(id)) h = (h * 31n + BigInt(b)) % 2n ** 32n;
  assert.equal(shardOf(id), `P${h % 4n}`);
});
