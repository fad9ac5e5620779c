/**
 * What a service implements: three hooks, its own business logic (authorise a card in
 * `reserve`, capture it in `confirm`, void it in `cancel`), and how its payload reads.
 */
import type { Json } from "../json.js";
import type { VoteReason } from "./messages.js";

/** One hook call. */
export interface Call<P> {
  /** The transaction's id: with `began`, the transaction each hook is idempotent per. */
  txId: string;
  /**
   * When the transaction began (epoch ms). A transaction is its id and this: an Idempotency-Key
   * used again after its 7-day window names a new transaction under the same id, a later `began`.
   */
  began: number;
  /** The prepare's payload, as the service's `payload` read it. */
  payload: P;
  /**
   * Finish by then (epoch ms): for `reserve` the transaction's deadline, for `confirm` and
   * `cancel` the end of the call's claim (past it the call counts as interrupted and may be
   * made again).
   */
  deadline: number;
}

/** What `reserve` decided: held, or refused with a no vote's reason (nothing held). */
export type Reservation = { held: true } | { held: false; reason: VoteReason; message: string };

/** The answers `reserve` gives. */
export const Reservation = {
  /** The service holds what the payload asks for until `confirm` or `cancel`. */
  held: { held: true } as Reservation,
  /** A business rule refuses it (a card declined, stock short). */
  condition: (message: string): Reservation => ({ held: false, reason: "condition", message }),
  /** The payload is not one the service can use. */
  invalid: (message: string): Reservation => ({ held: false, reason: "invalid", message }),
  /** Something it needs is held by someone else: the client may retry. */
  conflict: (message: string): Reservation => ({ held: false, reason: "conflict", message }),
  /** What it names does not exist. */
  notFound: (message: string): Reservation => ({ held: false, reason: "notFound", message }),
};

/** Thrown by a service's `payload` for a payload it does not read: a no vote, `invalid`. */
export class InvalidPayload extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidPayload";
  }
}

/**
 * A service's business logic, called by the SDK, never by the protocol directly.
 *
 * The SDK calls each hook at most once per transaction and outcome: duplicated and late
 * messages never reach a hook. A hook is called again only when an earlier call of it failed
 * (threw) or was cut off (a crash, a call past its claim) before its result was recorded, so
 * each must be idempotent per transaction: its id and its `began` (both in a gateway's
 * idempotency key; a key used again after its window reuses the id).
 * `confirm` must succeed eventually: the decision is taken. `cancel` may find nothing held
 * (a `reserve` that failed midway).
 */
export interface Hooks<P = Json> {
  /**
   * Reads the prepare's payload (numbers are exact LosslessNumbers). Throw (an
   * {@link InvalidPayload}, say) for one the service does not read: the vote is no, `invalid`,
   * and no hook is called. Absent: the payload as it came.
   */
  payload?(raw: Json): P;
  /** Hold what the payload asks for, or refuse (nothing held). */
  reserve(call: Call<P>): Promise<Reservation>;
  /** Make the held reservation permanent. */
  confirm(call: Call<P>): Promise<void>;
  /** Release the held reservation, or do nothing if none was held. */
  cancel(call: Call<P>): Promise<void>;
}
