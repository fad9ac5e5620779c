//! Dollars per million committed transfers at list prices, computed exactly: prices are whole
//! femto-dollars, usage whole units, the arithmetic `u128`, the result whole micro-dollars
//! (rounded half up). The price table's date and sources are in `bench/results/NOTES.md`.

use serde::Serialize;

use crate::results::Cost;

/// Femto-dollars (10⁻¹⁵ $).
type Femto = u128;

/// List prices (US East, N. Virginia), each in femto-dollars per unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Prices {
    /// DynamoDB on-demand, one write request unit ($0.625 per million).
    pub write_unit: Femto,
    /// DynamoDB on-demand, one read request unit ($0.125 per million).
    pub read_unit: Femto,
    /// Lambda, one request ($0.20 per million).
    pub lambda_request: Femto,
    /// Lambda on Arm, one GB-second ($0.0000133334).
    pub lambda_gb_second: Femto,
    /// API Gateway REST API, one request ($3.50 per million, first 333 million a month).
    pub rest_request: Femto,
    /// API Gateway HTTP API, one request ($1.00 per million, first 300 million a month).
    pub http_request: Femto,
    /// Amazon Data Firehose (Direct PUT), one GB ingested ($0.029), records rounded up to 5 KB.
    pub firehose_gb: Femto,
}

/// The table used (its date and sources: `bench/results/NOTES.md`).
pub const PRICES: Prices = Prices {
    write_unit: 625_000_000,
    read_unit: 125_000_000,
    lambda_request: 200_000_000,
    lambda_gb_second: 13_333_400_000,
    rest_request: 3_500_000_000,
    http_request: 1_000_000_000,
    firehose_gb: 29_000_000_000_000,
};

/// The functions' memory (the template's `Globals`), MB.
pub const FUNCTION_MB: u64 = 256;

/// Stream records per stream-processor invocation (the template's `BatchSize`).
pub const STREAM_BATCH: u64 = 100;

/// How long one stream-processor invocation runs, ms (an assumption: no figure measured).
pub const STREAM_BATCH_MS: u64 = 100;

/// What a cell consumed in its measured windows, exact totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Transfers answered committed.
    pub committed: u64,
    /// Write units reported and estimated (half-units), index entries apart.
    pub write_halves: u64,
    /// Cancelled transactions' and refused writes' units (half-units): the high bound's.
    pub cancelled_halves: u64,
    /// Read units (half-units).
    pub read_halves: u64,
    /// Index entries written.
    pub index_writes: u64,
    /// Calls through the front door (each attempt of the protocol; 0 for native).
    pub calls: u64,
    /// The coordinator's time (model ms), the work after the answer included.
    pub coordinator_ms: u64,
    /// Writes that reach the tables' streams.
    pub stream_records: u64,
    /// Rows the data lake gets (one per item a committed transfer changed).
    pub lake_rows: u64,
}

/// `total` femto-dollars per million committed transfers, in micro-dollars.
fn per_million(total: Femto, committed: u64) -> u64 {
    let c = Femto::from(committed.max(1)) * 1000;
    u64::try_from((total + c / 2) / c).unwrap_or(u64::MAX)
}

/// Lambda's charge for `calls` invocations running `ms` in all at `mb` of memory.
fn lambda(calls: u64, ms: u64, mb: u64) -> Femto {
    let gb_seconds_scaled = Femto::from(mb) * Femto::from(ms); // MB·ms = GB·s × 1,024,000
    Femto::from(calls) * PRICES.lambda_request
        + gb_seconds_scaled * PRICES.lambda_gb_second / 1_024_000
}

/// The cost of `u` per million committed transfers.
pub fn cost(u: &Usage) -> Cost {
    let f = Femto::from;
    let writes = f(u.write_halves) * PRICES.write_unit / 2 + f(u.index_writes) * PRICES.write_unit;
    let reads = f(u.read_halves) * PRICES.read_unit / 2;
    let cancelled = f(u.cancelled_halves) * PRICES.write_unit / 2;
    let batches = u.stream_records.div_ceil(STREAM_BATCH);
    let lake = f(u.lake_rows) * 5 * PRICES.firehose_gb / (1024 * 1024);
    Cost {
        dynamodb: per_million(writes + reads, u.committed),
        dynamodb_high: per_million(writes + reads + cancelled, u.committed),
        lambda: per_million(lambda(u.calls, u.coordinator_ms, FUNCTION_MB), u.committed),
        rest_api: per_million(f(u.calls) * PRICES.rest_request, u.committed),
        http_api: per_million(f(u.calls) * PRICES.http_request, u.committed),
        fanout: per_million(
            lambda(batches, batches * STREAM_BATCH_MS, FUNCTION_MB) + lake,
            u.committed,
        ),
    }
}

/// Micro-dollars as dollars and cents (`$2.50`), rounded half up, with no float.
pub fn dollars(micros: u64) -> String {
    let cents = (micros + 5_000) / 10_000;
    format!("${}.{:02}", cents / 100, cents % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_two_item_transfers_cost_four_write_units_each() {
        // A million transfers of one two-item TransactWriteItems: 4 write units each.
        let u = Usage {
            committed: 1_000_000,
            write_halves: 8_000_000,
            ..Usage::default()
        };
        let c = cost(&u);
        assert_eq!(c.dynamodb, 2_500_000);
        assert_eq!(dollars(c.dynamodb), "$2.50");
        assert_eq!((c.lambda, c.rest_api, c.fanout), (0, 0, 0));
    }

    #[test]
    fn the_protocols_parts_are_priced_apart_and_exactly() {
        // 1,000 transfers, each one call of 30 ms at 256 MB, an index entry, a strongly
        // consistent read, two lake rows, eight stream records, five cancelled write units.
        let u = Usage {
            committed: 1000,
            write_halves: 14_000,
            cancelled_halves: 10_000,
            read_halves: 2000,
            index_writes: 1000,
            calls: 1000,
            coordinator_ms: 30_000,
            stream_records: 8000,
            lake_rows: 2000,
        };
        let c = cost(&u);
        // 8 write units and 1 read unit a transfer: 8 × 0.625 + 0.125 = $5.125 a million.
        assert_eq!(c.dynamodb, 5_125_000);
        // + 5 write units a transfer = $3.125 a million.
        assert_eq!(c.dynamodb_high, 8_250_000);
        // $0.20 + 0.25 GB × 0.03 s × $13.3334 = $0.20 + $0.10000050 a million.
        assert_eq!(c.lambda, 300_001);
        assert_eq!((c.rest_api, c.http_api), (3_500_000, 1_000_000));
        // 80 batches of 100 ms: 80 × ($0.0000002 + 0.025 GB·s × $0.0000133334) per 1,000,
        // plus 2 rows × 5 KB × $0.029 per GB.
        let batches = 80 * (200_000_000 + 25 * 13_333_400_000 / 1000);
        let rows = 2000 * 5 * 29_000_000_000_000 / (1024 * 1024);
        assert_eq!(c.fanout, per_million(batches + rows, 1000));
        assert_eq!(c.deployed(), c.dynamodb + c.lambda + c.rest_api + c.fanout);
        assert_eq!(dollars(1_234_999), "$1.23");
        assert_eq!(dollars(1_235_000), "$1.24");
    }
}
