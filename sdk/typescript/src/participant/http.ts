/**
 * The HTTP adapter (node:http): `POST /prepare`, `/commit`, `/abort` and `/inquire` with the
 * JSON the coordinator's `http` transport sends, every request's signature checked first. A
 * refused request gets `{"code", "message"}` with a stable code (docs/participant-openapi.json),
 * checked in the documented order: size, signature (missing, malformed, mismatched, stale),
 * body, transaction id. A 5xx tells the coordinator the call may have acted.
 */
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Json, parseJson, toJson } from "../json.js";
import { DEFAULT_MAX_SKEW_MS, SignatureError, verify } from "../signing.js";
import {
  type InquireRequest,
  InvalidRequest,
  type PrepareRequest,
  readComplete,
  readInquire,
  readPrepare,
} from "./messages.js";
import { Busy, HookFailed, type Participant } from "./participant.js";
import { StoreError } from "./store.js";

export interface HttpOptions {
  /** The secret shared with the coordinator (`TWOPC_HTTP_SIGNING_SECRET`; at least 16 bytes). */
  secret: string | Uint8Array;
  /** How far a request's signing time may be from this clock (ms; default 5 minutes). */
  maxSkewMs?: number;
  /** The largest body taken (default 64 KiB). */
  maxBodyBytes?: number;
}

/** An answer: status and JSON body. */
export interface Answer {
  status: number;
  body: unknown;
}

const refuse = (status: number, code: string, message: string): Answer => ({ status, body: { code, message } });

/** A failed call as its answer: busy and an unavailable store 503, a hook 500, anything else 500. */
export function failed(e: unknown): Answer {
  const message = e instanceof Error ? e.message : String(e);
  if (e instanceof Busy) return refuse(503, "busy", message);
  if (e instanceof StoreError && e.retryable) return refuse(503, "unavailable", message);
  if (e instanceof HookFailed) return refuse(500, "hook_failed", message);
  if (e instanceof InvalidRequest) return refuse(400, "invalid_request", message);
  return refuse(500, "internal", message);
}

/** The secret in `TWOPC_HTTP_SIGNING_SECRET`: required, at least 16 bytes. */
export function secretFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  const secret = env.TWOPC_HTTP_SIGNING_SECRET ?? "";
  if (Buffer.byteLength(secret) < 16) {
    throw new Error(
      "TWOPC_HTTP_SIGNING_SECRET: set it to the secret the coordinator signs requests with (at least 16 bytes, e.g. `openssl rand -hex 32`): the participant refuses unsigned requests",
    );
  }
  return secret;
}

/**
 * Answers one request (method, path, lower-case headers, raw body): what the server below
 * does for each, callable on its own (a framework of your own, a test). The call is the path's
 * last segment, so a base URL with a prefix (`/Prod/twopc`) works.
 */
export async function answer<P>(
  participant: Participant<P>,
  options: HttpOptions,
  method: string,
  path: string,
  header: (name: string) => string | undefined,
  body: Buffer,
): Promise<Answer> {
  const call = path.replace(/\/+$/, "").split("/").pop() ?? "";
  const routes = ["prepare", "commit", "abort", "inquire"];
  if (!routes.includes(call)) {
    return refuse(404, "not_found", `no such call: POST /prepare, /commit, /abort or /inquire`);
  }
  if (method !== "POST") return refuse(405, "method_not_allowed", `${path} takes POST`);
  const max = options.maxBodyBytes ?? 64 * 1024;
  if (body.length > max) return refuse(413, "request_too_large", `the body is over ${max} bytes`);
  let signed: string;
  let json: Json;
  try {
    signed = verify(options.secret, header, body, participant.now(), options.maxSkewMs ?? DEFAULT_MAX_SKEW_MS);
    json = parseJson(body.toString("utf8"));
  } catch (e) {
    if (e instanceof SignatureError) return refuse(401, e.code, e.message);
    return refuse(400, "invalid_request", `the body is not JSON: ${e instanceof Error ? e.message : e}`);
  }
  try {
    const request =
      call === "prepare" ? readPrepare(json) : call === "inquire" ? readInquire(json) : readComplete(json);
    if (request.txId !== signed) {
      const message = `signed for transaction ${signed}, the body is for ${request.txId}`;
      return refuse(401, "wrong_transaction", message);
    }
    const reply =
      call === "prepare"
        ? participant.prepare(request as PrepareRequest)
        : call === "inquire"
          ? participant.inquire(request as InquireRequest)
          : call === "commit"
            ? participant.commit(request)
            : participant.abort(request);
    return { status: 200, body: await reply };
  } catch (e) {
    return failed(e);
  }
}

/** The participant's request listener, for `http.createServer` (or any framework's raw hook). */
export function listener<P>(participant: Participant<P>, options: HttpOptions) {
  const max = options.maxBodyBytes ?? 64 * 1024;
  return (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      // Kept up to one byte past the limit: enough to refuse it, no more held in memory.
      const room = max + 1 - size;
      if (room > 0) chunks.push(chunk.subarray(0, room));
      size += Math.min(chunk.length, Math.max(room, 0));
    });
    req.on("end", () => {
      const header = (name: string) => {
        const v = req.headers[name];
        return Array.isArray(v) ? v[0] : v;
      };
      const path = new URL(req.url ?? "/", "http://participant").pathname;
      answer(participant, options, req.method ?? "GET", path, header, Buffer.concat(chunks))
        .catch(failed)
        .then(({ status, body }) => {
          res.writeHead(status, { "content-type": "application/json" });
          res.end(toJson(body));
        });
    });
  };
}

/** Serves the participant on `port` (0: any free one) of `host`; resolves once listening. */
export async function serveHttp<P>(
  participant: Participant<P>,
  options: HttpOptions & { port: number; host?: string },
): Promise<{ server: Server; url: string }> {
  const server = createServer(listener(participant, options));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host ?? "127.0.0.1", resolve);
  });
  const { address, port } = server.address() as AddressInfo;
  return { server, url: `http://${address}:${port}` };
}
