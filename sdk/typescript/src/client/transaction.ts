/**
 * A transaction to submit: {@link Transaction} (participants, timeout, wait) and {@link Op} (the
 * operation language, docs/api.md), written as the body of `POST /transactions`. Numbers are
 * exact: given as text, bigints, LosslessNumbers or Decimals, written as their digits.
 */
import { type Exact, type Json, type JsonObject, LosslessNumber, exact } from "../json.js";

/** A comparison of `require`. */
export type Comparator = "eq" | "ne" | "lt" | "lte" | "gt" | "gte";

/** A key attribute's value: a string or an exact number. */
export type KeyValue = string | Exact;

/** An item's key, `{name: value}` (two entries for a table with a sort key). */
export type Key = Record<string, KeyValue>;

/** A one-attribute key. */
export function key(name: string, value: KeyValue): Key {
  return { [name]: value };
}

/** A value of `set`, `put` or `require`: JSON, numbers exact. */
export type Value = Json | bigint | Exact;

function keyJson(k: Key): JsonObject {
  return Object.fromEntries(Object.entries(k).map(([n, v]) => [n, typeof v === "string" ? v : exact(v)]));
}

/** `-amount`, keeping its spelling (`25.50` → `-25.50`). */
function negate(amount: LosslessNumber): LosslessNumber {
  const t = amount.value;
  return new LosslessNumber(t.startsWith("-") ? t.slice(1) : `-${t}`);
}

/** An operation on one item, built step by step (the coordinator validates it). */
export class Op {
  private readonly body: { [k: string]: unknown } = {};

  private section(name: string): { [k: string]: unknown } {
    return (this.body[name] ??= {}) as { [k: string]: unknown };
  }

  /** `add`: change a number by a signed amount (an absent attribute counts as 0). */
  static add(name: string, amount: Exact): Op {
    return new Op().add(name, amount);
  }

  /** Takes `amount` from a number that must stay at or above zero: `add -amount`, `require gte amount`. */
  static debit(name: string, amount: Exact): Op {
    const a = exact(amount);
    return new Op().add(name, negate(a)).require(name, "gte", a);
  }

  /** Adds `amount` to a number. */
  static credit(name: string, amount: Exact): Op {
    return new Op().add(name, amount);
  }

  /** `set`: an attribute to a value. */
  static set(name: string, value: Value): Op {
    return new Op().set(name, value);
  }

  /** `put`: a whole new item (besides its key); the item must not exist yet. */
  static put(item: Record<string, Value>): Op {
    const op = new Op();
    op.body.put = item;
    return op;
  }

  /** `delete`: the item. */
  static delete(): Op {
    const op = new Op();
    op.body.delete = true;
    return op;
  }

  /** Also `add` to a number. */
  add(name: string, amount: Exact): Op {
    this.section("add")[name] = exact(amount);
    return this;
  }

  /** Also `set` an attribute. */
  set(name: string, value: Value): Op {
    this.section("set")[name] = value;
    return this;
  }

  /** Also `remove` an attribute. */
  remove(name: string): Op {
    ((this.body.remove ??= []) as string[]).push(name);
    return this;
  }

  /** `require`: the attribute compares so to `value` (numbers exact), or the vote is no (`condition`). */
  require(name: string, cmp: Comparator, value: Value): Op {
    this.section("require")[name] = { [cmp]: value };
    return this;
  }

  /** `require`: the attribute is present. */
  requireExists(name: string): Op {
    this.section("require")[name] = "exists";
    return this;
  }

  /** `require`: the attribute is absent. */
  requireNotExists(name: string): Op {
    this.section("require")[name] = "notExists";
    return this;
  }

  /** The operation as the API reads it. */
  toJSON(): unknown {
    return this.body;
  }
}

/** A transaction: what each participant does, all or nothing. */
export class Transaction {
  private readonly participants: unknown[] = [];
  private timeout: number | undefined;
  private applied = false;

  /** Prepare must be decided within this many milliseconds (the API's default otherwise). */
  timeoutMs(ms: number): Transaction {
    this.timeout = ms;
    return this;
  }

  /** Be answered once every participant applied the outcome (`"wait": "applied"`). */
  waitApplied(): Transaction {
    this.applied = true;
    return this;
  }

  /** An item of a table's service: its key, and what to do to it. */
  table(participant: string, k: Key, op: Op): Transaction {
    this.participants.push({ participant, key: keyJson(k), op });
    return this;
  }

  /** A service with its own logic (a custom participant), given its work as JSON. */
  custom(participant: string, payload: Value | Record<string, Value>): Transaction {
    this.participants.push({ participant, payload });
    return this;
  }

  /** The body of `POST /transactions`. */
  toJSON(): unknown {
    return {
      participants: this.participants,
      ...(this.timeout !== undefined && { timeoutMs: this.timeout }),
      ...(this.applied && { wait: "applied" }),
    };
  }
}
