/**
 * The state store on a DynamoDB table of the service's own, laid out as the Rust SDK's
 * (`TableKind::ParticipantState`: key `txId`, the sparse `pending-by-deadline` index while
 * unfinished, TTL `expireAt` once finished), through the AWS SDK for JavaScript v3's low-level
 * client: every number goes to DynamoDB as its text (`N`), never through a float. And the
 * coordinator's transactions table, read (only) by the sweep.
 */
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ResourceInUseException,
  ResourceNotFoundException,
  UpdateTimeToLiveCommand,
} from "@aws-sdk/client-dynamodb";
import { type Json, LosslessNumber, isLosslessNumber, isObject } from "../json.js";
import { type TxState, isTerminal } from "./state.js";
import { type StateStore, StoreError, type TxLog, type Written } from "./store.js";

type Item = Record<string, AttributeValue>;

/** The sparse index of unfinished states, by deadline (the name Rust's tables use). */
export const PENDING_INDEX = "pending-by-deadline";
/** Index partitions the pending entries are spread over. */
export const INDEX_SHARDS = 4;
/** How long a finished state is kept (s): the transaction log's retention, 7 days. */
export const RETENTION_SECS = 7 * 24 * 3600;

/** A DynamoDB client: DynamoDB Local at `endpoint` (fixed region, dummy keys), else AWS's chain. */
export function dynamoClient(endpoint?: string): DynamoDBClient {
  if (!endpoint) return new DynamoDBClient({});
  return new DynamoDBClient({
    endpoint,
    region: process.env.AWS_REGION ?? "us-east-1",
    credentials: { accessKeyId: "local", secretAccessKey: "local" },
  });
}

/** A JSON value as an attribute (numbers as their text). */
export function toAttr(v: Json): AttributeValue {
  if (v === null) return { NULL: true };
  if (typeof v === "boolean") return { BOOL: v };
  if (typeof v === "string") return { S: v };
  if (isLosslessNumber(v)) return { N: v.value };
  if (Array.isArray(v)) return { L: v.map(toAttr) };
  return { M: Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toAttr(x)])) };
}

/** An attribute as a JSON value (numbers as LosslessNumbers). */
export function fromAttr(a: AttributeValue): Json {
  if (a.NULL) return null;
  if (a.BOOL !== undefined) return a.BOOL;
  if (a.S !== undefined) return a.S;
  if (a.N !== undefined) return new LosslessNumber(a.N);
  if (a.L) return a.L.map(fromAttr);
  if (a.M) return Object.fromEntries(Object.entries(a.M).map(([k, x]) => [k, fromAttr(x)]));
  throw new StoreError(`an attribute of a type this store never writes: ${Object.keys(a).join()}`, false);
}

/** The index partition of a transaction id (Rust's `shard_of`, prefix `P`). */
export function shardOf(txId: string, prefix = "P"): string {
  let h = 0;
  for (const b of Buffer.from(txId)) h = (Math.imul(h, 31) + b) >>> 0;
  return `${prefix}${h % INDEX_SHARDS}`;
}

const RETRYABLE = new Set([
  "ProvisionedThroughputExceededException",
  "ThrottlingException",
  "RequestLimitExceeded",
  "InternalServerError",
  "ServiceUnavailable",
  "TransactionConflictException",
  "LimitExceededException",
]);

/** A DynamoDB failure as a StoreError: throttling and unreachable are retryable. */
export function classify(context: string, e: unknown): StoreError {
  const err = e as { name?: string; $metadata?: { httpStatusCode?: number }; $retryable?: unknown };
  const status = err.$metadata?.httpStatusCode;
  const retryable =
    RETRYABLE.has(err.name ?? "") || err.$retryable !== undefined || status === undefined || status >= 500;
  const why = e instanceof Error ? e.message : String(e);
  return new StoreError(`${context}: ${why}`, retryable, { cause: e });
}

/** Participant states in a DynamoDB table. */
export class DynamoStates implements StateStore {
  constructor(
    readonly client: DynamoDBClient,
    readonly table: string,
    readonly retentionSecs = RETENTION_SECS,
  ) {}

