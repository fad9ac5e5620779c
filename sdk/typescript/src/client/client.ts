/**
 * The client of the coordinator's HTTP API, retrying as the Rust client (crates/client) does.
 *
 * Retries are safe because every attempt of a submit carries the same `Idempotency-Key`: the
 * API derives the transaction's id from it, so a repeat finds the first attempt's transaction
 * (and helps it finish) instead of starting another. Repeated: a connection that failed, a
 * timeout, `429`, `5xx`. Not repeated: an answer (`200`, `202`, `409` with a status) or a
 * refusal (`4xx`). When no attempt got an answer and one may have been received, the submit is
 * {@link Undetermined}, naming the transaction to read back.
 */
import { randomUUID } from "node:crypto";
import { v5 as uuidv5 } from "uuid";
import { type Json, isObject, parseJson, toJson } from "../json.js";
import { type Pending, type TxAnswer, isFinished, readAnswer, readPending } from "./answer.js";
import {
  ApiError,
  type ClientError,
  InvalidInput,
  ProtocolError,
  Timeout,
  TransportError,
  Undetermined,
  Unfinished,
  codeForStatus,
  retryableStatus,
} from "./errors.js";
import { type SigV4Options, Signer } from "./sigv4.js";
import type { Transaction } from "./transaction.js";

/** The namespace the API derives a transaction's id from its idempotency key in (crates/core/src/ids.rs). */
export const IDEMPOTENCY_NAMESPACE = "6b1f3c2e-9d4a-4e8b-a0c7-52f1d3e90b17";

/** The transaction an idempotency key names. */
export function txIdForKey(idempotencyKey: string): string {
  return uuidv5(idempotencyKey, IDEMPOTENCY_NAMESPACE);
}

/** Where the API is and how to call it. */
export interface ClientOptions {
  /** `http://127.0.0.1:3000`, `https://{api}.execute-api.{region}.amazonaws.com/Prod`. */
  baseUrl: string;
  /** Each attempt is abandoned after this (ms; default 30 s: API Gateway gives up at 29). */
  timeoutMs?: number;
  /** Attempts after the first, for failures that may pass (default 3). */
  retries?: number;
  /** The delay before the first retry (ms, default 100), doubled each time up to `maxBackoffMs`, jittered. */
  backoffMs?: number;
  /** The longest delay between two attempts (ms, default 2000). */
  maxBackoffMs?: number;
  /** How often `wait` asks at first (ms, default 100; doubled up to `maxBackoffMs`). */
  pollMs?: number;
  /** SigV4 signing (API Gateway with IAM authorisation): `{}` for the standard chain; absent, unsigned. */
  sigv4?: SigV4Options;
}

const MAX_ANSWER_BYTES = 1024 * 1024;
const KEY = /^[\x21-\x7e]{1,255}$/;
/** Connection errors that carried nothing: the request was never received. */
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT", "EHOSTUNREACH", "ENETUNREACH"]);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Exchange = { status: number; body: Json | string | undefined };

/** A client of the coordinator's HTTP API. */
export class Client {
  private readonly base: URL;
  private readonly options: Required<Omit<ClientOptions, "sigv4">> & Pick<ClientOptions, "sigv4">;
  private signer: Signer | undefined;

