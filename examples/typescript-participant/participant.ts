// A gift-card service in dynamo-2pc transactions: prepare holds the amount, commit spends it,
// abort gives it back. Payload: {"card": "gc-alice", "amount": 12.50}, the amount exact.
import { DeleteItemCommand, TransactWriteItemsCommand, TransactionCanceledException } from "@aws-sdk/client-dynamodb";
import { Decimal, type Hooks, InvalidPayload, type LosslessNumber, Reservation, fromEnv, isLosslessNumber,
  isObject, secretFromEnv, serveHttp } from "dynamo-2pc/participant";

type Spend = { card: string; amount: LosslessNumber };
const table = process.env.CARDS_TABLE ?? "giftcards";
const hold = (txId: string) => ({ id: { S: `hold#${txId}` } });

const hooks: Hooks<Spend> = {
  payload(raw) {
    if (!isObject(raw) || typeof raw.card !== "string" || !isLosslessNumber(raw.amount) || !new Decimal(raw.amount.value).gt(0))
      throw new InvalidPayload('expected {"card": "<id>", "amount": <a number above 0>}');
    return { card: raw.card, amount: raw.amount };
  },
  async reserve({ txId, payload: { card, amount } }) {
    const a = { ":a": { N: amount.value } };
    try { // the hold and the debit at once; the hold's condition makes a retry a no-op
      await db.send(new TransactWriteItemsCommand({ TransactItems: [
        { Put: { TableName: table, Item: { ...hold(txId), amount: { N: amount.value } }, ConditionExpression: "attribute_not_exists(id)" } },
        { Update: { TableName: table, Key: { id: { S: card } }, UpdateExpression: "SET balance = balance - :a",
            ConditionExpression: "balance >= :a", ExpressionAttributeValues: a } }] }));
    } catch (e) {
      if (!(e instanceof TransactionCanceledException)) throw e;
      if (e.CancellationReasons?.[0]?.Code === "ConditionalCheckFailed") return Reservation.held; // held before
      return Reservation.condition(`card ${card} has no balance of ${amount.value}`);
    }
    return Reservation.held;
  },
  async confirm({ txId }) { // spent: the hold goes
    await db.send(new DeleteItemCommand({ TableName: table, Key: hold(txId) }));
  },
  async cancel({ txId, payload: { card, amount } }) { // given back, once, if held
    await db.send(new TransactWriteItemsCommand({ TransactItems: [
      { Delete: { TableName: table, Key: hold(txId), ConditionExpression: "attribute_exists(id)" } },
      { Update: { TableName: table, Key: { id: { S: card } }, UpdateExpression: "SET balance = balance + :a",
          ExpressionAttributeValues: { ":a": { N: amount.value } } } }] }))
      .catch((e) => { if (!(e instanceof TransactionCanceledException)) throw e; }); // nothing held
  },
};

const participant = fromEnv(hooks); // TWOPC_PARTICIPANT_TABLE, TWOPC_TRANSACTIONS_TABLE
const db = participant.states.client;
await participant.states.createTableIfMissing();
participant.startSweeper(5_000); // silent coordinators, by their record
const { url } = await serveHttp(participant, { secret: secretFromEnv(), port: Number(process.env.PORT ?? 3002) });
console.log(`gift cards listening on ${url}`);
