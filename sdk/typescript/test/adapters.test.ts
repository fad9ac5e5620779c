// The HTTP routes (the documented order of refusals, each code) and the Lambda handler (the
// events/custom-participant-*.json samples, error kinds, numbers a float may have rounded).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  type Hooks,
  type Json,
  MemoryStates,
  Participant,
  Reservation,
  answer,
  handle,
  sign,
  toJson,
} from "../src/participant/index.js";

const SECRET = "a secret of at least sixteen bytes";
const repo = new URL("../../../../", import.meta.url);
const event = (name: string) => JSON.parse(readFileSync(new URL(`events/custom-participant-${name}.json`, repo), "utf8"));

function participant(now = () => Date.now()) {
  const seen: Json[] = [];
  const hooks: Hooks = {
    async reserve(call) {
      seen.push(call.payload);
      return Reservation.held;
    },
    async confirm() {},
    async cancel() {},
  };
  return { p: new Participant({ hooks, states: new MemoryStates(), now, logger: () => {} }), seen };
}

const TX = "5d1c2b7e-8a4f-4e1b-b6c3-2e9f0a7d4c18";

function prepareBody(tx = TX, deadline = Date.now() + 5_000) {
  return Buffer.from(
    `{"txId":"${tx}","deadline":${deadline},"began":${deadline - 5_000},"key":{},"coordinator":"c","payload":{"amount":12.50}}`,
  );
}

async function post(p: Participant, path: string, body: Buffer, headers: Record<string, string>, max?: number) {
  return answer(p, { secret: SECRET, maxBodyBytes: max }, "POST", path, (n) => headers[n], body);
}

test("a signed prepare is answered, its payload's numbers exact", async () => {
  const { p, seen } = participant();
  const body = prepareBody();
  const a = await post(p, "/prepare", body, sign(SECRET, TX, Date.now(), body));
  assert.deepEqual(a, { status: 200, body: { vote: "yes", mode: "exclusive" } });
  assert.equal(toJson(seen), '[{"amount":12.50}]');
  const prefixed = await post(p, "/Prod/twopc/prepare", body, sign(SECRET, TX, Date.now(), body));
  assert.equal(prefixed.status, 200, "a base URL with a path");
});

test("refusals come in the documented order, each with its code", async () => {
  const { p } = participant();
  const body = prepareBody();
  const now = Date.now();
  const signed = sign(SECRET, TX, now, body);
  const code = async (path: string, b: Buffer, h: Record<string, string>, max?: number) => {
    const a = await post(p, path, b, h, max);
    return [a.status, (a.body as { code: string }).code];
  };
  assert.deepEqual(await code("/prepare", body, {}, 10), [413, "request_too_large"], "size before signature");
  assert.deepEqual(await code("/prepare", body, {}), [401, "unsigned"]);
  assert.deepEqual(await code("/prepare", body, { ...signed, "x-twopc-timestamp": "12a" }), [401, "malformed_signature"]);
  assert.deepEqual(await code("/prepare", body, { ...signed, "x-twopc-signature": "v1=abcd" }), [401, "malformed_signature"]);
  assert.deepEqual(await code("/prepare", body, sign("another secret of sixteen", TX, now, body)), [401, "bad_signature"]);
  const old = sign(SECRET, TX, now - 600_000, body);
  assert.deepEqual(await code("/prepare", body, old), [401, "stale_request"]);
  const other = "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69";
  assert.deepEqual(await code("/prepare", body, sign(SECRET, other, now, body)), [401, "wrong_transaction"]);
  const notJson = Buffer.from("{nope");
  assert.deepEqual(await code("/prepare", notJson, sign(SECRET, TX, now, notJson)), [400, "invalid_request"]);
  const noDeadline = Buffer.from(`{"txId":"${TX}","began":1,"key":{},"coordinator":"c"}`);
  assert.deepEqual(await code("/prepare", noDeadline, sign(SECRET, TX, now, noDeadline)), [400, "invalid_request"]);
  assert.deepEqual(await code("/nothing", body, signed), [404, "not_found"]);
  const get = await answer(p, { secret: SECRET }, "GET", "/prepare", (n) => signed[n], body);
  assert.equal(get.status, 405);
});

test("the Lambda handler answers the sample events as the transport sends them", async () => {
  const { p, seen } = participant(() => 4102444795000 + 1);
  assert.deepEqual(await handle(p, event("inquire")), { inquiry: "prevented" }, "prevented before its prepare");
  const prepare = event("prepare");
  prepare.request.txId = "6d1c2b7e-8a4f-4e1b-b6c3-2e9f0a7d4c18";
  assert.deepEqual(await handle(p, prepare), { vote: "yes", mode: "exclusive" });
  assert.equal(toJson(seen), '[{"card":"4242","amount":12.5}]', "12.50 read by JSON.parse: the value kept");
  const commit = event("commit");
  commit.request.txId = prepare.request.txId;
  assert.deepEqual(await handle(p, commit), { result: "done" });
  assert.deepEqual(await handle(p, event("abort")), { result: "alreadyDone" }, "aborted by the inquiry's prevent");
});

test("a Lambda failure is thrown with the transport's error kind", async () => {
  const { p } = participant(() => 4102444795000 + 1);
  await assert.rejects(handle(p, { action: "explode", request: {} }), { name: "Invalid" });
  await assert.rejects(handle(p, { nothing: true }), { name: "Invalid" });
  const failing = new Participant({
    hooks: {
      async reserve() {
        throw new Error("the gateway is down");
      },
      async confirm() {},
      async cancel() {},
    },
    states: new MemoryStates(),
    now: () => 4102444795000 + 1,
    logger: () => {},
  });
  await assert.rejects(handle(failing, event("prepare")), { name: "Undetermined" });
});

test("a number the runtime's float may have rounded is refused, never held", async () => {
  const { p, seen } = participant(() => 4102444795000 + 1);
  const prepare = event("prepare");
  prepare.request.payload = { amount: JSON.parse("12345678901234567.5") };
  const vote = (await handle(p, prepare)) as { vote: string; reason: string };
  assert.deepEqual([vote.vote, vote.reason], ["no", "invalid"]);
  assert.equal(seen.length, 0);
});
