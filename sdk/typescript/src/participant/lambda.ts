/**
 * The Lambda adapter, for the coordinator's `lambda` transport: a handler for the managed
 * Node.js runtime taking `{"action": "prepare"|"commit"|"abort"|"inquire", "request": {...}}`
 * (samples in events/custom-participant-*.json) and answering the reply. A failure is thrown as
 * an error whose `name` (the runtime's `errorType`) is the kind the transport reads, as the
 * Rust SDK's:
 *
 * | error | errorType | the coordinator may assume |
 * | --- | --- | --- |
 * | a copy's hook call is under way | `Retryable` | nothing done: send it again later |
 * | a hook failed, the store failed or was unreachable | `Undetermined` | it may have acted |
 * | not a participant call | `Invalid` | nothing done; repeating will not help |
 * | anything else | `Fatal` | it may have acted |
 *
 * Numbers: the managed runtime parses the event with `JSON.parse` before the handler runs, so
 * a number reaches it as a float. One of up to 15 significant digits comes back exactly (a
 * double holds it); a payload with a longer one is refused (`no`, `invalid`), never rounded.
 * Serve over HTTP where payloads carry such numbers.
 */
import { type Json, LosslessNumber } from "../json.js";
import { InvalidRequest, no, readComplete, readInquire, readPrepare } from "./messages.js";
import { Busy, HookFailed, type Participant } from "./participant.js";
import { StoreError } from "./store.js";

/** The transport's error kinds (crates/function/src/errors.rs). */
export type ErrorKind = "Retryable" | "Undetermined" | "Invalid" | "Fatal";

/** An error the Lambda runtime reports with `errorType` = its kind. */
export class CallError extends Error {
  constructor(kind: ErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = kind;
  }
}

/** The kind of a failed call. */
export function kindOf(e: unknown): ErrorKind {
  if (e instanceof Busy) return "Retryable";
  if (e instanceof HookFailed || (e instanceof StoreError && e.retryable)) return "Undetermined";
  if (e instanceof InvalidRequest) return "Invalid";
  return "Fatal";
}

/** Whether a number read by JSON.parse is certainly the one sent (at most 15 significant digits). */
export function exactFloat(n: number): boolean {
  if (!Number.isFinite(n)) return false;
  if (Number.isInteger(n)) return Number.isSafeInteger(n);
  const mantissa = String(n).replace(/^-/, "").replace(/e.*$/i, "").replace(".", "");
  return mantissa.replace(/^0+/, "").replace(/0+$/, "").length <= 15;
}

/** An event's JSON with numbers as LosslessNumbers; `inexact` counts numbers that may be rounded. */
function relossless(v: unknown, inexact: { count: number }): Json {
  if (typeof v === "number") {
    if (!exactFloat(v)) inexact.count++;
    return new LosslessNumber(String(v));
  }
  if (v === null || typeof v === "string" || typeof v === "boolean") return v;
  if (Array.isArray(v)) return v.map((x) => relossless(x, inexact));
  if (typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, relossless(x, inexact)]));
  }
  throw new InvalidRequest(`not JSON: ${typeof v}`);
}

/** Answers one invocation (the handler's body, for tests and custom wiring). */
export async function handle<P>(participant: Participant<P>, event: unknown): Promise<unknown> {
  const inexact = { count: 0 };
  const e = event as { action?: unknown; request?: unknown } | null;
  if (typeof e !== "object" || e === null || e.request === undefined) {
    throw new CallError("Invalid", `the event is not a participant call; expected {"action": "prepare"|"commit"|"abort"|"inquire", "request": {...}}`);
  }
  const request = relossless(e.request, inexact);
  try {
    switch (e.action) {
      case "prepare": {
        const req = readPrepare(request);
        if (inexact.count > 0) {
          return no("invalid", "a number of the request has more than 15 significant digits, which the Lambda runtime's JSON.parse may have rounded: serve this participant over HTTP for such numbers");
        }
        return await participant.prepare(req);
      }
      case "commit":
        return await participant.commit(readComplete(request));
      case "abort":
        return await participant.abort(readComplete(request));
      case "inquire":
        return await participant.inquire(readInquire(request));
      default:
        throw new InvalidRequest(`unknown action ${JSON.stringify(e.action)}; expected prepare, commit, abort or inquire`);
    }
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new CallError(kindOf(err), `${String(e.action)}: ${message}`, { cause: err });
  }
}

/** The handler for the managed Node.js runtime: `export const handler = lambdaHandler(participant)`. */
export function lambdaHandler<P>(participant: Participant<P>): (event: unknown) => Promise<unknown> {
  return (event) => handle(participant, event);
}
