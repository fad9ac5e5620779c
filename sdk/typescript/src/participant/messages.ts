/**
 * The messages a participant receives (docs/participant-openapi.json): each request read from
 * exact JSON and checked field by field, unknown fields ignored (a later coordinator may send
 * more); the replies as the wire spells them.
 */
import { type Json, type JsonObject, isLosslessNumber, isObject } from "../json.js";

/** Why a prepare votes no (`unreachable` is the coordinator's own; never sent). */
export type VoteReason = "conflict" | "condition" | "notFound" | "invalid" | "expired" | "fenced" | "clockSkew";

/** What every call carries. */
export interface Envelope {
  /** The transaction, a lower-case UUID. */
  txId: string;
  /** Epoch ms: prepare must be decided by then. */
  deadline: number;
  /** Epoch ms: when the transaction began. */
  began: number;
  /** The item's key (`{}` for a custom participant). */
  key: JsonObject;
}

/** `POST /prepare`. */
export interface PrepareRequest extends Envelope {
  coordinator: string;
  /** What the transaction asks of this service (absent: refused as `invalid`). */
  payload?: Json;
}

/** `POST /commit` and `POST /abort` (`refused`: an abort after this participant's no vote). */
export interface CompleteRequest extends Envelope {
  refused?: boolean;
}

/**
 * `POST /inquire`. `payload`: the one the transaction's request gives this service (absent from
 * an older coordinator: not compared).
 */
export interface InquireRequest extends Envelope {
  prevent?: boolean;
  payload?: Json;
}

/** A prepare's answer. `mode` is always `exclusive`: a custom participant's hold is its own. */
export type PrepareReply = { vote: "yes"; mode: "exclusive" } | { vote: "no"; reason: VoteReason; message: string };

/** A commit's or an abort's answer. */
export type CompleteReply = { result: "done" } | { result: "alreadyDone" } | { result: "violation"; message: string };

/** An inquiry's answer. */
export type InquireReply = { inquiry: "held" | "prevented" | "committed" | "open" };

export const YES: PrepareReply = { vote: "yes", mode: "exclusive" };

export function no(reason: VoteReason, message: string): PrepareReply {
  return { vote: "no", reason, message };
}

/** A request that is not the call's (HTTP 400 `invalid_request`, Lambda `Invalid`). */
export class InvalidRequest extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidRequest";
  }
}

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

function epochMs(body: JsonObject, field: string): number {
  const v = body[field];
  if (!isLosslessNumber(v) || !/^[0-9]+$/.test(v.value) || !Number.isSafeInteger(Number(v.value))) {
    throw new InvalidRequest(`"${field}" must be epoch milliseconds (a non-negative integer)`);
  }
  return Number(v.value);
}

function flag(body: JsonObject, field: string): boolean {
  const v = body[field];
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") throw new InvalidRequest(`"${field}" must be true or false`);
  return v;
}

function envelope(body: Json): Envelope & { body: JsonObject } {
  if (!isObject(body)) throw new InvalidRequest("the body must be a JSON object");
  const txId = body.txId;
  if (typeof txId !== "string" || !UUID.test(txId)) {
    throw new InvalidRequest(`"txId" must be a transaction id (a UUID), got ${JSON.stringify(txId ?? null)}`);
  }
  const key = body.key;
  if (!isObject(key)) throw new InvalidRequest(`"key" must be an object ({} for a custom participant)`);
  return { txId: txId.toLowerCase(), deadline: epochMs(body, "deadline"), began: epochMs(body, "began"), key, body };
}

export function readPrepare(json: Json): PrepareRequest {
  const { body, ...env } = envelope(json);
  if (typeof body.coordinator !== "string") throw new InvalidRequest(`"coordinator" must be a string`);
  const request: PrepareRequest = { ...env, coordinator: body.coordinator };
  if (body.payload !== undefined && body.payload !== null) request.payload = body.payload;
  return request;
}

export function readComplete(json: Json): CompleteRequest {
  const { body, ...env } = envelope(json);
  return { ...env, refused: flag(body, "refused") };
}

export function readInquire(json: Json): InquireRequest {
  const { body, ...env } = envelope(json);
  const request: InquireRequest = { ...env, prevent: flag(body, "prevent") };
  if (body.payload !== undefined && body.payload !== null) request.payload = body.payload;
  return request;
}
