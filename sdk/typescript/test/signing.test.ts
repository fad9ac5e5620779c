// The signer and the verifier held to docs/signing-vectors.json, the vectors the Rust signer
// (crates/core/src/signing.rs) and the Python SDK are tested against too.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { DEFAULT_MAX_SKEW_MS, SignatureError, sign, verify } from "../src/signing.js";

type Vector = { name: string; secret: string; secretFile?: string; timestamp: string; txId: string; body: string; stringToSign: string; signature: string };
type Check = { name: string; headers: Record<string, string>; body: string; now: number; expect: { txId?: string; code?: string } };
const doc: { maxSkewMs: number; vectors: Vector[]; checks: Check[] } = JSON.parse(
  readFileSync(new URL("../../../../docs/signing-vectors.json", import.meta.url), "utf8"),
);

test("the signer gives every documented vector", () => {
  assert.ok(doc.vectors.length >= 8, `${doc.vectors.length} vectors`);
  for (const v of doc.vectors) {
    if (v.secretFile !== undefined) assert.equal(v.secretFile.replace(/\n$/, ""), v.secret, v.name);
    assert.equal(v.stringToSign, `v1\n${v.timestamp}\n${v.txId}\n${v.body}`, v.name);
    const headers = sign(v.secret, v.txId, BigInt(v.timestamp), Buffer.from(v.body, "utf8"));
    assert.deepEqual(
      headers,
      { "x-twopc-timestamp": v.timestamp, "x-twopc-tx-id": v.txId, "x-twopc-signature": v.signature },
      v.name,
    );
  }
});

test("the verifier answers every documented check", () => {
  assert.equal(doc.maxSkewMs, DEFAULT_MAX_SKEW_MS);
  const secret = doc.vectors[0]?.secret ?? "";
  assert.ok(doc.checks.length >= 15, `${doc.checks.length} checks`);
  for (const c of doc.checks) {
    const header = (n: string) => c.headers[n];
    let got: { txId?: string; code?: string };
    try {
      got = { txId: verify(secret, header, Buffer.from(c.body, "utf8"), c.now, doc.maxSkewMs) };
    } catch (e) {
      assert.ok(e instanceof SignatureError, `${c.name}: ${e}`);
      got = { code: e.code };
    }
    assert.deepEqual(got, c.expect, c.name);
  }
});