  constructor(options: ClientOptions) {
    let base: URL;
    try {
      base = new URL(options.baseUrl.replace(/\/+$/, ""));
    } catch {
      throw new InvalidInput(`base URL ${JSON.stringify(options.baseUrl)}: expected http://... or https://...`);
    }
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw new InvalidInput(`base URL ${JSON.stringify(options.baseUrl)}: expected http://... or https://...`);
    }
    this.base = base;
    this.options = { timeoutMs: 30_000, retries: 3, backoffMs: 100, maxBackoffMs: 2_000, pollMs: 100, ...options };
  }

  /**
   * Submits `tx`. With no `idempotencyKey` one is made (a random UUID); every attempt carries
   * the same. Resolves to the API's answer (committed, aborted with its code, or decided but
   * unfinished: `wait` for it); rejects with {@link ApiError} for a refusal and
   * {@link Undetermined} when retries are spent without any answer.
   */
  async submit(tx: Transaction | Json, idempotencyKey?: string): Promise<TxAnswer> {
    const key = idempotencyKey ?? randomUUID();
    if (!KEY.test(key)) {
      throw new InvalidInput(`Idempotency-Key ${JSON.stringify(key)} must be 1 to 255 visible ASCII characters`);
    }
    const body = toJson(tx);
    let maybeReceived = false;
    for (let attempt = 0; ; attempt++) {
      let error: ClientError;
      try {
        const { status, body: answer } = await this.attempt("POST", "/transactions", body, key);
        if (status === 200 || status === 202) return readAnswer(status, answer);
        // A 409 with a status is an aborted transaction; without, a refusal (a key reused).
        if (status === 409 && isObject(answer) && answer.status !== undefined) return readAnswer(status, answer);
        if (status >= 200 && status < 300) throw new ProtocolError(status, "a success that is not a transaction");
        error = apiError(status, answer);
        if (!retryableStatus(status)) throw error;
      } catch (e) {
        if (!(e instanceof Timeout || e instanceof TransportError)) throw e;
        error = e;
      }
      maybeReceived ||= error.maybeReceived;
      if (attempt >= this.options.retries) {
        throw maybeReceived ? new Undetermined(txIdForKey(key), key, error) : error;
      }
      await sleep(this.backoff(attempt));
    }
  }

  /** The transaction as it stands (`GET /transactions/{txId}`); an unknown id is `not_found`. */
  async status(txId: string): Promise<TxAnswer> {
    const { body } = await this.read(`/transactions/${encodeURIComponent(txId)}`);
    return readAnswer(200, body);
  }

  /**
   * One page of unfinished transactions, oldest deadline first (`GET
   * /transactions?status=pending`): `overdue` only those past their deadline, `limit` (1 to 100)
   * a page, `next` the previous page's cursor.
   */
  async pending(options: { overdue?: boolean; limit?: number; next?: string } = {}): Promise<Pending> {
    const query = new URLSearchParams({ status: "pending" });
    if (options.overdue) query.set("overdue", "true");
    if (options.limit !== undefined) query.set("limit", String(options.limit));
    if (options.next !== undefined) {
      if (!/^[A-Za-z0-9.-]+$/.test(options.next)) {
        throw new InvalidInput(`${JSON.stringify(options.next)} is not a page cursor: pass the "next" of the previous page`);
      }
      query.set("next", options.next);
    }
    const { body } = await this.read(`/transactions?${query}`);
    return readPending(body);
  }

  /** Asks until the transaction is finished, at most `withinMs`; past it, {@link Unfinished}. */
  async wait(txId: string, withinMs: number): Promise<TxAnswer> {
    const started = Date.now();
    let every = this.options.pollMs;
    for (;;) {
      const answer = await this.status(txId);
      if (isFinished(answer)) return answer;
      const waited = Date.now() - started;
      if (waited + every > withinMs) throw new Unfinished(answer.txId, answer.status, waited);
      await sleep(every);
      every = Math.min(every * 2, this.options.maxBackoffMs);
    }
  }

  /** A GET repeated like a submit; a 200's body, or the error. */
  private async read(path: string): Promise<Exchange> {
    for (let attempt = 0; ; attempt++) {
      let error: ClientError;
      try {
        const exchange = await this.attempt("GET", path, undefined, undefined);
        if (exchange.status === 200) return exchange;
        error = apiError(exchange.status, exchange.body);
        if (!retryableStatus(exchange.status)) throw error;
      } catch (e) {
        if (!(e instanceof Timeout || e instanceof TransportError)) throw e;
        error = e;
      }
      if (attempt >= this.options.retries) throw error;
      await sleep(this.backoff(attempt));
    }
  }

  /** The delay before retry `attempt` (0 for the first): exponential, capped, jittered. */
  private backoff(attempt: number): number {
    const full = Math.min(this.options.backoffMs * 2 ** attempt, this.options.maxBackoffMs);
    return full * (0.5 + Math.random() / 2);
  }

  /** One attempt: the request built (and signed) afresh, sent, its answer read. */
  private async attempt(method: string, path: string, body: string | undefined, key: string | undefined): Promise<Exchange> {
    const url = new URL(this.base.pathname.replace(/\/$/, "") + path, this.base);
    let headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (key !== undefined) headers["idempotency-key"] = key;
    if (this.options.sigv4) {
      this.signer ??= new Signer(this.options.sigv4, url.host);
      headers = await this.signer.sign({ method, url, headers, body: body ?? "" });
    }
    let response: Response;
    try {
      response = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(this.options.timeoutMs) });
    } catch (e) {
      throw this.failure(e, "the request failed");
    }
    let text: string;
    try {
      text = await response.text();
    } catch (e) {
      throw this.failure(e, "reading the answer failed", true);
    }
    if (text.length > MAX_ANSWER_BYTES) throw new ProtocolError(response.status, "an answer over 1 MiB");
    return { status: response.status, body: jsonOrText(text) };
  }

  private failure(e: unknown, what: string, received = false): ClientError {
    const err = e as { name?: string; cause?: { code?: string } };
    if (err.name === "TimeoutError" || err.name === "AbortError") return new Timeout(this.options.timeoutMs);
    const code = err.cause?.code ?? "";
    const message = `${what}: ${e instanceof Error ? e.message : e}${code ? ` (${code})` : ""}`;
    return new TransportError(message, received || !NOT_SENT.has(code), e);
  }
}

/** An answer's JSON (numbers exact), its text when it is not JSON, `undefined` when empty. */
function jsonOrText(text: string): Json | string | undefined {
  if (text.trim() === "") return undefined;
  try {
    return parseJson(text);
  } catch {
    return text;
  }
}

/** An error answer as {@link ApiError}: its `code` (or one named by its status) and `message`. */
export function apiError(status: number, body: Json | string | undefined): ApiError {
  const obj = isObject(body) ? body : undefined;
  const code = typeof obj?.code === "string" ? obj.code : codeForStatus(status);
  const message =
    typeof obj?.message === "string"
      ? obj.message
      : typeof body === "string"
        ? body.slice(0, 200)
        : body === undefined
          ? `HTTP ${status}`
          : JSON.stringify(body).slice(0, 200);
  return new ApiError(status, code, message, body);
}
