/**
 * What can go wrong, named by what the caller can do (crates/client/src/error.rs): the API's
 * refusal with its stable code ({@link ApiError}), an outcome unknown after every retry
 * ({@link Undetermined}: read back with `status`), a timeout, a transport failure, an answer
 * that is not the API's, a wait that ran out, a request that could not be signed or built.
 */
import type { Json } from "../json.js";

/** Every `code` of an error answer this version knows (docs/api.md, "Errors"). */
export const ERROR_CODES = [
  "invalid_request",
  "unknown_participant",
  "invalid_key",
  "duplicate_item",
  "too_many_participants",
  "invalid_operation",
  "invalid_attribute_name",
  "invalid_number",
  "wrong_participant_kind",
  "invalid_payload",
  "duplicate_participant",
  "invalid_for_store",
  "invalid_timeout",
  "invalid_idempotency_key",
  "idempotency_key_reused",
  "invalid_json",
  "invalid_tx_id",
  "invalid_listing",
  "request_too_large",
  "not_found",
  "method_not_allowed",
  "unavailable",
  "invalid_query_string",
  "unsupported_media_type",
  "upgrade_required",
  "invalid_websocket_request",
  "unauthorized",
  "internal",
  "throttled",
  // The operator API's (docs/api.md, "The operator API").
  "invalid_operator_query",
  "item_not_readable",
  "operator_forbidden",
  "operator_token",
  "not_overdue",
  "already_decided",
  "already_ended",
] as const;

/** A code this version knows, or any other string (a later API's). */
export type ErrorCode = (typeof ERROR_CODES)[number] | (string & {});

/** Statuses a request is repeated after: the gateway's throttle and server failures. */
export function retryableStatus(status: number): boolean {
  return [429, 500, 502, 503, 504].includes(status);
}

/** The code of an error answer that carries none (API Gateway's own), by its status. */
export function codeForStatus(status: number): ErrorCode {
  const named: Record<number, ErrorCode> = {
    401: "unauthorized",
    403: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
    429: "throttled",
    503: "unavailable",
  };
  return named[status] ?? (status >= 500 ? "internal" : "invalid_request");
}

/** Every error of the client. */
export abstract class ClientError extends Error {
  /** Whether the same call may succeed if repeated unchanged (with the same idempotency key). */
  abstract get retryable(): boolean;
  /** Whether the request may have been received and acted on. */
  abstract get maybeReceived(): boolean;
}

/** The API answered with an error (`{"code", "message"}`). */
export class ApiError extends ClientError {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    /** The answer as received. */
    readonly body: Json | string | undefined,
  ) {
    super(`${status} ${code}: ${message}`);
    this.name = "ApiError";
  }
  get retryable() {
    return retryableStatus(this.status);
  }
  get maybeReceived() {
    return retryableStatus(this.status) && this.status !== 429; // a throttle ran nothing
  }
}

/**
 * A submit whose outcome is unknown: an attempt may have reached the coordinator and none got
 * an answer. The transaction may exist and even commit: read it with `status(txId)`, or submit
 * the same body again with the same key, never with a new one.
 */
export class Undetermined extends ClientError {
  constructor(
    readonly txId: string,
    readonly idempotencyKey: string,
    readonly last: ClientError,
  ) {
    super(`transaction ${txId} (Idempotency-Key ${JSON.stringify(idempotencyKey)}): outcome unknown after every retry: ${last.message}`, {
      cause: last,
    });
    this.name = "Undetermined";
  }
  get retryable() {
    return true;
  }
  get maybeReceived() {
    return true;
  }
}

/** No answer within the per-attempt timeout. */
export class Timeout extends ClientError {
  constructor(readonly afterMs: number) {
    super(`no answer within ${afterMs} ms`);
    this.name = "Timeout";
  }
  get retryable() {
    return true;
  }
  get maybeReceived() {
    return true;
  }
}

/** The request could not be sent or its answer not read. */
export class TransportError extends ClientError {
  constructor(
    message: string,
    private readonly received: boolean,
    cause?: unknown,
  ) {
    super(message, { cause });
    this.name = "TransportError";
  }
  get retryable() {
    return true;
  }
  get maybeReceived() {
    return this.received;
  }
}

/** An answer that is not the API's (a success that is not a transaction, say). */
export class ProtocolError extends ClientError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(`unexpected answer ${status}: ${message}`);
    this.name = "ProtocolError";
  }
  get retryable() {
    return false;
  }
  get maybeReceived() {
    return false;
  }
}

/** `wait` ran out of time while the transaction is unfinished (it will finish: ask again later). */
export class Unfinished extends ClientError {
  constructor(
    readonly txId: string,
    readonly status: string,
    readonly waitedMs: number,
  ) {
    super(`transaction ${txId} is still ${status} after ${waitedMs} ms`);
    this.name = "Unfinished";
  }
  get retryable() {
    return false;
  }
  get maybeReceived() {
    return false;
  }
}

/** The request could not be signed (no credentials, no region). */
export class SigningError extends ClientError {
  constructor(message: string, cause?: unknown) {
    super(`signing: ${message}`, { cause });
    this.name = "SigningError";
  }
  get retryable() {
    return false;
  }
  get maybeReceived() {
    return false;
  }
}

/** Unusable input, refused before anything was sent (a base URL, a key, a number). */
export class InvalidInput extends ClientError {
  constructor(message: string) {
    super(message);
    this.name = "InvalidInput";
  }
  get retryable() {
    return false;
  }
  get maybeReceived() {
    return false;
  }
}
