/**
 * dynamo-2pc/participant: a service takes part in dynamo-2pc transactions by writing three
 * hooks ({@link Hooks}: reserve, confirm, cancel); the SDK answers the coordinator around them
 * and owns the protocol, as the Rust SDK (crates/participant-sdk) does.
 *
 * - {@link Participant}: prepare, commit, abort, inquire, the sweep of silent coordinators.
 * - {@link DynamoStates} (its state in a DynamoDB table of its own), {@link DynamoTxLog} (the
 *   coordinator's records, read by the sweep), {@link MemoryStates} for tests.
 * - {@link serveHttp} / {@link listener} / {@link answer}: the signed HTTP routes;
 *   {@link lambdaHandler}: the `lambda` transport's handler.
 * - {@link fromEnv}: the usual wiring from the environment.
 */
import type { Json } from "../json.js";
import { DynamoStates, DynamoTxLog, dynamoClient } from "./dynamo.js";
import type { Hooks } from "./hooks.js";
import { Participant, type ParticipantOptions } from "./participant.js";

export * from "../json.js";
export * from "../signing.js";
export * from "./dynamo.js";
export * from "./hooks.js";
export * from "./http.js";
export * from "./lambda.js";
export * from "./messages.js";
export * from "./participant.js";
export * from "./state.js";
export * from "./store.js";

/**
 * A participant on DynamoDB, its tables named by the environment: the state table in
 * `TWOPC_PARTICIPANT_TABLE`, the coordinator's transactions table in
 * `TWOPC_TRANSACTIONS_TABLE`, and DynamoDB Local at `TWOPC_DYNAMODB_ENDPOINT` when set (else
 * the AWS SDK's default chain). A missing variable is refused with its name.
 */
export function fromEnv<P = Json>(
  hooks: Hooks<P>,
  options: Omit<ParticipantOptions<P>, "hooks" | "states" | "log"> = {},
  env: NodeJS.ProcessEnv = process.env,
): Participant<P> & { states: DynamoStates } {
  const need = (name: string, what: string): string => {
    const v = env[name];
    if (!v) throw new Error(`${name} is not set: set it to ${what}`);
    return v;
  };
  const states = need("TWOPC_PARTICIPANT_TABLE", "the name of this service's state table");
  const transactions = need("TWOPC_TRANSACTIONS_TABLE", "the name of the coordinator's transactions table");
  const client = dynamoClient(env.TWOPC_DYNAMODB_ENDPOINT || undefined);
  return new Participant({
    ...options,
    hooks,
    states: new DynamoStates(client, states),
    log: new DynamoTxLog(client, transactions),
  }) as Participant<P> & { states: DynamoStates };
}
