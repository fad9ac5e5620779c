//! `twopc-bench-live` (`make bench-live`): the local stack from outside. `--help` lists the
//! options. Exit status 1 if a behaviour check failed, 2 if the run could not go on, 130 on
//! Ctrl-C (the stack it started is stopped).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use twopc_bench_live::LiveConfig;
use twopc_bench_live::report;

#[derive(Parser, Debug)]
#[command(name = "twopc-bench-live", about, version)]
struct LiveArgs {
    /// A minute-long run of the same shape (report in target/bench-live-quick/).
    #[arg(long)]
    quick: bool,
    /// The `twopc` binary (its debug build is what `make run` runs).
    #[arg(long, default_value = "target/debug/twopc")]
    twopc: PathBuf,
    /// Where `live.md` and `live.json` go (default bench/results, or target/bench-live-quick).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Transfers measured, fresh and aged.
    #[arg(long)]
    transfers: Option<usize>,
    /// Transfers in flight while measuring.
    #[arg(long)]
    concurrency: Option<usize>,
    /// Transfers that age the stack between the two measurements.
    #[arg(long)]
    age: Option<usize>,
    /// Transfers in flight while aging.
    #[arg(long)]
    age_concurrency: Option<usize>,
    /// Accounts the transfers move money among (at least 2).
    #[arg(long)]
    accounts: Option<usize>,
    /// A push later than this after its answer counts as missing.
    #[arg(long)]
    push_timeout_secs: Option<u64>,
    /// Keep the run's folder (data, lake, logs).
    #[arg(long)]
    keep: bool,
}

impl LiveArgs {
    fn config(&self) -> (LiveConfig, PathBuf) {
        let twopc = self.twopc.clone();
        let mut c = if self.quick {
            LiveConfig::quick(twopc)
        } else {
            LiveConfig::full(twopc)
        };
        let set = |field: &mut usize, v: Option<usize>| *field = v.unwrap_or(*field).max(1);
        set(&mut c.transfers, self.transfers);
        set(&mut c.concurrency, self.concurrency);
        set(&mut c.age, self.age);
        set(&mut c.age_concurrency, self.age_concurrency);
        c.accounts = self.accounts.unwrap_or(c.accounts).max(2);
        if let Some(s) = self.push_timeout_secs {
            c.push_timeout = Duration::from_secs(s.max(1));
        }
        c.keep = self.keep;
        let default = if self.quick {
            "target/bench-live-quick"
        } else {
            "bench/results"
        };
        (c, self.out.clone().unwrap_or_else(|| default.into()))
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    live(&LiveArgs::parse()).await
}

async fn live(args: &LiveArgs) -> ExitCode {
    let (config, out) = args.config();
    eprintln!(
        "twopc-bench-live: {} run of {} (N={} at {} in flight, K={} at {})",
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
        run = twopc_bench_live::run(&config, &progress) => run,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("twopc-bench-live: interrupted; the stack it started is stopped");
            return ExitCode::from(130);
        }
    };
    let report = match run {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if let Err(e) = report::write(&report, &out) {
        return fail(&e);
    }
    eprintln!(
        "twopc-bench-live: report in {} ({:.0} s)",
        out.join("live.md").display(),
        report.wall.as_secs_f64()
    );
    if report.all_checks_pass() {
        return ExitCode::SUCCESS;
    }
    for (what, ok) in report.checks() {
        if !ok {
            eprintln!("twopc-bench-live: CHECK FAILED: {what}");
        }
    }
    ExitCode::from(1)
}

/// Prints an error and its sources on one line; exit status 2.
fn fail(e: &(dyn std::error::Error + 'static)) -> ExitCode {
    eprintln!("twopc-bench-live: {}", twopc_bench::chain(e));
    ExitCode::from(2)
}
