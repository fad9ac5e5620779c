// The package as a user has it: `make test-ts` packs it (npm pack), installs the tarball into a
// fresh project holding examples/typescript-participant and this file, and compiles the example
// against the installed types. Then, on DynamoDB Local (TWOPC_DYNAMODB_ENDPOINT) with the twopc
// binary (TWOPC_BIN): the example passes every check `twopc conformance` plays, takes part in
// committed and aborted transactions of the local stack (`twopc serve`) beside a Rust
// participant, and the installed client submits, reads status and lists pending against it.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { GetItemCommand } from "@aws-sdk/client-dynamodb";
import { Client, Decimal, Op, Transaction, key } from "dynamo-2pc/client";
import { dynamoClient } from "dynamo-2pc/participant";

const endpoint = process.env.TWOPC_DYNAMODB_ENDPOINT;
const twopc = process.env.TWOPC_BIN;
assert.ok(endpoint, "TWOPC_DYNAMODB_ENDPOINT is not set: run under infra/dynamodb-local.sh run");
assert.ok(twopc, "TWOPC_BIN is not set: the path of the twopc binary (cargo build -p twopc)");

const SECRET = "the secret the runner and the participant share";
const dir = mkdtempSync(join(tmpdir(), "twopc-ts-"));
const secretFile = join(dir, "secret.txt");
writeFileSync(secretFile, `${SECRET}\n`);
const run = Math.random().toString(36).slice(2, 8);
const prefix = `ts${run}-`;
const cards = `${prefix}giftcards`;
const children = [];

async function freePort() {
  const server = createServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

/** Starts a child; resolves once a line of its output matches `ready` (rejects if it exits first). */
function start(command, args, env, ready, what) {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} not ready in 120 s:\n${output}`)), 120_000);
    const read = (chunk) => {
      output += chunk;
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on("data", read);
    child.stderr.on("data", read);
    child.on("exit", (code) => reject(new Error(`${what} exited (${code}):\n${output}`)));
  });
}

let participantUrl;
let api;
let client;

before(async () => {
  const env = { TWOPC_DYNAMODB_ENDPOINT: endpoint, CARDS_TABLE: cards };
  const seeded = spawnSync("node", ["dist/seed.js"], { env: { ...process.env, ...env }, encoding: "utf8" });
  assert.equal(seeded.status, 0, seeded.stderr);
  const port = await freePort();
  participantUrl = `http://127.0.0.1:${port}`;
  await start(
    "node",
    ["dist/participant.js"],
    {
      ...env,
      PORT: String(port),
      TWOPC_PARTICIPANT_TABLE: `${prefix}giftcards-state`,
      TWOPC_TRANSACTIONS_TABLE: `${prefix}transactions`,
      TWOPC_HTTP_SIGNING_SECRET: SECRET,
    },
    /listening on/,
    "the TypeScript participant",
  );
});

after(() => {
  for (const child of children) child.kill();
});

test("the example passes every check twopc conformance plays", () => {
  const out = spawnSync(
    twopc,
    ["conformance", "--url", participantUrl, "--secret-file", secretFile,
      "--payload", '{"card": "conformance", "amount": 1.25}', "--invalid-payload", '{"card": 4242}'],
    { encoding: "utf8" },
  );
  console.log(out.stdout);
  assert.equal(out.status, 0, `${out.stdout}\n${out.stderr}`);
  assert.match(out.stdout, /^15 passed, 0 failed$/m);
  assert.doesNotMatch(out.stdout, /^FAIL/m);
});

async function item(path) {
  const res = await fetch(`${api}${path}`);
  assert.equal(res.status, 200, path);
  return (await res.json()).item;
}

async function card(id) {
  const out = await dynamoClient(endpoint).send(
    new GetItemCommand({ TableName: cards, Key: { id: { S: id } }, ConsistentRead: true }),
  );
  return out.Item;
}

const balance = async (id) => new Decimal((await card(id)).balance.N);
const order = (account, amount, giftcard, spend) =>
  new Transaction()
    .waitApplied()
    .table("accounts", key("id", account), Op.debit("balance", amount))
    .custom("giftcards", { card: giftcard, amount: new Decimal(spend) });

test("beside a Rust participant, the example commits and aborts through the local stack", async () => {
  const port = await freePort();
  api = `http://127.0.0.1:${port}`;
  await start(
    twopc,
    ["serve", "--dynamodb-endpoint", endpoint, "--port", String(port), "--data-dir", join(dir, "serve"),
      "--table-prefix", prefix, "--lake-dir", join(dir, "lake"), "--http-participant", `giftcards=${participantUrl}`,
      "--signing-secret-file", secretFile],
    {},
    new RegExp(`127\\.0\\.0\\.1:${port}`),
    "twopc serve",
  );
  client = new Client({ baseUrl: api });

  // GIVEN an order paying 10 from Alice's account (the Rust participant) and 12.50 from her gift card.
  const paid = await client.submit(order("alice", "10", "gc-alice", "12.50"), `order-${run}-1`);
  assert.equal(paid.status, "COMMITTED", JSON.stringify(paid.body));
  assert.deepEqual(paid.participants[1], { participant: "giftcards", vote: { vote: "yes" } });
  assert.equal(String((await item("/local/items/accounts/alice")).balance), "90");
  assert.ok((await balance("gc-alice")).eq("87.50"), "exactly 12.50 spent");
  assert.equal(await card(`hold#${paid.txId}`), undefined, "the hold is spent");

  // The same key again is the same transaction: nothing spent twice.
  const again = await client.submit(order("alice", "10", "gc-alice", "12.50"), `order-${run}-1`);
  assert.deepEqual([again.txId, again.status], [paid.txId, "COMMITTED"]);
  assert.ok((await balance("gc-alice")).eq("87.50"));
  assert.equal((await client.status(paid.txId)).status, "COMMITTED");

  // WHEN the Rust participant refuses (Carol has 0), the gift card's hold is given back.
  const refused = await client.submit(order("carol", "5", "gc-bob", "2.25"));
  assert.deepEqual([refused.status, refused.abort?.code], ["ABORTED", "condition"], JSON.stringify(refused.body));
  assert.equal(refused.participants[1]?.vote?.vote, "yes");
  assert.ok((await balance("gc-bob")).eq("5.00"), "the hold was released");
  assert.equal(await card(`hold#${refused.txId}`), undefined);

  // AND when the gift card refuses (Bob's holds 5.00), Alice's debit is undone.
  const declined = await client.submit(order("alice", "1", "gc-bob", "7.25"));
  assert.equal(declined.status, "ABORTED");
  assert.deepEqual(declined.participants[1], {
    participant: "giftcards",
    vote: { vote: "no", reason: "condition", message: "card gc-bob has no balance of 7.25" },
  });
  assert.equal(String((await item("/local/items/accounts/alice")).balance), "90");
  assert.ok((await balance("gc-bob")).eq("5.00"));
});

test("the installed client lists pending transactions of the local stack", async () => {
  assert.ok(client, "the local stack runs (the test before)");
  const page = await client.pending({ limit: 10 });
  assert.ok(Array.isArray(page.transactions));
  for (const t of page.transactions) assert.ok(!["COMMITTED", "ABORTED"].includes(t.status), t.status);
  const overdue = await client.pending({ overdue: true, limit: 1 });
  assert.ok(overdue.transactions.length <= 1);
  await assert.rejects(client.status("00000000-0000-4000-8000-000000000000"), { code: "not_found" });
});
