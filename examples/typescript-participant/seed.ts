// The gift cards' table (key `id`), created if missing, and three cards: gc-alice 100.00,
// gc-bob 5.00, and one for `twopc conformance`. DynamoDB Local at TWOPC_DYNAMODB_ENDPOINT, else AWS.
import { CreateTableCommand, PutItemCommand, ResourceInUseException, waitUntilTableExists } from "@aws-sdk/client-dynamodb";
import { dynamoClient } from "dynamo-2pc/participant";

const table = process.env.CARDS_TABLE ?? "giftcards";
const db = dynamoClient(process.env.TWOPC_DYNAMODB_ENDPOINT || undefined);
await db
  .send(new CreateTableCommand({
    TableName: table,
    BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
    KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
  }))
  .catch((e) => { if (!(e instanceof ResourceInUseException)) throw e; });
await waitUntilTableExists({ client: db, maxWaitTime: 60 }, { TableName: table });
for (const [id, balance] of [["gc-alice", "100.00"], ["gc-bob", "5.00"], ["conformance", "1000000"]]) {
  await db.send(new PutItemCommand({ TableName: table, Item: { id: { S: id }, balance: { N: balance } } }));
}
console.log(`${table}: gc-alice 100.00, gc-bob 5.00, conformance 1000000`);
