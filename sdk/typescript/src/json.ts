/**
 * Exact JSON: every number keeps its text, never a JavaScript `number` (a binary float, exact
 * for integers only up to 2^53 and for no decimal fraction). Parsing and writing are
 * lossless-json's: a number arrives as a {@link LosslessNumber} (`.value` is its text, `12.50`
 * stays `12.50`) and is written back as that text. Arithmetic is the caller's business: turn the
 * text into a decimal type (decimal.js's `new Decimal(n.value)`, re-exported here), never into
 * `Number(n)` for money.
 *
 * Why lossless-json and decimal.js: the first parses and writes JSON with the number's text
 * kept (no hand-written parser), the second compares two numbers by value (`12.50` and `12.5`
 * are one amount: DynamoDB gives numbers back in its own spelling) without a float.
 */
import { Decimal } from "decimal.js";
import { LosslessNumber, isLosslessNumber, parse, stringify } from "lossless-json";

export { Decimal, LosslessNumber, isLosslessNumber };

/** A JSON value as this package reads it: numbers are {@link LosslessNumber}s. */
export type Json = null | boolean | string | LosslessNumber | Json[] | { [key: string]: Json };

/** A JSON object. */
export type JsonObject = { [key: string]: Json };

/** An exact number given by the caller: its text, a bigint, a LosslessNumber or a Decimal. */
export type Exact = string | bigint | LosslessNumber | Decimal;

/** Parses JSON text, numbers as {@link LosslessNumber}s. Throws a SyntaxError on bad JSON. */
export function parseJson(text: string): Json {
  return parse(text) as Json;
}

/**
 * Writes JSON: a {@link LosslessNumber} as its text, a bigint as its digits, a Decimal as its
 * value; a JavaScript `number` only if it is a safe integer (anything else may already be
 * rounded: pass its text instead).
 */
export function toJson(value: unknown): string {
  const text = stringify(value, (_key, v) => {
    if (typeof v === "number" && !Number.isSafeInteger(v)) {
      throw new TypeError(`${v} is not a safe integer: give exact numbers as strings, bigints or LosslessNumbers`);
    }
    if (typeof v === "bigint") return new LosslessNumber(v.toString());
    if (Decimal.isDecimal(v)) return new LosslessNumber((v as Decimal).toString());
    return v;
  });
  if (text === undefined) throw new TypeError("not a JSON value");
  return text;
}

/** `value` as an exact JSON number; a string must be a JSON number's text. */
export function exact(value: Exact): LosslessNumber {
  if (isLosslessNumber(value)) return value;
  if (typeof value === "bigint") return new LosslessNumber(value.toString());
  if (Decimal.isDecimal(value)) return new LosslessNumber(value.toString());
  return new LosslessNumber(value); // throws "Invalid number" for text that is not one
}

/** Whether a JSON value is a plain object. */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !isLosslessNumber(v);
}

/**
 * A value's canonical text: object keys sorted, numbers by value (`12.50`, `12.5` and
 * `1.25e1` read alike), so two payloads compare as the same request or not.
 */
export function canonical(value: Json): string {
  if (isLosslessNumber(value)) return new Decimal(value.value).toString();
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (isObject(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k] as Json)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
