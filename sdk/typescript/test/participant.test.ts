// The participant's protocol in process, as the Rust kit's checks (crates/participant-sdk
// conformance): each message's answer, each hook's count, and the checks the HTTP runner cannot
// play (racing copies, failed and interrupted calls, a prevent during a prepare, the sweep).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import {
  Busy,
  type Call,
  HookFailed,
  type Hooks,
  type Json,
  MemoryStates,
  MemoryTxLog,
  Participant,
  type PrepareRequest,
  Reservation,
  moved,
  parseJson,
} from "../src/participant/index.js";

/** Hooks that count their calls, and can be made to wait or fail. */
class Counting implements Hooks<Json> {
  calls = { reserve: 0, confirm: 0, cancel: 0 };
  gate: Promise<void> | undefined;
  failNext: "reserve" | "confirm" | "cancel" | undefined;

  private async run(hook: "reserve" | "confirm" | "cancel"): Promise<void> {
    this.calls[hook]++;
    if (this.gate) await this.gate;
    if (this.failNext === hook) {
      this.failNext = undefined;
      throw new Error(`${hook} failed on purpose`);
    }
  }
  payload(raw: Json): Json {
    if (typeof raw !== "object" || raw === null || !("amount" in raw)) throw new Error("no amount");
    return raw;
  }
  async reserve(_: Call<Json>) {
    await this.run("reserve");
    return Reservation.held;
  }
  async confirm(_: Call<Json>) {
    await this.run("confirm");
  }
  async cancel(_: Call<Json>) {
    await this.run("cancel");
  }
}

function world(claimMs = 30_000) {
  const hooks = new Counting();
  const clock = { now: 1_000_000 };
  const log = new MemoryTxLog();
  const states = new MemoryStates();
  const p = new Participant({ hooks, states, log, now: () => clock.now, claimMs, logger: () => {} });
  const txId = randomUUID();
  const env = { txId, deadline: clock.now + 5_000, began: clock.now, key: {} };
  const prepare: PrepareRequest = { ...env, coordinator: "c", payload: parseJson('{"amount": 12.50}') };
  return { hooks, clock, log, states, p, txId, env, prepare };
}

function gate() {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  return { gate, open };
}

test("prepare reserves once and a duplicate gets the same yes", async () => {
  const { p, hooks, prepare } = world();
  assert.deepEqual(await p.prepare(prepare), { vote: "yes", mode: "exclusive" });
  assert.deepEqual(await p.prepare({ ...prepare, payload: parseJson('{"amount": 12.5}') }), {
    vote: "yes",
    mode: "exclusive",
  });
  assert.equal(hooks.calls.reserve, 1, "12.50 and 12.5 are one payload: the duplicate calls nothing");
  const other = await p.prepare({ ...prepare, payload: parseJson('{"amount": 13}') });
  assert.equal(other.vote === "no" && other.reason, "invalid", "another payload for the same transaction");
});

test("an invalid payload is a no vote that holds nothing, and is answered again the same", async () => {
  const { p, hooks, prepare, env } = world();
  const refused = await p.prepare({ ...prepare, payload: parseJson('{"card": 1}') });
  assert.equal(refused.vote === "no" && refused.reason, "invalid");
  assert.deepEqual(await p.prepare({ ...prepare, payload: parseJson('{"card": 1}') }), refused);
  assert.equal(hooks.calls.reserve, 0);
  assert.equal((await p.commit(env)).result, "violation");
  assert.equal((await p.abort(env)).result, "alreadyDone");
  assert.equal(hooks.calls.cancel, 0);
  const none = await p.prepare({ ...prepare, payload: undefined });
  assert.equal(none.vote === "no" && none.reason, "invalid", "no payload at all");
});

test("commit confirms once and a duplicate is already done; a late prepare is fenced", async () => {
  const { p, hooks, prepare, env } = world();
  await p.prepare(prepare);
  assert.deepEqual(await p.commit(env), { result: "done" });
  assert.deepEqual(await p.commit(env), { result: "alreadyDone" });
  assert.equal(hooks.calls.confirm, 1);
  const late = await p.prepare(prepare);
  assert.equal(late.vote === "no" && late.reason, "fenced");
  assert.equal((await p.abort(env)).result, "violation", "an abort after the commit");
  assert.deepEqual(hooks.calls, { reserve: 1, confirm: 1, cancel: 0 });
});

