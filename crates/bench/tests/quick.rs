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

    // AND the injected-latency cells ran every system on every workload, and at one in flight
    // (no conflict possible) the answer came after 1 counted round for native and 5 for the
    // classic coordinator, whose every prepared item was released with its hold recorded
    let injection = config
        .injection
        .as_ref()
        .expect("quick runs injected cells");
    let injected = report.injected.as_ref().expect("injected cells");
    assert_eq!(
        injected.cells.len(),
        injection.workloads.len() * injection.concurrency.len() * System::INJECTED.len()
    );
    for c in &injected.cells {
        let cell = format!("injected {} {} c={}", c.system, c.workload, c.concurrency);
        assert_eq!(c.tally.transfers, injection.transfers as u64, "{cell}");
        assert!(c.tally.committed > 0, "{cell}");
        assert!(
            c.answer.p50 <= c.applied.p50 && c.answer.p99 <= c.applied.p99,
            "{cell}"
        );
        if c.concurrency != 1 {
            continue;
        }
        assert_eq!(c.tally.attempts, c.tally.committed, "{cell}: no aborts");
        let n = c.workload.participants as u64;
        let (rounds, held) = match c.system {
            System::Native => (1.0, 0),
            System::Coordinator => (5.0, n * c.tally.committed),
            System::Staged => (1.0, n * c.tally.committed),
            System::StagedApplied => (4.0, n * c.tally.committed),
            other => panic!("{other} is not an injected system"),
        };
        assert_eq!(c.rounds_to_answer, Some(rounds), "{cell}");
        assert_eq!(c.hold.n as u64, held, "{cell}");
        assert!(
            c.hold.n == 0 || c.hold.p50 > std::time::Duration::ZERO,
            "{cell}"
        );
        // AND the delays reached the wire: one TransactWriteItems per native transfer, whose
        // latencies add up to at least the delays injected into them
        if c.system == System::Native {
            let (requests, delay) = c.injected.of("TransactWriteItems");
            assert_eq!(requests, c.tally.committed, "{cell}");
            let n = u32::try_from(c.applied.n).expect("a few transfers");
            let total = c.applied.mean * n + std::time::Duration::from_nanos(u64::from(n));
            assert!(total >= delay, "{cell}: {total:?} < {delay:?} injected");
        } else {
            assert_eq!(c.injected.of("TransactWriteItems").0, 0, "{cell}");
            assert_eq!(c.injected.requests(), c.requests.total(), "{cell}");
        }
    }

    // AND the report renders: every target of the measured cells evaluated (the injected ones
    // wait for the staged commit), a table row per cell, a chart
    let md = report::markdown(&report, std::time::SystemTime::now());
    assert!(md.contains("| uniform 2P | 1 | coordinator |"), "{md}");
    assert!(md.contains("| uniform 2P | 1 | classic |"), "{md}");
    assert!(
        md.contains("| exclusive 2P | – | floor: slowest of 3 writes |"),
        "{md}"
    );
    let staged_targets = twopc_bench::inject::report::targets(&report);
    assert!(!staged_targets.is_empty());
    assert!(
        report::targets(&report)
            .iter()
            .filter(|t| !staged_targets.contains(t))
            .all(|t| t.met.is_some())
    );
    let svg = report::svg(&report);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.matches("<rect").count() > expected_cells);
    let dir = std::env::temp_dir().join(format!("twopc-bench-quick-{}", std::process::id()));
    report::write(&report, &dir).expect("report written");
    assert!(dir.join("latest.md").exists() && dir.join("latest.json").exists());
    // AND latest.json lists the injected cells with the fields issue 22 names
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("latest.json")).expect("latest.json"),
    )
    .expect("JSON");
    let cells = json["injected"].as_array().expect("an `injected` list");
    assert_eq!(cells.len(), injected.cells.len());
    for c in cells {
        for key in [
            "workload",
            "system",
            "concurrency",
            "answerP50Ms",
            "answerP99Ms",
        ] {
            assert!(!c[key].is_null(), "{key} in {c}");
        }
        for key in ["appliedP50Ms", "floorP50Ms"] {
            assert!(c[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {c}");
        }
        assert!(c.get("roundTrips").is_some(), "{c}");
    }
    assert!(cells.iter().any(|c| c["system"] == "classic"));
    assert_eq!(json["injection"]["single"]["p50Ms"], 7.55);
    let _ = std::fs::remove_dir_all(dir);
}
