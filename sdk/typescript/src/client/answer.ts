/**
 * A transaction as the API answers it (crates/client/src/outcome.rs): {@link TxAnswer}, read
 * from `POST /transactions` (200, 202, 409) and `GET /transactions/{txId}`, and a page of the
 * pending listing.
 */
import { type Json, type JsonObject, isObject } from "../json.js";
import { ProtocolError } from "./errors.js";

/** The record's statuses (docs/openapi.json, TxStatus). */
export const TX_STATUSES = ["PREPARING", "STAGING", "COMMITTING", "COMMITTED", "ABORTING", "ABORTED"] as const;
export type TxStatus = (typeof TX_STATUSES)[number];

/** What an answer says was decided. */
export const OUTCOMES = ["committed", "aborted", "pending"] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** Why a transaction aborted: a participant's no vote, or `aborted` (its deadline). */
export const ABORT_CODES = [
  "conflict",
  "condition",
  "notFound",
  "invalid",
  "expired",
  "fenced",
  "unreachable",
  "clockSkew",
  "aborted",
] as const;
export type AbortCode = (typeof ABORT_CODES)[number] | (string & {});

/** Whether a new transaction with the same body may commit: the abort came from timing or contention. */
export function isTransient(code: AbortCode): boolean {
  return ["conflict", "expired", "fenced", "unreachable", "clockSkew", "aborted"].includes(code);
}

/** A participant's vote, once recorded. */
export type Vote =
  | { vote: "yes"; mode?: "exclusive" | "reserved" }
  | { vote: "no"; reason: string; message: string };

/** One participant of an answer. */
export interface ParticipantOutcome {
  participant: string;
  /** The item (a table's participant; a custom one has none). */
  key?: JsonObject;
  vote?: Vote;
}

/** Where a transaction stands, as the API answered. */
export interface TxAnswer {
  txId: string;
  status: TxStatus;
  /** `committed` also for a staged commit still STAGING; from the status when absent. */
  outcome: Outcome;
  /** Whether every participant applied it (from the status when absent). */
  applied: boolean;
  participants: ParticipantOutcome[];
  /** Why it aborted (an aborting or aborted transaction's only). */
  abort?: { code: AbortCode; message: string };
  /** The answer's JSON as received (numbers exact). */
  body: JsonObject;
}

/** Whether the transaction is finished (COMMITTED or ABORTED). */
export function isFinished(a: TxAnswer): boolean {
  return a.status === "COMMITTED" || a.status === "ABORTED";
}

const text = (v: Json | undefined): string => (typeof v === "string" ? v : "");

function participantOf(v: Json): ParticipantOutcome {
  const p: ParticipantOutcome = { participant: "" };
  if (!isObject(v)) return p;
  p.participant = text(v.participant);
  if (isObject(v.key)) p.key = v.key;
  if (v.vote === "yes") {
    p.vote = { vote: "yes" };
    if (v.mode === "exclusive" || v.mode === "reserved") p.vote.mode = v.mode;
  } else if (v.vote === "no") {
    p.vote = { vote: "no", reason: text(v.reason), message: text(v.message) };
  }
  return p;
}

function outcomeOf(status: TxStatus): Outcome {
  if (status === "COMMITTING" || status === "COMMITTED") return "committed";
  if (status === "ABORTING" || status === "ABORTED") return "aborted";
  return "pending";
}

/** Reads a transaction answer. */
export function readAnswer(status: number, body: Json | string | undefined): TxAnswer {
  const short = () => JSON.stringify(body)?.slice(0, 200);
  if (!isObject(body)) throw new ProtocolError(status, `not a transaction: ${short()}`);
  const txId = body.txId;
  if (typeof txId !== "string") throw new ProtocolError(status, `no txId in ${short()}`);
  const s = body.status;
  if (!TX_STATUSES.includes(s as TxStatus)) throw new ProtocolError(status, `no transaction status in ${short()}`);
  const txStatus = s as TxStatus;
  let outcome: Outcome = outcomeOf(txStatus);
  if (body.outcome !== undefined) {
    if (!OUTCOMES.includes(body.outcome as Outcome)) {
      throw new ProtocolError(status, `unknown outcome ${JSON.stringify(body.outcome)}`);
    }
    outcome = body.outcome as Outcome;
  }
  const participants = Array.isArray(body.participants) ? body.participants.map(participantOf) : [];
  const answer: TxAnswer = {
    txId,
    status: txStatus,
    outcome,
    applied: typeof body.applied === "boolean" ? body.applied : isFinishedStatus(txStatus),
    participants,
    body,
  };
  if (txStatus === "ABORTING" || txStatus === "ABORTED") answer.abort = abortOf(body, participants);
  return answer;
}

function isFinishedStatus(s: TxStatus): boolean {
  return s === "COMMITTED" || s === "ABORTED";
}

/** The answer's code, else its first no vote's, else `aborted` (the deadline). */
function abortOf(body: JsonObject, participants: ParticipantOutcome[]): { code: AbortCode; message: string } {
  if (typeof body.code === "string") return { code: body.code, message: text(body.message) };
  for (const p of participants) {
    if (p.vote?.vote === "no") return { code: p.vote.reason, message: p.vote.message };
  }
  return { code: "aborted", message: "the transaction was aborted (its deadline passed before it was decided)" };
}

/** A page of the pending listing. */
export interface Pending {
  /** The unfinished transactions, oldest deadline first. */
  transactions: TxAnswer[];
  /** The cursor of the next page; absent on the last. */
  next?: string;
}

export function readPending(body: Json | string | undefined): Pending {
  if (!isObject(body) || !Array.isArray(body.transactions)) {
    throw new ProtocolError(200, `a listing without "transactions": ${JSON.stringify(body)?.slice(0, 200)}`);
  }
  const page: Pending = { transactions: body.transactions.map((t) => readAnswer(200, t)) };
  if (typeof body.next === "string") page.next = body.next;
  else if (body.next !== undefined && body.next !== null) throw new ProtocolError(200, `"next" is not a string`);
  return page;
}