test("a key used again after its window is a new transaction here, under the same id", async () => {
  // GIVEN a transaction committed here, its record long expired (the coordinator's 7 days)
  const { p, hooks, prepare, env, clock, states, txId } = world();
  await p.prepare(prepare);
  assert.deepEqual(await p.commit(env), { result: "done" });
  // WHEN the same Idempotency-Key names a new transaction: the same id, a later `began`
  clock.now += 8 * 24 * 3_600_000;
  const again = { ...env, deadline: clock.now + 5_000, began: clock.now };
  // THEN the former's state refuses and answers nothing for it: it holds, commits, and is held till then
  assert.deepEqual(await p.inquire({ ...again, prevent: false }), { inquiry: "open" });
  assert.deepEqual(await p.prepare({ ...prepare, ...again }), { vote: "yes", mode: "exclusive" });
  assert.deepEqual(await p.inquire({ ...again, prevent: false }), { inquiry: "held" });
  assert.deepEqual(await p.commit(again), { result: "done" });
  assert.deepEqual(hooks.calls, { reserve: 2, confirm: 2, cancel: 0 });
  assert.equal((await states.get(txId))?.began, again.began);
  // and the former's late messages are answered by nothing of the new one's
  assert.equal((await p.commit(env)).result, "violation", "the former's state was replaced");
  await assert.rejects(p.abort(env), /later than this message/);
  assert.equal((await states.get(txId))?.phase, "confirmed", "a late abort replaces nothing");
});

test("an abort or a prevent of a key used again is recorded over the former's state", async () => {
  for (const prevent of [false, true]) {
    const { p, hooks, prepare, env, clock } = world();
    await p.prepare(prepare);
    await p.commit(env);
    clock.now += 8 * 24 * 3_600_000;
    const again = { ...env, deadline: clock.now + 5_000, began: clock.now };
    if (prevent) assert.deepEqual(await p.inquire({ ...again, prevent }), { inquiry: "prevented" });
    else assert.deepEqual(await p.abort(again), { result: "done" });
    const late = await p.prepare({ ...prepare, ...again });
    assert.equal(late.vote === "no" && late.reason, "fenced", `prevent: ${prevent}`);
    assert.deepEqual(hooks.calls, { reserve: 1, confirm: 1, cancel: 0 });
  }
});

test("abort cancels once and a duplicate is already done", async () => {
  const { p, hooks, prepare, env } = world();
  await p.prepare(prepare);
  assert.deepEqual(await p.abort(env), { result: "done" });
  assert.deepEqual(await p.abort(env), { result: "alreadyDone" });
  assert.equal((await p.commit(env)).result, "violation", "a commit after the abort");
  assert.equal(hooks.calls.cancel, 1);
});

test("an abort before its prepare holds nothing and refuses the prepare", async () => {
  const { p, hooks, prepare, env } = world();
  assert.deepEqual(await p.abort(env), { result: "done" });
  const late = await p.prepare(prepare);
  assert.equal(late.vote === "no" && late.reason, "fenced");
  assert.deepEqual(hooks.calls, { reserve: 0, confirm: 0, cancel: 0 });
  assert.equal((await p.commit(env)).result, "violation");
});

test("a prepare past its deadline is refused and holds nothing", async () => {
  const { p, hooks, prepare, clock, states, txId } = world();
  clock.now = prepare.deadline;
  const late = await p.prepare(prepare);
  assert.equal(late.vote === "no" && late.reason, "expired");
  assert.equal(hooks.calls.reserve, 0);
  assert.equal(await states.get(txId), undefined);
});

test("a prevent before its prepare refuses the prepare; a held one stays held and committable", async () => {
  const a = world();
  assert.deepEqual(await a.p.inquire({ ...a.env, prevent: false }), { inquiry: "open" });
  assert.deepEqual(await a.p.inquire({ ...a.env, prevent: true }), { inquiry: "prevented" });
  const late = await a.p.prepare(a.prepare);
  assert.equal(late.vote === "no" && late.reason, "fenced");
  assert.equal(a.hooks.calls.reserve, 0);

  const b = world();
  await b.p.prepare(b.prepare);
  assert.deepEqual(await b.p.inquire({ ...b.env, prevent: true }), { inquiry: "held" });
  assert.deepEqual(await b.p.commit(b.env), { result: "done" });
  assert.deepEqual(await b.p.inquire({ ...b.env, prevent: true }), { inquiry: "committed" });
});

test("an inquiry about another payload than the one held finds it prevented, not held", async () => {
  const { p, prepare, env } = world();
  await p.prepare(prepare);
  // The same payload, numbers spelled otherwise: held.
  const same = parseJson('{"amount": 12.5}');
  assert.deepEqual(await p.inquire({ ...env, payload: same, prevent: false }), { inquiry: "held" });
  // Another (one store reached through two services): prevented, nothing written.
  const other = parseJson('{"amount": 3}');
  for (const prevent of [false, true]) {
    assert.deepEqual(await p.inquire({ ...env, payload: other, prevent }), { inquiry: "prevented" });
  }
  assert.deepEqual(await p.inquire({ ...env, prevent: true }), { inquiry: "held" });
});

