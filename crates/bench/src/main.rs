//! `twopc-bench`: runs the benchmark against DynamoDB Local and writes the report.
//!
//! ```text
//! twopc-bench [--quick] [--endpoint URL] [--out DIR] [--measure-secs S]
//!             [--burst-rate R] [--burst-seconds S] [--no-burst]
//!             [--systems native,coordinator,serial,unit] [--workloads uniform2,hot8,...]
//!             [--concurrency 1,8,32] [--accounts N] [--fence-capacity N] [--no-write-units]
//!             [--only injected] [--no-injected] [--injected-transfers N]
//!             [--injected-concurrency 1,4] [--lambda-hop-ms MS]
//! ```
//!
//! The filters run a part of the bench (to profile one system, say); `make bench` runs it all.
//! `--only injected` runs only the injected-latency cells ([`twopc_bench::inject`]; report in
//! `target/bench-injected/` unless `--out` says otherwise);
//! `--lambda-hop-ms` adds a Lambda invoke's time (default 0: the `direct` transport) before
//! every participant call of the coordinator in those cells.
//!
//! The endpoint defaults to `TWOPC_DYNAMODB_ENDPOINT` (set by `infra/dynamodb-local.sh run`);
//! the report goes to `bench/results/` (`latest.md`, `latest.svg`, `latest.json`).
//! `TWOPC_BENCH_STARTED` (epoch seconds, set by `make bench`) lets the report state the wall
//! time of the whole `make bench`. Exit status 1 if any correctness check failed.
//!
//! `twopc-bench live [--quick] [--twopc PATH] [--out DIR] ...` is the other bench (`make
//! bench-live`, [`twopc_bench::live`]): the local stack from outside; see [`LIVE_USAGE`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use twopc_bench::config::BenchConfig;
use twopc_bench::inject::Injection;
use twopc_bench::live::LiveConfig;
use twopc_bench::report;
use twopc_bench::systems::System;
use twopc_bench::workload::{Contention, Workload};

const USAGE: &str = "usage: twopc-bench [--quick] [--endpoint URL] [--out DIR] [--measure-secs S] \
                     [--burst-rate R] [--burst-seconds S] [--no-burst] [--systems native,coordinator,serial,unit] \
                     [--workloads uniform2,uniform8,hot2,hot8,exclusive2] [--concurrency 1,8,32] [--accounts N] [--fence-capacity N] [--no-write-units] \
                     [--only injected] [--no-injected] [--injected-transfers N] [--injected-concurrency 1,4] [--lambda-hop-ms MS]";

struct Args {
    config: BenchConfig,
    out: PathBuf,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let args: Vec<String> = args.collect();
    let value = |i: usize| {
        args.get(i + 1)
            .cloned()
            .ok_or_else(|| format!("{} needs a value\n{USAGE}", args[i]))
    };
    let number = |i: usize| -> Result<f64, String> {
        value(i)?
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| format!("{} needs a positive number\n{USAGE}", args[i]))
    };
    let endpoint = match args.iter().position(|a| a == "--endpoint") {
        Some(i) => value(i)?,
        None => std::env::var("TWOPC_DYNAMODB_ENDPOINT").map_err(|_| {
            format!(
                "no DynamoDB endpoint: pass --endpoint URL or set TWOPC_DYNAMODB_ENDPOINT \
                 (`make bench` starts DynamoDB Local and sets it)\n{USAGE}"
            )
        })?,
    };
    let mut config = if args.iter().any(|a| a == "--quick") {
        BenchConfig::quick(&endpoint)
    } else {
        BenchConfig::full(&endpoint)
    };
    let mut out = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--quick" => {}
            "--endpoint" => i += 1,
            "--out" => {
                out = Some(PathBuf::from(value(i)?));
                i += 1;
            }
            "--measure-secs" => {
                config.measure = Duration::from_secs_f64(number(i)?);
                i += 1;
            }
            "--burst-rate" => {
                let rate = number(i)? as u32;
                if let Some(b) = config.burst.as_mut() {
                    b.rate = rate.max(1);
                }
                i += 1;
            }
            "--burst-seconds" => {
                let secs = number(i)?;
                if let Some(b) = config.burst.as_mut() {
                    b.seconds = secs;
                }
                i += 1;
            }
            "--no-burst" => config.burst = None,
            "--no-write-units" => config.write_units = false,
            "--accounts" => {
                config.accounts = number(i)? as u32;
                i += 1;
            }
            "--fence-capacity" => {
                config.fence_capacity = (number(i)? as usize).max(1);
                i += 1;
            }
            "--only" => match value(i)?.as_str() {
                "injected" => {
                    config.only_injected = true;
                    i += 1;
                }
                other => {
                    return Err(format!(
                        "--only {other:?}: only `injected` is known\n{USAGE}"
                    ));
                }
            },
            "--no-injected" => config.injection = None,
            "--injected-transfers" => {
                let n = number(i)? as usize;
                injection(&mut config)?.transfers = n.max(1);
                i += 1;
            }
            "--injected-concurrency" => {
                let list = concurrency_list(&value(i)?)?;
                injection(&mut config)?.concurrency = list;
                i += 1;
            }
            "--lambda-hop-ms" => {
                let ms = value(i)?
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| {
                        format!("--lambda-hop-ms needs a number of ms, 0 or more\n{USAGE}")
                    })?;
                injection(&mut config)?.model.lambda_hop = Duration::from_secs_f64(ms / 1e3);
                i += 1;
            }
            "--systems" => {
                config.systems = value(i)?
                    .split(',')
                    .map(|n| {
                        System::from_name(n).ok_or_else(|| {
                            format!("unknown system {n:?}: native, coordinator, serial, unit")
                        })
                    })
                    .collect::<Result<_, _>>()?;
                i += 1;
            }
            "--concurrency" => {
                config.concurrency = concurrency_list(&value(i)?)?;
                i += 1;
            }
            "--workloads" => {
                config.workloads = value(i)?
                    .split(',')
                    .map(parse_workload)
                    .collect::<Result<_, _>>()?;
                i += 1;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
        i += 1;
    }
    if config.only_injected && config.injection.is_none() {
        return Err(format!(
            "--only injected and --no-injected exclude each other\n{USAGE}"
        ));
    }
    // A partial run does not replace the committed report unless asked to.
    let out = out.unwrap_or_else(|| {
        PathBuf::from(if config.only_injected {
            "target/bench-injected"
        } else {
            "bench/results"
        })
    });
    Ok(Args { config, out })
}

