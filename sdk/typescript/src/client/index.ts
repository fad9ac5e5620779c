/**
 * dynamo-2pc/client: a client of the coordinator's HTTP API (docs/api.md), as crates/client.
 * Build a {@link Transaction} (each participant's item and {@link Op}, or a custom participant's
 * payload; numbers exact), `submit` it with an idempotency key and safe retries, read the
 * {@link TxAnswer}; `status`, `wait`, `pending`. SigV4 (`sigv4: {}`) for a deployed stack.
 *
 * ```ts
 * const client = new Client({ baseUrl: "http://127.0.0.1:3000" });
 * const tx = new Transaction()
 *   .table("accounts", key("id", "alice"), Op.debit("balance", "10.00"))
 *   .table("accounts", key("id", "bob"), Op.credit("balance", "10.00"));
 * const answer = await client.submit(tx, "order-42");
 * ```
 */
export * from "../json.js";
export * from "./answer.js";
export * from "./client.js";
export * from "./errors.js";
export * from "./sigv4.js";
export * from "./transaction.js";
