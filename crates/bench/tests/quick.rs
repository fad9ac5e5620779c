//! The quick bench runs inside `make test`, so the bench cannot rot: against the DynamoDB Local
//! that `make test` starts, a seconds-long run under the production model must produce a sane
//! report, whose Markdown renders from its JSON alone.

use twopc_bench::config::BenchConfig;
use twopc_bench::report;
use twopc_bench::systems::System;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_bench_produces_a_sane_report_under_the_production_model() {
    // GIVEN the DynamoDB Local of `make test` and the quick parameters
    let endpoint = std::env::var("TWOPC_DYNAMODB_ENDPOINT")
        .expect("TWOPC_DYNAMODB_ENDPOINT is not set: run with `make test`");
    let config = BenchConfig::quick(&endpoint);

    // WHEN the whole bench runs
    let report = twopc_bench::run(&config, &|line| eprintln!("{line}"))
        .await
        .expect("the bench runs");

    // THEN every cell conserved balances, applied exactly the committed writes, left nothing
    assert!(report.all_checks_pass(), "{}", report::render(&report));

    // AND the main grid has every system at every workload and concurrency (classic at one
    // in flight), then one row per system per sensitivity variant and per crossing share
    let grid: usize = config
        .workloads
        .iter()
        .flat_map(|w| config.concurrency_of(*w))
        .map(|c| config.systems_at(*c).len())
        .sum();
    let (s, x) = (&config.sensitivity, &config.crossing);
    assert_eq!(
        report.cells.len(),
        grid + s.rows.len() * s.systems.len() + x.rows.len() * x.systems.len()
    );
    for c in &report.cells {
        assert!(
            c.committed > 0,
            "{} {} c={} committed nothing",
            c.system,
            c.workload,
            c.concurrency
        );
        assert!(
            c.answer.p50 > 0.0 && c.answer.p50 <= c.answer.p99 && c.answer.p99 <= c.answer.p999,
            "{c:?}"
        );
        assert!(c.write_units > 0.0 && c.delayed > 0, "{c:?}");
        assert!(
            c.cost.dynamodb > 0 && c.cost.dynamodb <= c.cost.dynamodb_high,
            "{c:?}"
        );
        assert_eq!(c.dilation, 2);
        // The protocol pays for its front door and its function; native for neither.
        let protocol = c.system != "native";
        assert_eq!(c.cost.rest_api > 0, protocol, "{c:?}");
        assert_eq!(c.deployed.p50 > c.answer.p50, protocol, "{c:?}");
    }

    // AND with one in flight, native answers in one round and the five-round path in five
    for (system, rounds) in [
        (System::Native, 1),
        (System::Staged, 1),
        (System::Classic, 5),
    ] {
        let c = report
            .cell("uniform 2P", system.name(), 1)
            .expect("a uniform 2P cell at one in flight");
        assert_eq!(c.rounds_to_answer, Some(rounds), "{system}");
    }

    // AND on a hot item at several in flight, the model made native meet conflicts
    let hot_native = report
        .cell("hot 2P", "native", 4)
        .expect("a hot native cell");
    assert!(hot_native.conflicts > 0.0, "{hot_native:?}");

    // AND latest.md is rendered from latest.json alone
    let dir = std::env::temp_dir().join(format!("twopc-bench-quick-{}", std::process::id()));
    report::write(&report, &dir).expect("report written");
    let back = report::read(&dir.join("latest.json")).expect("latest.json reads back");
    assert_eq!(back, report);
    let md = std::fs::read_to_string(dir.join("latest.md")).expect("latest.md");
    assert_eq!(md, report::render(&back));
    assert!(
        md.contains("## Sensitivity") && md.contains("## Crossing point"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `--engine embedded`: the project's own engine, started by the bench in its process, serves
/// a run, and the report says it did.
#[test]
fn the_bench_runs_on_the_embedded_engine_and_its_report_names_it() {
    // GIVEN an empty folder for the report
    let dir = std::env::temp_dir().join(format!("twopc-bench-embedded-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    // WHEN the bench binary runs one small cell with --engine embedded
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_twopc-bench"))
        .args(["--quick", "--engine", "embedded", "--workloads", "hot2"])
        .args(["--concurrency", "4", "--systems", "native,staged"])
        .arg("--out")
        .arg(&dir)
        .env_remove("TWOPC_DYNAMODB_ENDPOINT")
        .output()
        .expect("twopc-bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);

    // THEN it passed its checks on that engine, and the report names it
    assert!(out.status.success(), "{stderr}");
    let report = report::read(&dir.join("latest.json")).expect("latest.json");
    assert!(
        report.engine.starts_with("the embedded engine"),
        "{}",
        report.engine
    );
    assert!(report.all_checks_pass());
    let md = std::fs::read_to_string(dir.join("latest.md")).expect("latest.md");
    assert!(
        md.contains(&format!("the engine, {},", report.engine)),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
