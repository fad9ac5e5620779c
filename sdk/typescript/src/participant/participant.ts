/**
 * The driver, as the Rust SDK's (crates/participant-sdk/src/participant/): prepare, commit,
 * abort and inquiry as the coordinator sends them, and the sweep of states whose coordinator
 * went silent. Each reads the transaction's state, decides from the phase found
 * (state.ts), claims the hook call with a conditional write, calls the hook, and records its
 * result with another: so each hook runs at most once per transaction and outcome, a duplicate
 * is answered from the record, an abort before its prepare fences the prepare out.
 */
import { type Json, canonical } from "../json.js";
import type { Call, Hooks, Reservation } from "./hooks.js";
import {
  type CompleteReply,
  type CompleteRequest,
  type InquireReply,
  type InquireRequest,
  type PrepareReply,
  type PrepareRequest,
  YES,
  no,
} from "./messages.js";
import {
  type Phase,
  type TxState,
  asOf,
  claimLive,
  ended,
  first,
  inquiryPlan,
  isTerminal,
  moved,
} from "./state.js";
import { type StateStore, StoreError, type TxLog, type Written } from "./store.js";

/** How long a `confirm` or `cancel` call may take by default (ms). */
export const DEFAULT_CLAIM_MS = 30_000;
/** Most states one sweep resolves by default. */
export const SWEEP_LIMIT = 100;

/** Another call of the same hook for the transaction is under way (HTTP 503 `busy`). */
export class Busy extends Error {
  constructor(
    readonly txId: string,
    readonly phase: Phase,
    readonly until: number,
  ) {
    super(`transaction ${txId}: a ${phase} call is under way until ${until}`);
    this.name = "Busy";
  }
}

