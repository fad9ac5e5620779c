//! The report's rendering pinned: a small hand-built run (no DynamoDB, no timing) renders
//! `latest.md`, `latest.svg` and `latest.json` byte for byte as the files under
//! `tests/fixtures/report/` (named `<file>.expected`, so the pages' checks do not read the
//! Markdown as a page), so a change to how the report is written shows as a diff of those
//! files. The machine's description (its cores, CPU and memory) is the one part of the
//! Markdown that depends on where it runs: it is replaced by `<machine>` before comparing.

use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use twopc_bench::capacity::{Peaks, SLOTS, Units};
use twopc_bench::config::BenchConfig;
use twopc_bench::counter::{OPERATIONS, Requests};
use twopc_bench::inject::cells::{InjectedCell, InjectedRun};
use twopc_bench::inject::connector::Injected;
use twopc_bench::report;
use twopc_bench::stats::Latency;
use twopc_bench::systems::{System, Votes};
use twopc_bench::tables::Audit;
use twopc_bench::timing::{STEPS, Steps};
use twopc_bench::workload::{Contention, Workload};
use twopc_bench::{BurstResult, Capacity, CellResult, Costs, Report, Tally};

/// A figure of cell `k` that varies with the cell and with `salt`, within `1..=m`.
fn figure(k: u64, salt: u64, m: u64) -> u64 {
    (k.wrapping_mul(2_654_435_761) ^ salt.wrapping_mul(40_503)) % m + 1
}

fn latency(k: u64, base_us: u64) -> Latency {
    let p50 = base_us + figure(k, 1, base_us);
    Latency {
        n: figure(k, 2, 500) as usize,
        mean: Duration::from_micros(p50 + 37),
        p50: Duration::from_micros(p50),
        p95: Duration::from_micros(p50 * 2 + figure(k, 3, 900)),
        p99: Duration::from_micros(p50 * 3 + figure(k, 4, 2_000)),
        max: Duration::from_micros(p50 * 5 + figure(k, 5, 9_000)),
    }
}

fn units(k: u64, committed: u64) -> Units {
    let mut u = Units::default();
    for slot in 0..SLOTS {
        if figure(k, 10 + slot as u64, 3) == 1 {
            continue;
        }
        u.writes[slot] = committed * figure(k, 20 + slot as u64, 3);
        u.table[slot] = 2 * u.writes[slot] + figure(k, 30 + slot as u64, 5);
        u.index[slot] = figure(k, 40 + slot as u64, 40);
        u.refused[slot] = figure(k, 50 + slot as u64, 4) - 1;
        u.refused_estimate[slot] = 2 * u.refused[slot];
    }
    u.read = figure(k, 60, 100);
    u.puts = committed;
    u.put_bytes = committed * (300 + figure(k, 61, 200));
    u.anomalies = u64::from(k == 5);
    u
}

fn requests(k: u64, committed: u64, participants: u64) -> Requests {
    let mut by_op = [0; OPERATIONS.len()];
    by_op[0] = committed;
    by_op[1] = committed * (2 * participants + 2) + figure(k, 70, 7) - 1;
    by_op[3] = figure(k, 71, 3) - 1;
    Requests {
        by_op,
        rounds: committed * 5 + figure(k, 72, 4) - 1,
        bytes_sent: committed * 900 * participants,
        bytes_received: committed * 400 * participants,
        units: units(k + 100, committed),
    }
}

fn steps(k: u64, attempts: u64) -> Steps {
    let mut s = Steps::default();
    for i in 0..STEPS.len() {
        if figure(k, 80 + i as u64, 4) == 1 {
            continue;
        }
        s.calls[i] = attempts * figure(k, 90 + i as u64, 3);
        s.total[i] = Duration::from_micros(s.calls[i] * (700 + figure(k, 100 + i as u64, 900)));
    }
    s
}

fn tally(k: u64, participants: u64) -> Tally {
    let transfers = 200 + figure(k, 110, 300);
    let aborted = [
        figure(k, 111, 3) - 1,
        u64::from(k.is_multiple_of(7)),
        0,
        u64::from(k.is_multiple_of(11)),
    ];
    let never: u64 = aborted.iter().sum::<u64>() / 2;
    let committed = transfers - never;
    Tally {
        transfers,
        committed,
        aborted: [never, 0, 0, 0],
        failed: 0,
        attempts: committed + aborted.iter().sum::<u64>(),
        aborted_attempts: aborted,
        votes: Votes {
            reserved: (committed * participants) as u32,
            exclusive: u32::from(k.is_multiple_of(5)),
            fenced: u32::from(k.is_multiple_of(13)),
        },
        net: 0,
        writes: committed * participants,
        failures: vec![],
    }
}

fn audit(k: u64) -> Audit {
    Audit {
        items: 400,
        balance_sum: 400_000,
        version_sum: 1_000 + figure(k, 120, 1_000),
        max_fence: figure(k, 121, 30) as usize,
        max_item_bytes: 200 + figure(k, 122, 900),
        max_item_fence_bytes: figure(k, 123, 200),
        min_account_balance: Some(i128::from(999_000 - figure(k, 124, 5_000))),
        ..Audit::default()
    }
}