  /** Creates the table (the Rust SDK's layout) if it does not exist, and waits until it is active. */
  async createTableIfMissing(): Promise<void> {
    try {
      await this.client.send(new DescribeTableCommand({ TableName: this.table }));
    } catch (e) {
      if (!(e instanceof ResourceNotFoundException)) throw classify(`describing table ${this.table}`, e);
      await this.createTable();
    }
    for (let i = 0; i < 120; i++) {
      const t = await this.client.send(new DescribeTableCommand({ TableName: this.table }));
      if (t.Table?.TableStatus === "ACTIVE") break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const ttl = { Enabled: true, AttributeName: "expireAt" };
    await this.client
      .send(new UpdateTimeToLiveCommand({ TableName: this.table, TimeToLiveSpecification: ttl }))
      .catch(() => undefined); // already enabled
  }

  private async createTable(): Promise<void> {
    try {
      await this.client.send(
        new CreateTableCommand({
          TableName: this.table,
          BillingMode: "PAY_PER_REQUEST",
          StreamSpecification: { StreamEnabled: true, StreamViewType: "NEW_AND_OLD_IMAGES" },
          AttributeDefinitions: [
            { AttributeName: "txId", AttributeType: "S" },
            { AttributeName: "pending", AttributeType: "S" },
            { AttributeName: "deadline", AttributeType: "N" },
          ],
          KeySchema: [{ AttributeName: "txId", KeyType: "HASH" }],
          GlobalSecondaryIndexes: [
            {
              IndexName: PENDING_INDEX,
              KeySchema: [
                { AttributeName: "pending", KeyType: "HASH" },
                { AttributeName: "deadline", KeyType: "RANGE" },
              ],
              Projection: { ProjectionType: "INCLUDE", NonKeyAttributes: ["retryAfter"] },
            },
          ],
        }),
      );
    } catch (e) {
      if (!(e instanceof ResourceInUseException)) throw classify(`creating table ${this.table}`, e);
    }
  }

  async get(txId: string): Promise<TxState | undefined> {
    try {
      const out = await this.client.send(
        new GetItemCommand({ TableName: this.table, Key: { txId: { S: txId } }, ConsistentRead: true }),
      );
      return out.Item && stateFrom(out.Item);
    } catch (e) {
      throw e instanceof StoreError ? e : classify(`reading the state of transaction ${txId}`, e);
    }
  }

  create(state: TxState): Promise<Written> {
    return this.put(state, "attribute_not_exists(#t)", { "#t": "txId" }, undefined);
  }

  replace(state: TxState): Promise<Written> {
    const previous = { ":r": { N: String(state.revision - 1) } };
    return this.put(state, "#r = :r", { "#r": "revision" }, previous);
  }

  async overdue(now: number, limit: number): Promise<TxState[]> {
    const ids: string[] = [];
    for (let shard = 0; shard < INDEX_SHARDS; shard++) {
      let start: Item | undefined;
      do {
        const out = await this.client
          .send(
            new QueryCommand({
              TableName: this.table,
              IndexName: PENDING_INDEX,
              KeyConditionExpression: "#p = :p AND #d < :now",
              ExpressionAttributeNames: { "#p": "pending", "#d": "deadline" },
              ExpressionAttributeValues: { ":p": { S: `P${shard}` }, ":now": { N: String(now) } },
              Limit: limit,
              ExclusiveStartKey: start,
            }),
          )
          .catch((e: unknown) => Promise.reject(classify("querying overdue participant states", e)));
        for (const item of out.Items ?? []) if (item.txId?.S) ids.push(item.txId.S);
        start = out.LastEvaluatedKey;
      } while (start && ids.length < limit * (shard + 1));
    }
    const found: TxState[] = [];
    for (const id of ids) {
      const s = await this.get(id); // the index is eventually consistent: finished meanwhile?
      if (s && !isTerminal(s.phase) && s.deadline < now) found.push(s);
    }
    return found.sort((a, b) => a.deadline - b.deadline).slice(0, limit);
  }

  private async put(
    state: TxState,
    condition: string,
    names: Record<string, string>,
    values: Item | undefined,
  ): Promise<Written> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: this.itemOf(state),
          ConditionExpression: condition,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return { done: true };
    } catch (e) {
      if (e instanceof ConditionalCheckFailedException) return { done: false, found: e.Item && stateFrom(e.Item) };
      throw classify(`writing the state of transaction ${state.txId}`, e);
    }
  }

  private itemOf(s: TxState): Item {
    const item: Item = {
      txId: { S: s.txId },
      phase: { S: s.phase },
      revision: { N: String(s.revision) },
      deadline: { N: String(s.deadline) },
      began: { N: String(s.began) },
      updatedAt: { N: String(s.updatedAt) },
    };
    if (s.payload !== undefined) item.payload = toAttr(s.payload);
    if (s.claimedUntil !== undefined) item.claimedUntil = { N: String(s.claimedUntil) };
    if (s.refusal) item.refusal = { M: { reason: { S: s.refusal.reason }, message: { S: s.refusal.message } } };
    if (isTerminal(s.phase)) item.expireAt = { N: String(Math.floor(s.updatedAt / 1000) + this.retentionSecs) };
    else item.pending = { S: shardOf(s.txId) };
    return item;
  }
}

function num(item: Item, name: string): number {
  const n = Number(item[name]?.N);
  if (!Number.isSafeInteger(n)) throw new StoreError(`a participant state without ${name}`, false);
  return n;
}

/** Reads a state from its item (the index and TTL attributes dropped). */
function stateFrom(item: Item): TxState {
  const s: TxState = {
    txId: item.txId?.S ?? "",
    phase: item.phase?.S as TxState["phase"],
    revision: num(item, "revision"),
    deadline: num(item, "deadline"),
    began: num(item, "began"),
    updatedAt: num(item, "updatedAt"),
  };
  if (item.payload) s.payload = fromAttr(item.payload);
  if (item.claimedUntil) s.claimedUntil = num(item, "claimedUntil");
  const refusal = item.refusal && fromAttr(item.refusal);
  if (isObject(refusal) && typeof refusal.reason === "string" && typeof refusal.message === "string") {
    s.refusal = { reason: refusal.reason as NonNullable<TxState["refusal"]>["reason"], message: refusal.message };
  }
  return s;
}

/** The coordinator's transactions table, read for a record's `status`. */
export class DynamoTxLog implements TxLog {
  constructor(
    readonly client: DynamoDBClient,
    readonly table: string,
  ) {}

  async status(txId: string): Promise<string | undefined> {
    try {
      const out = await this.client.send(
        new GetItemCommand({
          TableName: this.table,
          Key: { txId: { S: txId } },
          ConsistentRead: true,
          ProjectionExpression: "#s",
          ExpressionAttributeNames: { "#s": "status" },
        }),
      );
      return out.Item?.status?.S;
    } catch (e) {
      throw classify(`reading the record of transaction ${txId}`, e);
    }
  }
}