/// The injected cells' parameters, to change (an error after `--no-injected`).
fn injection(config: &mut BenchConfig) -> Result<&mut Injection, String> {
    config
        .injection
        .as_mut()
        .ok_or_else(|| format!("the injected cells are off (--no-injected)\n{USAGE}"))
}

/// `1,8,32`.
fn concurrency_list(text: &str) -> Result<Vec<usize>, String> {
    text.split(',')
        .map(|n| {
            n.parse()
                .ok()
                .filter(|c| *c > 0)
                .ok_or_else(|| format!("bad concurrency {n:?}"))
        })
        .collect()
}

/// `uniform2`, `hot8`, ...
fn parse_workload(text: &str) -> Result<Workload, String> {
    let bad = || format!("bad workload {text:?}: uniform2, uniform8, hot2, hot8, exclusive2, ...");
    let (contention, n) = if let Some(n) = text.strip_prefix("uniform") {
        (Contention::Uniform, n)
    } else if let Some(n) = text.strip_prefix("hot") {
        (Contention::Hot, n)
    } else if let Some(n) = text.strip_prefix("exclusive") {
        (Contention::Exclusive, n)
    } else {
        return Err(bad());
    };
    let participants: usize = n.parse().map_err(|_| bad())?;
    if participants < 2 || !participants.is_multiple_of(2) {
        return Err(bad());
    }
    Ok(Workload {
        contention,
        participants,
    })
}

const LIVE_USAGE: &str = "usage: twopc-bench live [--quick] [--twopc PATH] [--out DIR] \
                          [--transfers N] [--concurrency C] [--age K] [--age-concurrency C] \
                          [--accounts N] [--push-timeout-secs S] [--keep]\n\
                          --twopc defaults to target/debug/twopc (what `make run` runs); the \
                          report goes to bench/results/live.{md,json} (--quick: target/bench-live-quick/)";

fn parse_live(args: &[String]) -> Result<(LiveConfig, PathBuf), String> {
    let value = |i: usize| {
        args.get(i + 1)
            .cloned()
            .ok_or_else(|| format!("{} needs a value\n{LIVE_USAGE}", args[i]))
    };
    let count = |i: usize| -> Result<usize, String> {
        value(i)?
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{} needs a positive whole number\n{LIVE_USAGE}", args[i]))
    };
    let quick = args.iter().any(|a| a == "--quick");
    let twopc = PathBuf::from("target/debug/twopc");
    let mut config = if quick {
        LiveConfig::quick(twopc)
    } else {
        LiveConfig::full(twopc)
    };
    let mut out = PathBuf::from(if quick {
        "target/bench-live-quick"
    } else {
        "bench/results"
    });
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--quick" => {}
            "--keep" => config.keep = true,
            "--twopc" => {
                config.twopc = PathBuf::from(value(i)?);
                i += 1;
            }
            "--out" => {
                out = PathBuf::from(value(i)?);
                i += 1;
            }
            "--transfers" => {
                config.transfers = count(i)?;
                i += 1;
            }
            "--concurrency" => {
                config.concurrency = count(i)?;
                i += 1;
            }
            "--age" => {
                config.age = count(i)?;
                i += 1;
            }
            "--age-concurrency" => {
                config.age_concurrency = count(i)?;
                i += 1;
            }
            "--accounts" => {
                config.accounts = count(i)?.max(2);
                i += 1;
            }
            "--push-timeout-secs" => {
                config.push_timeout = Duration::from_secs(count(i)? as u64);
                i += 1;
            }
            "-h" | "--help" => return Err(LIVE_USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{LIVE_USAGE}")),
        }
        i += 1;
    }
    Ok((config, out))
}