test("concurrent duplicates take effect once", async () => {
  const { p, hooks, prepare, env } = world();
  const g = gate();
  hooks.gate = g.gate;
  const first = p.prepare(prepare);
  await new Promise((r) => setImmediate(r));
  const copy = await p.prepare(prepare);
  assert.equal(copy.vote === "no" && copy.reason, "conflict", "a copy while reserve runs holds nothing");
  g.open();
  assert.equal((await first).vote, "yes");
  const c = gate();
  hooks.gate = c.gate; // confirm waits
  const commit = p.commit(env);
  await new Promise((r) => setImmediate(r));
  await assert.rejects(p.commit(env), Busy, "a copy of the commit while confirm runs");
  c.open();
  assert.deepEqual(await commit, { result: "done" });
  assert.deepEqual(await p.commit(env), { result: "alreadyDone" });
  assert.equal(hooks.calls.reserve, 1);
  assert.equal(hooks.calls.confirm, 1);
});

test("a failed call is made good by the next message", async () => {
  const { p, hooks, prepare, env } = world();
  hooks.failNext = "reserve";
  await assert.rejects(p.prepare(prepare), HookFailed);
  const again = await p.prepare(prepare);
  assert.equal(again.vote === "no" && again.reason, "conflict", "a failed reserve is never called again");
  assert.deepEqual(await p.abort(env), { result: "done" });
  assert.equal(hooks.calls.cancel, 1, "its abort cancels at once: the claim was ended");

  const b = world();
  await b.p.prepare(b.prepare);
  b.hooks.failNext = "confirm";
  await assert.rejects(b.p.commit(b.env), HookFailed);
  assert.deepEqual(await b.p.commit(b.env), { result: "done" });
  assert.equal(b.hooks.calls.confirm, 2);
});

test("a prevent during the prepare keeps its late result from holding", async () => {
  const { p, hooks, prepare, env } = world();
  const g = gate();
  hooks.gate = g.gate;
  const deciding = p.prepare(prepare);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(await p.inquire({ ...env, prevent: false }), { inquiry: "open" });
  assert.deepEqual(await p.inquire({ ...env, prevent: true }), { inquiry: "prevented" });
  g.open();
  const vote = await deciding;
  assert.equal(vote.vote === "no" && vote.reason, "fenced");
  assert.equal(hooks.calls.cancel, 1, "what the late reserve held was released");
  assert.deepEqual(await p.abort(env), { result: "alreadyDone" });
  assert.deepEqual(await p.inquire({ ...env, prevent: true }), { inquiry: "prevented" });
});

test("a silent coordinator is resolved by the record, never decided here", async () => {
  const { p, hooks, prepare, clock, log, txId } = world();
  await p.prepare(prepare);
  clock.now = prepare.deadline + 1;
  assert.deepEqual(await p.sweep(), [[txId, "left"]], "no record: left to the coordinator");
  log.records.set(txId, "PREPARING");
  assert.deepEqual(await p.sweep(), [[txId, "left"]], "undecided: left to the coordinator's sweeper");
  log.records.set(txId, "COMMITTING");
  assert.deepEqual(await p.sweep(), [[txId, "confirmed"]]);
  assert.deepEqual(await p.sweep(), [], "finished: not overdue any more");
  assert.equal(hooks.calls.confirm, 1);

  const b = world();
  await b.p.prepare(b.prepare);
  b.clock.now = b.prepare.deadline + 1;
  b.log.records.set(b.txId, "ABORTED");
  assert.deepEqual(await b.p.sweep(), [[b.txId, "cancelled"]]);
  assert.equal(b.hooks.calls.cancel, 1);
});

test("an interrupted call is taken over once its claim expires, never while it may still run", async () => {
  const { p, hooks, prepare, env, clock, states, txId } = world(1_000);
  await p.prepare(prepare);
  const held = await states.get(txId);
  assert.ok(held);
  // A confirm claimed by a process that crashed: its claim runs until now + 1 s.
  assert.ok((await states.replace(moved(held, "confirming", clock.now + 1_000, clock.now))).done);
  await assert.rejects(p.commit(env), Busy);
  assert.equal(hooks.calls.confirm, 0);
  clock.now += 1_000;
  assert.deepEqual(await p.commit(env), { result: "done" });
  assert.equal(hooks.calls.confirm, 1);
});

test("a hook past its time counts as failed, and its claim ends at once", async () => {
  const { p, hooks, prepare, env } = world(20);
  await p.prepare(prepare);
  hooks.gate = new Promise(() => {}); // confirm never returns
  await assert.rejects(p.commit(env), (e: unknown) => e instanceof HookFailed && /within 20 ms/.test(e.message));
  hooks.gate = undefined;
  assert.deepEqual(await p.commit(env), { result: "done" });
  assert.equal(hooks.calls.confirm, 2);
});