fn cell(k: u64, system: System, workload: Workload, concurrency: usize) -> CellResult {
    let n = workload.participants as u64;
    let tally = tally(k, n);
    CellResult {
        system,
        workload,
        concurrency,
        window: Duration::from_millis(400 + figure(k, 130, 300)),
        window_committed: tally.committed - figure(k, 131, 20),
        latency: latency(k, 2_000 * n),
        costs: Costs {
            requests: requests(k, tally.committed, n),
            cpu: Duration::from_micros(tally.committed * (150 + figure(k, 132, 400))),
            peak_rss_kib: Some(40_000 + figure(k, 133, 9_000)),
            steps: steps(k, tally.attempts),
            peaks: Peaks {
                reservations: figure(k, 134, 12),
                fence: figure(k, 135, 40),
                item_bytes: figure(k, 136, 2_000),
            },
        },
        capacity: Capacity {
            units: units(k, 50),
            committed: 50,
        },
        audit: audit(k),
        problems: if k == 17 {
            vec!["balance sum 399999 (expected 400000)".into()]
        } else {
            vec![]
        },
        tally,
    }
}

fn injected(config: &BenchConfig) -> InjectedRun {
    let injection = config.injection.clone().expect("the quick run injects");
    let mut cells = vec![];
    let mut k = 500;
    for &workload in &injection.workloads {
        for &concurrency in &injection.concurrency {
            for &system in System::INJECTED {
                k += 1;
                let n = workload.participants as u64;
                let tally = tally(k, n);
                let mut injected = Injected::default();
                injected.requests[1] = tally.committed * (2 * n + 2);
                injected.total[1] = Duration::from_millis(injected.requests[1] * 8);
                cells.push(InjectedCell {
                    system,
                    workload,
                    concurrency,
                    answer: latency(k, 20_000),
                    applied: latency(k, 40_000),
                    hold: latency(k + 1, 30_000),
                    rounds_to_answer: Some(system.critical_path(workload.participants) as f64),
                    requests: requests(k, tally.committed, n),
                    injected,
                    wall: Duration::from_millis(900 + figure(k, 140, 400)),
                    audit: audit(k),
                    problems: vec![],
                    tally,
                });
            }
        }
    }
    InjectedRun { injection, cells }
}

/// The quick run's shape on four workloads, every figure made up.
fn hand_built() -> Report {
    let mut config = BenchConfig::quick("http://localhost:8000");
    config.workloads = [
        (Contention::Uniform, 2),
        (Contention::Uniform, 8),
        (Contention::Hot, 2),
        (Contention::Hot, 8),
    ]
    .map(|(contention, participants)| Workload {
        contention,
        participants,
    })
    .to_vec();
    let unit_workload = Workload {
        contention: Contention::Uniform,
        participants: 1,
    };
    let mut k = 0;
    let unit = config
        .concurrency
        .iter()
        .map(|&c| {
            k += 1;
            cell(k, System::Unit, unit_workload, c)
        })
        .collect();
    let mut cells = vec![];
    for &w in &config.workloads {
        for &c in &config.concurrency {
            for s in config.transfer_systems() {
                k += 1;
                cells.push(cell(k, s, w, c));
            }
        }
    }
    let burst = config.burst.clone().expect("the quick run has a burst");
    let bursts = config
        .transfer_systems()
        .into_iter()
        .map(|system| {
            k += 1;
            let tally = tally(k, 2);
            BurstResult {
                system,
                burst: burst.clone(),
                runtime: Duration::from_millis(300 + figure(k, 150, 900)),
                latency: latency(k, 9_000),
                costs: Costs {
                    requests: requests(k, tally.committed, 2),
                    cpu: Duration::from_millis(figure(k, 151, 90)),
                    peak_rss_kib: Some(50_000),
                    ..Costs::default()
                },
                audit: audit(k),
                problems: vec![],
                tally,
            }
        })
        .collect();
    let injected = Some(injected(&config));
    let mut r = Report {
        config,
        unit,
        cells,
        bursts,
        injected,
        wall: Duration::from_millis(61_234),
        cpu_total: (Duration::from_millis(45_678), Duration::from_millis(45_600)),
        peak_rss_kib: Some(123_456),
        make_wall: Some(Duration::from_secs(95)),
        load: (Some("1.50 1.20 0.90".into()), Some("1.80 1.40 1.00".into())),
        previous: None,
    };
    // The previous report: this one's figures, so each ratio is compared with itself.
    r.previous = Some(report::json(&r));
    r
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report")
}

/// The Markdown with the machine's description replaced by `<machine>`.
fn without_machine(md: &str) -> String {
    let start = md.find("Machine: ").map(|i| i + "Machine: ".len());
    let end = md.find("; DynamoDB Local (a JVM");
    match (start, end) {
        (Some(s), Some(e)) if s <= e => format!("{}<machine>{}", &md[..s], &md[e..]),
        _ => md.to_owned(),
    }
}

#[test]
fn a_hand_built_run_renders_as_the_committed_report() {
    // GIVEN a run's results built by hand, and a fixed moment
    let r = hand_built();
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);

    // WHEN the three files of the report are rendered
    let rendered = [
        ("latest.md", without_machine(&report::markdown(&r, now))),
        ("latest.svg", report::svg(&r)),
        (
            "latest.json",
            serde_json::to_string_pretty(&report::json(&r)).expect("JSON") + "\n",
        ),
    ];

    // THEN each is the committed fixture, byte for byte (a mismatch leaves the rendering
    // beside the fixture's name in the temporary folder, to diff)
    let out = std::env::temp_dir().join(format!("twopc-bench-report-{}", std::process::id()));
    let mut differ = vec![];
    for (name, text) in &rendered {
        let expected = std::fs::read_to_string(fixtures().join(format!("{name}.expected")))
            .unwrap_or_default();
        if *text != expected {
            std::fs::create_dir_all(&out).expect("temporary folder");
            std::fs::write(out.join(name), text).expect("rendering written");
            differ.push(name.to_owned());
        }
    }
    assert!(
        differ.is_empty(),
        "{differ:?} differ from tests/fixtures/report/: the renderings are in {}",
        out.display()
    );
}