async fn live(args: &[String]) -> ExitCode {
    let (config, out) = match parse_live(args) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "twopc-bench live: {} run of {} (N={} at {} in flight, K={} at {})",
        config.mode,
        config.twopc.display(),
        config.transfers,
        config.concurrency,
        config.age,
        config.age_concurrency
    );
    let started = Instant::now();
    let progress = |line: &str| eprintln!("  [{:>4.0} s] {line}", started.elapsed().as_secs_f64());
    // Ctrl-C (or a SIGINT to this process alone) drops the run, and with it the stack it
    // started: `Serve`'s drop stops `twopc serve`, which stops its DynamoDB Local.
    let run = tokio::select! {
        run = twopc_bench::live::run(&config, &progress) => run,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("twopc-bench live: interrupted; the stack it started is stopped");
            return ExitCode::from(130);
        }
    };
    let mut report = match run {
        Ok(r) => r,
        Err(e) => {
            eprintln!("twopc-bench live: {e}");
            return ExitCode::from(2);
        }
    };
    report.make_wall = make_wall();
    if let Err(e) = twopc_bench::live::report::write(&report, &out) {
        eprintln!("twopc-bench live: {e}");
        return ExitCode::from(2);
    }
    for (what, goal, measured, met) in twopc_bench::live::report::targets(&report) {
        eprintln!(
            "  target {what:<32} {goal:<6} {:<7} {measured}",
            if met { "met" } else { "MISSED" }
        );
    }
    eprintln!(
        "twopc-bench live: report in {} ({:.0} s)",
        out.join("live.md").display(),
        report.wall.as_secs_f64()
    );
    if report.all_checks_pass() {
        ExitCode::SUCCESS
    } else {
        for (what, ok) in report.checks() {
            if !ok {
                eprintln!("twopc-bench live: CHECK FAILED: {what}");
            }
        }
        ExitCode::from(1)
    }
}

/// The wall time of the whole `make` target, from `TWOPC_BENCH_STARTED` (epoch seconds).
fn make_wall() -> Option<Duration> {
    std::env::var("TWOPC_BENCH_STARTED")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .and_then(|t0| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
            now.checked_sub(Duration::from_secs_f64(t0))
        })
}

#[tokio::main]
async fn main() -> ExitCode {
    let all: Vec<String> = std::env::args().skip(1).collect();
    if all.first().map(String::as_str) == Some("live") {
        return live(&all[1..]).await;
    }
    let args = match parse(all.into_iter()) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "twopc-bench: {} run against {}",
        args.config.mode, args.config.endpoint
    );
    let progress = |line: &str| eprintln!("  {line}");
    let mut report = match twopc_bench::run(&args.config, &progress).await {
        Ok(r) => r,
        Err(e) => {
            let mut msg = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                source = s.source();
            }
            eprintln!("twopc-bench: {msg}");
            return ExitCode::from(2);
        }
    };
    report.make_wall = make_wall();
    // The report it replaces, if any: the uniform figures are compared with it.
    report.previous = std::fs::read_to_string(args.out.join("latest.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    if let Err(e) = report::write(&report, &args.out) {
        eprintln!(
            "twopc-bench: {e}: {}",
            std::error::Error::source(&e).map_or(String::new(), |s| s.to_string())
        );
        return ExitCode::from(2);
    }
    for t in report::targets(&report) {
        eprintln!(
            "  target {:<55} {:<28} {:<12} {}",
            t.what,
            t.goal,
            match t.met {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "-",
            },
            t.measured
        );
    }
    eprintln!(
        "twopc-bench: report in {} ({:.0} s)",
        args.out.join("latest.md").display(),
        report.wall.as_secs_f64()
    );
    if report.all_checks_pass() {
        ExitCode::SUCCESS
    } else {
        eprintln!("twopc-bench: CORRECTNESS CHECKS FAILED (see the report)");
        ExitCode::from(1)
    }
}
