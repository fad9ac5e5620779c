// The client's types held to docs/openapi.json and the participant's to
// docs/participant-openapi.json: a name added or renamed there fails here until the package
// follows.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { ABORT_CODES, ERROR_CODES, OUTCOMES, TX_STATUSES, toJson } from "../src/client/index.js";
import { Op, Transaction, key } from "../src/client/index.js";

type Schema = {
  properties?: Record<string, Schema>;
  enum?: string[];
  const?: string;
  oneOf?: Schema[];
  $ref?: string;
  required?: string[];
};
type Doc = { components: { schemas: Record<string, Schema> }; paths: Record<string, Record<string, unknown>> };

const repo = new URL("../../../../", import.meta.url);
const doc = (name: string): Doc => JSON.parse(readFileSync(new URL(`docs/${name}`, repo), "utf8"));
const api = doc("openapi.json");
const schemas = api.components.schemas;
const schema = (name: string): Schema => {
  const s = schemas[name];
  assert.ok(s, `docs/openapi.json has no schema ${name}`);
  return s;
};
/** The strings a schema allows: an enum, a const, or a oneOf of `code.*` references. */
function values(s: Schema): string[] {
  if (s.enum) return s.enum;
  if (s.const) return [s.const];
  return (s.oneOf ?? []).flatMap((x) => (x.$ref ? values(schema(x.$ref.split("/").pop() ?? "")) : values(x)));
}
const props = (name: string) => Object.keys(schema(name).properties ?? {}).sort();

test("the statuses, outcomes and abort codes are the document's", () => {
  assert.deepEqual([...TX_STATUSES], values(schema("TxStatus")));
  assert.deepEqual([...OUTCOMES], values(schema("Outcome")));
  assert.deepEqual([...ABORT_CODES].sort(), values(schema("AbortCode")).sort());
});

test("every error code of the document is one the client knows", () => {
  const abort = new Set(values(schema("AbortCode")));
  const documented = Object.keys(schemas)
    .filter((n) => n.startsWith("code."))
    .map((n) => n.slice(5))
    .filter((c) => !abort.has(c));
  const known = new Set<string>(ERROR_CODES);
  for (const code of documented) assert.ok(known.has(code), `${code}: add it to ERROR_CODES`);
  // throttled is the client's own name for API Gateway's 429, which carries no code.
  assert.deepEqual([...known].filter((c) => !documented.includes(c)), ["throttled"]);
});

test("what the client writes and reads has the document's names", () => {
  assert.deepEqual(props("TransactionRequest"), ["participants", "timeoutMs", "wait"]);
  assert.deepEqual(props("TableParticipant"), ["key", "op", "participant"]);
  assert.deepEqual(props("CustomParticipant"), ["participant", "payload"]);
  assert.deepEqual(props("Operation"), ["add", "delete", "put", "remove", "require", "set"]);
  const condition = schema("Condition").oneOf ?? [];
  assert.deepEqual(condition[0]?.enum, ["exists", "notExists"]);
  assert.deepEqual(Object.keys(condition[1]?.properties ?? {}).slice(0, 6), ["eq", "ne", "lt", "lte", "gt", "gte"]);
  for (const answer of ["Transaction", "TransactionRecord"]) {
    for (const read of ["txId", "status", "outcome", "applied", "participants"]) {
      assert.ok(props(answer).includes(read), `${answer}.${read}`);
    }
  }
  assert.ok(props("Transaction").includes("code") && props("Transaction").includes("message"));
  assert.deepEqual(props("ParticipantOutcome"), ["key", "message", "mode", "participant", "reason", "vote"]);
  assert.deepEqual(props("PendingTransactions"), ["next", "transactions"]);
  const listing = (api.paths["/transactions"]?.get as { parameters: { name: string }[] }).parameters;
  assert.deepEqual(listing.map((p) => p.name), ["status", "overdue", "limit", "next"]);
  // Every section the builder writes is one the document has.
  const body = JSON.parse(
    toJson(new Transaction().table("t", key("id", "a"), Op.set("a", "x").add("n", "1").remove("r").require("n", "gte", "0"))),
  );
  assert.deepEqual(Object.keys(body.participants[0].op).sort(), ["add", "remove", "require", "set"]);
});

test("the participant answers with the codes the participant document declares", () => {
  const participant = doc("participant-openapi.json");
  const text = JSON.stringify(participant);
  for (const code of [
    "unsigned",
    "malformed_signature",
    "bad_signature",
    "stale_request",
    "wrong_transaction",
    "invalid_request",
    "request_too_large",
    "busy",
    "unavailable",
    "hook_failed",
    "internal",
  ]) {
    assert.ok(text.includes(`"${code}"`), `${code} is not in docs/participant-openapi.json`);
  }
  for (const path of ["/prepare", "/commit", "/abort", "/inquire"]) assert.ok(participant.paths[path], path);
});
