//! The quick bench runs inside `make test`, so the bench cannot rot: against the DynamoDB Local
//! that `make test` starts, a seconds-long run must produce a sane report.

use std::time::Instant;

use twopc_bench::config::BenchConfig;
use twopc_bench::report;
use twopc_bench::systems::System;
use twopc_bench::workload::{Contention, Workload};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_bench_produces_a_sane_report() {
    // GIVEN the DynamoDB Local of `make test` and the quick parameters
    let endpoint = std::env::var("TWOPC_DYNAMODB_ENDPOINT")
        .expect("TWOPC_DYNAMODB_ENDPOINT is not set: run with `make test`");
    let config = BenchConfig::quick(&endpoint);
    let started = Instant::now();

    // WHEN the whole bench runs
    let report = twopc_bench::run(&config, &|line| eprintln!("{line}"))
        .await
        .expect("the bench runs");
    eprintln!("quick bench: {:.1} s", started.elapsed().as_secs_f64());

    // THEN every run conserved balances, applied exactly the committed writes, left no lock
    assert!(
        report.all_checks_pass(),
        "{}",
        report::markdown(&report, std::time::SystemTime::now())
    );

    // AND every system committed transfers in every cell and in the burst
    let expected_cells = config.workloads.len() * config.concurrency.len() * System::TRANSFER.len();
    assert_eq!(report.cells.len(), expected_cells);
    assert_eq!(report.unit.len(), config.concurrency.len());
    for c in report.unit.iter().chain(&report.cells) {
        assert!(
            c.tally.committed > 0,
            "{} {} c={} committed nothing",
            c.system,
            c.workload,
            c.concurrency
        );
        assert!(c.latency.n > 0 && c.latency.p50 <= c.latency.p99);
    }
    assert_eq!(report.bursts.len(), System::TRANSFER.len());
    for b in &report.bursts {
        assert_eq!(b.tally.transfers as usize, b.burst.transfers());
        assert!(
            b.tally.committed > 0,
            "burst {} committed nothing",
            b.system
        );
    }

    // AND with one transaction in flight (no conflict possible), the coordinator sends exactly
    // 2N+3 requests per transaction, counted by the interceptor, in 5 sequential rounds; the
    // serial driver sends as many requests in 2N+3 rounds; native sends one.
    for n in [2, 8] {
        let w = Workload {
            contention: Contention::Uniform,
            participants: n,
        };
        let co = report
            .cell(System::Coordinator, w, 1)
            .expect("coordinator cell");
        assert_eq!(
            co.tally.attempts, co.tally.committed,
            "no aborts at concurrency 1"
        );
        assert_eq!(
            co.costs.requests.total(),
            (2 * n as u64 + 3) * co.tally.committed
        );
        assert_eq!(co.costs.requests.of("PutItem"), co.tally.committed);
        assert_eq!(
            co.costs.requests.rounds,
            5 * co.tally.committed,
            "{n}P coordinator rounds"
        );
        let serial = report.cell(System::Serial, w, 1).expect("serial cell");
        assert_eq!(
            serial.costs.requests.total(),
            (2 * n as u64 + 3) * serial.tally.committed
        );
        assert_eq!(
            serial.costs.requests.rounds,
            (2 * n as u64 + 3) * serial.tally.committed
        );
        let native = report.cell(System::Native, w, 1).expect("native cell");
        assert_eq!(
            native.costs.requests.of("TransactWriteItems"),
            native.tally.attempts
        );
        assert!(co.cpu_per_commit() > std::time::Duration::ZERO);
    }

    // AND the bench's transfers only add, bounded on what they add to, so every participant of
    // the coordinator and the serial driver reserved its item rather than locking it
    for c in report
        .cells
        .iter()
        .filter(|c| matches!(c.system, System::Coordinator | System::Serial))
    {
        assert_eq!(
            c.tally.votes.exclusive, 0,
            "{} {} c={}",
            c.system, c.workload, c.concurrency
        );
        assert!(
            c.tally.votes.reserved > 0,
            "{} {} c={}",
            c.system,
            c.workload,
            c.concurrency
        );
    }

    // AND in each cell's units slice every write reported its capacity units: native pays 2
    // per item (each under 1 KB), the coordinator at least 1 per write
    for c in report.unit.iter().chain(&report.cells) {
        let cell = format!("{} {} c={}", c.system, c.workload, c.concurrency);
        assert!(c.capacity.committed > 0, "{cell}: no units slice");
        assert_eq!(c.capacity.units.anomalies, 0, "{cell}");
    }
    for n in [2u64, 8] {
        let w = Workload {
            contention: Contention::Uniform,
            participants: n as usize,
        };
        let native = report.cell(System::Native, w, 1).expect("native cell");
        assert_eq!(
            native.capacity.units.write_halves(),
            2 * 2 * n * native.capacity.committed,
            "native {n}P: 2 units per item"
        );
        let co = report
            .cell(System::Coordinator, w, 1)
            .expect("coordinator cell");
        assert!(
            co.capacity.units.reported_halves() >= 2 * (2 * n + 3) * co.capacity.committed,
            "coordinator {n}P: at least 1 unit per write"
        );
    }

    // AND the report renders: every target evaluated, a table row per cell, a chart
    let md = report::markdown(&report, std::time::SystemTime::now());
    assert!(md.contains("| uniform 2P | 1 | coordinator |"), "{md}");
    assert!(report::targets(&report).iter().all(|t| t.met.is_some()));
    let svg = report::svg(&report);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.matches("<rect").count() > expected_cells);
    let dir = std::env::temp_dir().join(format!("twopc-bench-quick-{}", std::process::id()));
    report::write(&report, &dir).expect("report written");
    assert!(dir.join("latest.md").exists() && dir.join("latest.json").exists());
    let _ = std::fs::remove_dir_all(dir);
}