/** A hook threw or ran past its time: called again by the next message (HTTP 500 `hook_failed`). */
export class HookFailed extends Error {
  constructor(
    readonly hook: "reserve" | "confirm" | "cancel",
    readonly txId: string,
    cause: unknown,
  ) {
    super(`${hook} of transaction ${txId} failed: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
    });
    this.name = "HookFailed";
  }
}

/** What resolving an overdue state did. */
export type Resolved = "left" | "confirmed" | "cancelled" | "violation";

export type Logger = (level: "info" | "warn" | "error", message: string, fields: Record<string, unknown>) => void;

/** Warnings and errors as JSON lines on stderr. */
export const stderrLogger: Logger = (level, message, fields) => {
  if (level !== "info") console.error(JSON.stringify({ level, message, ...fields }));
};

export interface ParticipantOptions<P> {
  hooks: Hooks<P>;
  /** Where each transaction's state is kept (`DynamoStates`, or `MemoryStates` in tests). */
  states: StateStore;
  /** The coordinator's records, read by the sweep (`DynamoTxLog`); without it the sweep only takes over interrupted calls. */
  log?: TxLog;
  /** The clock (epoch ms); tests move their own. */
  now?: () => number;
  /** How long a `confirm` or `cancel` call may take (ms, default 30 s). */
  claimMs?: number;
  logger?: Logger;
}

type Step = { reply: CompleteReply } | { again: TxState | undefined };
type Decision = "commit" | "abort";

const violation = (message: string): CompleteReply => ({ result: "violation", message });

export class Participant<P = Json> {
  readonly hooks: Hooks<P>;
  readonly states: StateStore;
  readonly claimMs: number;
  private readonly log: TxLog | undefined;
  private readonly logger: Logger;
  readonly now: () => number;

  constructor(options: ParticipantOptions<P>) {
    this.hooks = options.hooks;
    this.states = options.states;
    this.log = options.log;
    this.now = options.now ?? Date.now;
    this.claimMs = options.claimMs ?? DEFAULT_CLAIM_MS;
    this.logger = options.logger ?? stderrLogger;
  }

  /** Prepare: `reserve` once, yes or no; a duplicate gets the same answer without a call. */
  async prepare(req: PrepareRequest): Promise<PrepareReply> {
    const now = this.now();
    if (now >= req.deadline) return no("expired", `the transaction's deadline passed ${now - req.deadline} ms ago`);
    if (req.payload === undefined) {
      return no("invalid", "no payload: this participant takes a payload, not an operation");
    }
    const claimed = await this.claimReserve(req, req.payload, now);
    if ("reply" in claimed) return claimed.reply;
    const outcome = await this.reserve(req, req.payload);
    const [next, vote] = await this.voteOf(claimed.claim, outcome);
    return this.recordVote(req, claimed.claim, next, vote);
  }

  /** Commit: `confirm` once; a duplicate is `alreadyDone`; a commit without a yes vote a violation. */
  commit(req: CompleteRequest): Promise<CompleteReply> {
    return this.finish(req.txId, "commit", req);
  }

  /** Abort: `cancel` once if held; an abort before its prepare is recorded so the prepare is refused. */
  abort(req: CompleteRequest): Promise<CompleteReply> {
    return this.finish(req.txId, "abort", req);
  }

  /** Inquiry (the staged commit's recovery): answers, or with `prevent` prevents by one write first. */
  async inquire(req: InquireRequest): Promise<InquireReply> {
    let found = asOf(await this.states.get(req.txId), req.began);
    for (let i = 0; i < 6; i++) {
      const now = this.now();
      const held = found.own?.payload;
      const otherPart = held !== undefined && req.payload !== undefined && canonical(held) !== canonical(req.payload);
      const plan = inquiryPlan(found.own?.phase, req.prevent === true, otherPart);
      let written: Written;
      if ("answer" in plan) return { inquiry: plan.answer };
      if (plan.write === "recordAborted") {
        [written] = await this.createOver(first(req.txId, "aborted", req.deadline, req.began, now), found.former);
      } else if (found.own) {
        written = await this.states.replace(moved(found.own, "cancelling", now, now));
      } else {
        written = { done: false, found: undefined };
      }
      if (written.done) {
        this.logger("info", "staged transaction prevented here", { txId: req.txId });
        return { inquiry: "prevented" };
      }
      found = asOf(written.found, req.began);
    }
    throw new StoreError(`inquiry about transaction ${req.txId}: its state kept changing under it`, true);
  }

  /** Resolves one state whose coordinator may have gone silent, by the transaction's record. */
  async resolve(txId: string): Promise<Resolved> {
    const state = await this.states.get(txId);
    if (!state) return "left";
    let decision: Decision;
    if (state.phase === "confirming") decision = "commit";
    else if (state.phase === "cancelling") decision = "abort";
    else if (state.phase === "reserved" || state.phase === "reserving") {
      const follow = await this.recordSays(state);
      if (follow === "left" || follow === "violation") return follow;
      decision = follow;
    } else return "left";
    const reply = await this.finish(txId, decision, undefined);
    if (reply.result === "violation") return "violation";
    return decision === "commit" ? "confirmed" : "cancelled";
  }

  /** One pass over the unfinished states past their deadline (at most `limit`). */
  async sweep(limit: number = SWEEP_LIMIT): Promise<Array<[string, Resolved]>> {
    const out: Array<[string, Resolved]> = [];
    for (const state of await this.states.overdue(this.now(), limit)) {
      try {
        out.push([state.txId, await this.resolve(state.txId)]);
      } catch (e) {
        if (!(e instanceof Busy)) throw e;
        out.push([state.txId, "left"]);
      }
    }
    return out;
  }

  /** Sweeps every `everyMs` while the process runs (a long-running service; on Lambda, schedule `sweep`). */
  startSweeper(everyMs = 5_000): { stop(): void } {
    let running = false;
    const timer = setInterval(() => {
      if (running) return;
      running = true;
      this.sweep()
        .then((done) => done.length > 0 && this.logger("info", "swept", { resolved: done.length }))
        .catch((e: unknown) => this.logger("warn", "sweep failed; the next one retries", { error: String(e) }))
        .finally(() => (running = false));
    }, everyMs);
    timer.unref();
    return { stop: () => clearInterval(timer) };
  }

  // --- prepare ------------------------------------------------------------------------------

  /** Claims the `reserve` call with a conditional write, or answers from the state found. */
  private async claimReserve(
    req: PrepareRequest,
    payload: Json,
    now: number,
  ): Promise<{ claim: TxState } | { reply: PrepareReply }> {
    let found = asOf(await this.states.get(req.txId), req.began);
    for (;;) {
      const reply = answerPrepare(found.own, payload, now);
      if (reply) return { reply };
      const [written, claim] = await this.createOver(
        { ...first(req.txId, "reserving", req.deadline, req.began, now), payload, claimedUntil: req.deadline },
        found.former,
      );
      if (written.done) return { claim };
      found = asOf(written.found, req.began);
    }
  }

  /** Reads the payload as the service's and calls `reserve` within the deadline. */
  private async reserve(req: PrepareRequest, raw: Json): Promise<{ ok: Reservation } | { error: unknown }> {
    let payload: P;
    try {
      payload = this.hooks.payload ? this.hooks.payload(raw) : (raw as P);
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      return { ok: { held: false, reason: "invalid", message: `the payload is not one this participant reads: ${why}` } };
    }
    try {
      const call = { txId: req.txId, began: req.began, payload, deadline: req.deadline };
      return { ok: await this.within(req.deadline, "reserve", () => this.hooks.reserve(call)) };
    } catch (error) {
      return { error };
    }
  }

  /** The state to record after `reserve` and its vote; a failed call ends its claim and throws. */
  private async voteOf(
    claim: TxState,
    outcome: { ok: Reservation } | { error: unknown },
  ): Promise<[TxState, PrepareReply]> {
    const now = this.now();
    if ("error" in outcome) {
      const w = await this.states.replace(moved(claim, "reserving", now, now));
      if (!w.done) this.logger("warn", "the failed reserve's state moved meanwhile", { txId: claim.txId });
      throw new HookFailed("reserve", claim.txId, outcome.error);
    }
    const r = outcome.ok;
    if (r.held) return [moved(claim, "reserved", undefined, now), YES];
    const next = { ...moved(claim, "refused", undefined, now), refusal: { reason: r.reason, message: r.message } };
    return [next, no(r.reason, r.message)];
  }

  /** Records the vote over the claim; if the claim was ended under the call, releases and refuses. */
  private async recordVote(
    req: PrepareRequest,
    claim: TxState,
    next: TxState,
    vote: PrepareReply,
  ): Promise<PrepareReply> {
    const written = await this.states.replace(next);
    if (written.done) return vote;
    // Ended under the call (an inquiry's prevent, or an abort that found it expired): the
    // transaction is being cancelled, and what the call held must go too.
    this.logger("warn", "reserve finished after its claim was ended", { txId: req.txId });
    if (vote.vote === "yes") await this.cancelLateHold(claim, written.found);
    if (this.now() < req.deadline) return no("fenced", "this transaction was prevented here while its reserve ran");
    return no("expired", "the reserve finished after the transaction's deadline");
  }

  /** Releases what a `reserve` held after its claim was ended (`found`: the state then). */
  private async cancelLateHold(claim: TxState, found: TxState | undefined): Promise<void> {
    const now = this.now();
    if (found?.phase === "cancelling" && !claimLive(found, now)) {
      try {
        const reply = await this.finish(claim.txId, "abort", undefined);
        if (reply.result === "done") return;
        this.logger("warn", "the late hold's cancel", { txId: claim.txId, reply });
      } catch (e) {
        if (!(e instanceof Busy)) throw e;
      }
    }
    await this.callHook("cancel", claim, now + this.claimMs);
  }

  // --- commit and abort ---------------------------------------------------------------------

  /** Carries out `decision`; `req` is the message, if any (the sweep never writes a missing state). */
  private async finish(txId: string, decision: Decision, req: CompleteRequest | undefined): Promise<CompleteReply> {
    let found = asOf(await this.states.get(txId), req?.began);
    for (;;) {
      const now = this.now();
      let step: Step;
      const own = found.own;
      if (own === undefined) step = await this.finishUnseen(txId, decision, req, now, found.former);
      else {
        const reply = answerFinish(txId, own, decision, now);
        step = reply ? { reply } : await this.callAndRecord(own, decision, now);
      }
      if ("reply" in step) return step.reply;
      found = asOf(step.again, req?.began);
    }
  }

  /** No state: an abort is recorded (its prepare is then fenced out); a commit is a violation. */
  private async finishUnseen(
    txId: string,
    decision: Decision,
    req: CompleteRequest | undefined,
    now: number,
    former: TxState | undefined,
  ): Promise<Step> {
    if (decision === "commit" || req === undefined) {
      return { reply: this.violation(txId, `${decision} of a transaction never prepared here`) };
    }
    const [written] = await this.createOver(first(txId, "aborted", req.deadline, req.began, now), former);
    return written.done ? { reply: { result: "done" } } : { again: written.found };
  }

  /**
   * Writes `state`, a transaction's first: created where its id holds none, or written over
   * `former`, a former transaction's under the same id (its Idempotency-Key used again after its
   * window), once that one is finished; returns what it wrote (its revision follows the former's).
   * An unfinished former state, which the protocol never leaves behind (its record ended only once
   * this participant answered), fails the step, to be retried; a former state that began later is
   * a successor's, so this message is a late one of a transaction long ended: refused, nothing written.
   */
  private async createOver(state: TxState, former: TxState | undefined): Promise<[Written, TxState]> {
    if (former === undefined) return [await this.states.create(state), state];
    const what = `transaction ${state.txId}: a state (${former.phase}) of another transaction under this id, began ${former.began}`;
    if (former.began > state.began) throw new StoreError(`${what}, later than this message's ${state.began}`, false);
    if (!isTerminal(former.phase)) throw new StoreError(`${what}, still unfinished`, true);
    this.logger("info", "state of a former transaction under this id replaced (its key used again)", {
      txId: state.txId,
      formerBegan: former.began,
    });
    const over = { ...state, revision: former.revision + 1 };
    return [await this.states.replace(over), over];
  }

  /** Claims the call (or takes over an interrupted one), calls the hook, records its end. */
  private async callAndRecord(state: TxState, decision: Decision, now: number): Promise<Step> {
    const [calling, done, hook] =
      decision === "commit"
        ? (["confirming", "confirmed", "confirm"] as const)
        : (["cancelling", "cancelled", "cancel"] as const);
    const until = now + this.claimMs;
    const claim = moved(state, calling, until, now);
    const claimed = await this.states.replace(claim);
    if (!claimed.done) return { again: claimed.found };
    await this.callHook(hook, claim, until);
    const written = await this.states.replace(moved(claim, done, undefined, this.now()));
    if (written.done) return { reply: { result: "done" } };
    // Our claim was taken over after it expired: the hook ran twice. Answer as the state says.
    this.logger("warn", "the call outlived its claim", { txId: state.txId, hook });
    return { again: written.found };
  }

  /** Calls `confirm` or `cancel` for the claimed state within its claim; a failure ends the claim. */
  private async callHook(hook: "confirm" | "cancel", state: TxState, until: number): Promise<void> {
    let payload: P;
    try {
      const raw = state.payload ?? null;
      payload = this.hooks.payload ? this.hooks.payload(raw) : (raw as P);
    } catch (e) {
      // reserve never ran on a payload that does not read: nothing is held to cancel. A confirm
      // fails until a version of the service that reads it runs (the decision stands).
      if (hook === "cancel") return;
      throw new HookFailed(hook, state.txId, e);
    }
    const call: Call<P> = { txId: state.txId, began: state.began, payload, deadline: until };
    try {
      await this.within(until, hook, () => (hook === "confirm" ? this.hooks.confirm(call) : this.hooks.cancel(call)));
    } catch (e) {
      const now = this.now(); // end the claim now, so the next message calls it again at once
      await this.states.replace(moved(state, state.phase, now, now)).catch(() => undefined);
      throw new HookFailed(hook, state.txId, e);
    }
  }

  // --- the sweep ----------------------------------------------------------------------------

  /** What the record says to do with a held (or reserving) state. */
  private async recordSays(state: TxState): Promise<Decision | "left" | "violation"> {
    if (!this.log) return "left";
    const status = await this.log.status(state.txId);
    switch (status) {
      case "COMMITTING":
        if (state.phase === "reserved") return "commit";
        break;
      case "ABORTING":
      case "ABORTED":
        return "abort";
      case "COMMITTED":
        break; // every participant acknowledged before COMMITTED: this state contradicts it
      default:
        // No record, PREPARING or STAGING: the coordinator (or its sweeper, past the deadline)
        // decides; never decided here.
        return "left";
    }
    this.logger("error", "the record's decision contradicts this participant's state", {
      txId: state.txId,
      phase: state.phase,
      status,
    });
    return "violation";
  }

  /** Runs a hook until `until` (epoch ms): past it, the call counts as failed. */
  private async within<T>(until: number, hook: string, call: () => Promise<T>): Promise<T> {
    const left = Math.max(0, until - this.now());
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${hook} did not finish within ${left} ms`)), left);
    });
    try {
      return await Promise.race([call(), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private violation(txId: string, what: string): CompleteReply {
    this.logger("error", "protocol violation", { txId, what });
    return violation(`transaction ${txId}: ${what}`);
  }
}

/** What the state found answers a prepare of `payload` (`undefined`: none, claim the call). */
function answerPrepare(found: TxState | undefined, payload: Json, now: number): PrepareReply | undefined {
  if (!found) return undefined;
  if (found.phase === "refused") return no(found.refusal?.reason ?? "invalid", found.refusal?.message ?? "");
  if (found.phase === "reserving") {
    const what = claimLive(found, now) ? "is under way" : "was interrupted";
    return no("conflict", `a prepare of this transaction ${what}`);
  }
  const end = ended(found.phase);
  if (end) return no("fenced", `this transaction already ended here (${end})`);
  // Held: a duplicate is a retry; one with another payload is not (numbers compared by value).
  if (canonical(found.payload ?? null) !== canonical(payload)) {
    return no(
      "invalid",
      "this transaction holds this participant already with another payload: refused, what it holds keeps its payload",
    );
  }
  return YES;
}

/** What the state found answers a decision (`undefined`: claim the call); a live claim is busy. */
function answerFinish(txId: string, state: TxState, decision: Decision, now: number): CompleteReply | undefined {
  const v = (what: string) => violation(`transaction ${txId}: ${what}`);
  const { phase } = state;
  const claimed =
    (phase === "confirming" && decision === "commit") ||
    (phase === "cancelling" && decision === "abort") ||
    (phase === "reserving" && decision === "abort");
  if (phase === "reserving" && decision === "commit") return v("commit of a transaction that never voted yes");
  if (phase === "confirming" && decision === "abort") return v("abort of a transaction being confirmed");
  if (phase === "cancelling" && decision === "commit") return v("commit of a transaction being cancelled");
  if (claimed && claimLive(state, now)) throw new Busy(txId, phase, state.claimedUntil ?? now);
  if (claimed || phase === "reserved") return undefined;
  if (decision === "commit") {
    return phase === "confirmed" ? { result: "alreadyDone" } : v(`commit of a transaction ${phase} here`);
  }
  return phase === "confirmed" ? v("abort of a transaction committed here") : { result: "alreadyDone" };
}
