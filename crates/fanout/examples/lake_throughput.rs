//! How many rows per second the local lake converts and writes (`parquet_lake::write_file`: the
//! Arrow conversion from the rows' JSON, Snappy Parquet, a synced file), on rows like a
//! transfer's (two item changes and an outcome).
//!
//! `cargo run --release -p twopc-fanout --features parquet --example lake_throughput [ROWS]`

use std::str::FromStr;
use std::time::Instant;

use serde_json::{Map, Number, Value, json};
use twopc_fanout::detect::Detected;
use twopc_fanout::parquet_lake::write_file;
use twopc_fanout::rows::row;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300_000);
    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        let tx = format!("00000000-0000-4000-8000-{i:012}");
        rows.push(if i % 3 == 2 {
            row(&Detected::TransactionCompleted {
                tx_id: tx,
                status: "COMMITTED".into(),
                participants: vec![
                    json!({"participant": "accounts", "key": {"id": "alice"}, "vote": "yes", "mode": "reserved"}),
                    json!({"participant": "accounts", "key": {"id": "bob"}, "vote": "yes", "mode": "reserved"}),
                ],
                completed_at: 1_795_305_600_000 + i as u64,
            })
        } else {
            let mut item = Map::new();
            item.insert("id".into(), json!("alice"));
            let balance = Number::from_str(&format!("{}.{:02}", i % 1000, i % 100));
            item.insert("balance".into(), balance.map_or(Value::Null, Value::Number));
            row(&Detected::ItemCommitted {
                tx_id: tx,
                participant: "accounts".into(),
                key: serde_json::from_value(json!({"id": "alice"})).unwrap_or_default(),
                item: Some(item),
                version: json!(i),
                committed_at: 1_795_305_600_000 + i as u64,
            })
        });
    }
    let dir = std::env::temp_dir().join(format!("twopc-lake-throughput-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    let path = dir.join("rows.parquet");
    let started = Instant::now();
    write_file(&path, &rows).expect("write");
    let took = started.elapsed();
    let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
    std::fs::remove_dir_all(&dir).ok();
    println!(
        "{n} rows in {:.3} s: {:.0} rows/s, {:.1} bytes/row",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        bytes as f64 / n as f64
    );
}
