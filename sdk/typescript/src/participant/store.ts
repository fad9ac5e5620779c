/**
 * The port for the per-transaction state, its errors, and the in-memory store (for tests; the
 * DynamoDB one is dynamo.ts, and one contract suite runs against both).
 */
import type { TxState } from "./state.js";

/** What a conditional write did: written, or lost to the state as it is (`undefined`: none). */
export type Written = { done: true } | { done: false; found: TxState | undefined };

/** A store failure: `retryable` (throttled, unreachable: HTTP 503), or not (HTTP 500). */
export class StoreError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "StoreError";
  }
}

/** Per-transaction state, one entry per transaction id. */
export interface StateStore {
  /** Reads a state (strongly consistent). */
  get(txId: string): Promise<TxState | undefined>;
  /** Writes `state` if the transaction has none yet. */
  create(state: TxState): Promise<Written>;
  /** Writes `state` over the one whose revision is `state.revision - 1`. */
  replace(state: TxState): Promise<Written>;
  /** Unfinished states whose deadline passed before `now`, earliest first, at most `limit`. */
  overdue(now: number, limit: number): Promise<TxState[]>;
}

/** The coordinator's transaction records, read when a coordinator goes silent. */
export interface TxLog {
  /** A transaction's status (`PREPARING`, `STAGING`, `COMMITTING`, ...), `undefined` if no record. */
  status(txId: string): Promise<string | undefined>;
}

// Payloads are never mutated: a shallow copy keeps their exact numbers (LosslessNumber instances).
const copy = (s: TxState): TxState => ({ ...s, ...(s.refusal && { refusal: { ...s.refusal } }) });

/** States in memory (tests, a demo). */
export class MemoryStates implements StateStore {
  private readonly states = new Map<string, TxState>();

  async get(txId: string): Promise<TxState | undefined> {
    const s = this.states.get(txId);
    return s && copy(s);
  }

  async create(state: TxState): Promise<Written> {
    const found = this.states.get(state.txId);
    if (found) return { done: false, found: copy(found) };
    this.states.set(state.txId, copy(state));
    return { done: true };
  }

  async replace(state: TxState): Promise<Written> {
    const found = this.states.get(state.txId);
    if (found?.revision !== state.revision - 1) return { done: false, found: found && copy(found) };
    this.states.set(state.txId, copy(state));
    return { done: true };
  }

  async overdue(now: number, limit: number): Promise<TxState[]> {
    return [...this.states.values()]
      .filter((s) => !["refused", "confirmed", "cancelled", "aborted"].includes(s.phase) && s.deadline < now)
      .sort((a, b) => a.deadline - b.deadline)
      .slice(0, limit)
      .map(copy);
  }
}

/** Records in memory: `set` what the coordinator would have written. */
export class MemoryTxLog implements TxLog {
  readonly records = new Map<string, string>();

  async status(txId: string): Promise<string | undefined> {
    return this.records.get(txId);
  }
}
