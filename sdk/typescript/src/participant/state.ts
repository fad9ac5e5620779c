/**
 * A transaction's state at the participant (one record per transaction id), its legal moves,
 * and the answers each phase gives, as the Rust SDK (crates/participant-sdk/src/state.rs) gives
 * them. A hook call is bracketed by a claimed phase (`reserving`, `confirming`, `cancelling`),
 * written before the call and replaced by its result after, so a duplicate never calls the
 * hook again and a crash leaves a mark the next message or the sweep acts on.
 */
import type { Json } from "../json.js";
import type { VoteReason } from "./messages.js";

/** Where a transaction stands here. */
export type Phase =
  | "reserving" // reserve is being called (claimed)
  | "reserved" // held, voted yes
  | "refused" // reserve refused, voted no; nothing held (terminal)
  | "confirming" // confirm is being called (claimed)
  | "confirmed" // terminal
  | "cancelling" // cancel is being called (claimed)
  | "cancelled" // terminal
  | "aborted"; // aborted (or prevented) before any prepare: a later prepare is fenced (terminal)

/** The phases each phase may move to (a claimed phase to itself: an interrupted call taken over). */
export const NEXT_MOVES: Record<Phase, readonly Phase[]> = {
  reserving: ["reserving", "reserved", "refused", "cancelling"],
  reserved: ["confirming", "cancelling"],
  confirming: ["confirming", "confirmed"],
  cancelling: ["cancelling", "cancelled"],
  refused: [],
  confirmed: [],
  cancelled: [],
  aborted: [],
};

/** The phases a transaction's first write may create. */
export const FIRST: readonly Phase[] = ["reserving", "aborted"];

export function isTerminal(phase: Phase): boolean {
  return NEXT_MOVES[phase].length === 0;
}

export function isClaimed(phase: Phase): boolean {
  return phase === "reserving" || phase === "confirming" || phase === "cancelling";
}

/**
 * A state as the transaction that began at `began` reads it (`undefined`: the sweep, which reads
 * it as it is). A transaction is its id and its `began`: a state under the id with another
 * `began` is a former transaction's (an Idempotency-Key used again after its 7-day window), none
 * of this one's; the new transaction's first write replaces it once it is finished.
 */
export type Found = { own: TxState | undefined; former: TxState | undefined };

export function asOf(s: TxState | undefined, began: number | undefined): Found {
  return s !== undefined && began !== undefined && s.began !== began
    ? { own: undefined, former: s }
    : { own: s, former: undefined };
}

/** One transaction's state, as stored (the attribute names of crates/core/src/layout.rs). */
export interface TxState {
  txId: string;
  phase: Phase;
  /** Bumped by every write; each write is conditional on the one it replaces. */
  revision: number;
  deadline: number;
  began: number;
  /** What prepare carried (absent for an abort that came first). */
  payload?: Json;
  /** In a claimed phase: the hook call counts as interrupted after then (epoch ms). */
  claimedUntil?: number;
  /** In `refused`: why, so a duplicate prepare gets the same answer. */
  refusal?: { reason: VoteReason; message: string };
  updatedAt: number;
}

export function first(txId: string, phase: Phase, deadline: number, began: number, now: number): TxState {
  return { txId, phase, revision: 1, deadline, began, updatedAt: now };
}

/** The state moved to `phase` (claimed until `claim`, if given), one revision on. */
export function moved(s: TxState, phase: Phase, claim: number | undefined, now: number): TxState {
  const next: TxState = { ...s, phase, revision: s.revision + 1, updatedAt: now };
  delete next.claimedUntil;
  if (claim !== undefined) next.claimedUntil = claim;
  return next;
}

/** Whether a claimed phase's hook call is still under way at `now`. */
export function claimLive(s: TxState, now: number): boolean {
  return isClaimed(s.phase) && s.claimedUntil !== undefined && now < s.claimedUntil;
}

/** What an inquiry does with the state found: answer, or prevent with one conditional write. */
export type InquiryPlan =
  | { answer: "held" | "prevented" | "committed" | "open" }
  | { write: "recordAborted" } // no state: record `aborted` (conditional on none)
  | { write: "endClaim" }; // reserve under way: end its claim (reserving → cancelling)

/**
 * The inquiry rule: `held` once reserve's yes is recorded, `committed` once committing,
 * `prevented` once refused or aborted; no state is `open`, or with `prevent` recorded aborted;
 * a reserve still deciding is `open`, or with `prevent` has its claim ended, so its result can
 * never land.
 */
export function inquiryPlan(phase: Phase | undefined, prevent: boolean, otherPart = false): InquiryPlan {
  // Held with another payload (one store reached through two services): no evidence of the
  // part asked about, which can never hold here (the core's `Seen::other_op`).
  if (phase === "reserved" && otherPart) return { answer: "prevented" };
  switch (phase) {
    case undefined:
      return prevent ? { write: "recordAborted" } : { answer: "open" };
    case "reserving":
      return prevent ? { write: "endClaim" } : { answer: "open" };
    case "reserved":
      return { answer: "held" };
    case "confirming":
    case "confirmed":
      return { answer: "committed" };
    case "refused":
    case "cancelling":
    case "cancelled":
    case "aborted":
      return { answer: "prevented" };
  }
}

/** How a phase ended the transaction here, for a late prepare (`fenced`); none if it has not. */
export function ended(phase: Phase): "Committed" | "Aborted" | undefined {
  if (phase === "confirming" || phase === "confirmed") return "Committed";
  if (phase === "cancelling" || phase === "cancelled" || phase === "aborted" || phase === "refused") return "Aborted";
  return undefined;
}
