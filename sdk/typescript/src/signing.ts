/**
 * Signed requests to `http` participants (docs/participants.md, "Signed requests"): the
 * coordinator signs each request with the secret it shares with the service, HMAC-SHA256 over
 * `v1\n<timestamp>\n<txId>\n<body>`; the service refuses one that is unsigned, signed with another
 * secret, for another transaction than its body names, or signed further from its clock than
 * the skew it allows. node:crypto does the HMAC and the constant-time comparison.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

/** When the request was signed (epoch ms, decimal digits). */
export const TIMESTAMP_HEADER = "x-twopc-timestamp";
/** The transaction the request is for (must equal the body's `txId`). */
export const TX_HEADER = "x-twopc-tx-id";
/** `v1=` and the hex HMAC-SHA256. */
export const SIGNATURE_HEADER = "x-twopc-signature";
/** How far a request's time may be from the receiver's clock by default (ms): 5 minutes. */
export const DEFAULT_MAX_SKEW_MS = 300_000;

/** The stable codes of a refused signature (HTTP 401). */
export type SignatureCode =
  | "unsigned"
  | "malformed_signature"
  | "bad_signature"
  | "stale_request"
  | "wrong_transaction";

/** A request whose signature does not hold. */
export class SignatureError extends Error {
  constructor(
    readonly code: SignatureCode,
    message: string,
  ) {
    super(message);
    this.name = "SignatureError";
  }
}

const U64_MAX = (1n << 64n) - 1n;

function mac(secret: Uint8Array | string, timestamp: bigint, txId: string, body: Uint8Array | string): Buffer {
  return createHmac("sha256", secret).update(`v1\n${timestamp}\n${txId}\n`).update(body).digest();
}

/** The three signing headers of a request for `txId` with `body`, signed at `timestamp` (ms). */
export function sign(
  secret: Uint8Array | string,
  txId: string,
  timestamp: number | bigint,
  body: Uint8Array | string,
): Record<string, string> {
  const at = BigInt(timestamp);
  return {
    [TIMESTAMP_HEADER]: at.toString(),
    [TX_HEADER]: txId,
    [SIGNATURE_HEADER]: `v1=${mac(secret, at, txId, body).toString("hex")}`,
  };
}

/**
 * Checks a request's signing headers (`header` looks one up by its lower-case name) against its
 * body at `now` (epoch ms), in the documented order: missing, malformed, mismatched, stale.
 * Returns the signed transaction id; the caller checks it is the body's (`wrong_transaction`).
 */
export function verify(
  secret: Uint8Array | string,
  header: (name: string) => string | undefined,
  body: Uint8Array | string,
  now: number,
  maxSkewMs: number = DEFAULT_MAX_SKEW_MS,
): string {
  const get = (name: string): string => {
    const v = header(name);
    if (v === undefined) throw new SignatureError("unsigned", `the request is not signed: missing ${name}`);
    return v;
  };
  const timestamp = get(TIMESTAMP_HEADER);
  const txId = get(TX_HEADER);
  const signature = get(SIGNATURE_HEADER);
  const signed = /^[0-9]{1,20}$/.test(timestamp) ? BigInt(timestamp) : undefined;
  if (signed === undefined || signed > U64_MAX) {
    throw new SignatureError("malformed_signature", `malformed ${TIMESTAMP_HEADER}`);
  }
  const hex = /^v1=([0-9a-fA-F]{64})$/.exec(signature)?.[1];
  if (hex === undefined) throw new SignatureError("malformed_signature", `malformed ${SIGNATURE_HEADER}`);
  if (!timingSafeEqual(mac(secret, signed, txId, body), Buffer.from(hex, "hex"))) {
    throw new SignatureError("bad_signature", "the signature does not match the request");
  }
  const skew = signed > BigInt(now) ? signed - BigInt(now) : BigInt(now) - signed;
  if (skew > BigInt(maxSkewMs)) {
    throw new SignatureError(
      "stale_request",
      `signed at ${signed}, ${skew} ms from the receiver's clock (at most ${maxSkewMs} ms allowed)`,
    );
  }
  return txId;
}
