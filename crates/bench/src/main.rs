//! `twopc-bench`: the protocol against native `TransactWriteItems` under a production model of
//! DynamoDB laid over a real engine (`make bench`), and the report and the pages' figures
//! rendered from `latest.json` (`render`). `--help` lists the options.
//!
//! Exit status 1 if a correctness check failed, 2 if the bench could not run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use twopc_bench::config::BenchConfig;
use twopc_bench::report;
use twopc_bench::systems::System;
use twopc_bench::workload::{Contention, Workload};
use twopc_engine::{EmbeddedEngine, Storage};

#[derive(Parser, Debug)]
#[command(name = "twopc-bench", about, version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    bench: BenchArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Render `latest.md` from a `latest.json` (and, with `--page`, the summary block of a page).
    Render {
        /// The report's folder.
        #[arg(long, default_value = "bench/results")]
        out: PathBuf,
        /// A page whose summary block to rewrite (e.g. docs/bench.md).
        #[arg(long)]
        page: Vec<PathBuf>,
    },
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// A seconds-long run of the same shape.
    #[arg(long)]
    quick: bool,
    /// The engine under the model: `dynamodb-local` (at --endpoint), `embedded` (the
    /// project's engine, twopc-engine, started in this process, in memory), or an engine's URL.
    #[arg(long, default_value = "dynamodb-local")]
    engine: String,
    /// DynamoDB Local's URL (set by `infra/dynamodb-local.sh run`).
    #[arg(
        long,
        env = "TWOPC_DYNAMODB_ENDPOINT",
        default_value = "http://127.0.0.1:8000",
        hide = true
    )]
    endpoint: String,
    /// Where `latest.json` and `latest.md` go.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// Only these workloads (e.g. `hot2,uniform8`).
    #[arg(long, value_delimiter = ',', value_parser = parse_workload)]
    workloads: Vec<Workload>,
    /// Only these concurrencies (e.g. `1,32`).
    #[arg(long, value_delimiter = ',')]
    concurrency: Vec<usize>,
    /// Only these systems (native, auto, staged, classic).
    #[arg(long, value_delimiter = ',', value_parser = parse_system)]
    systems: Vec<System>,
    /// Measured milliseconds (model time) per repeat.
    #[arg(long)]
    measure_ms: Option<u64>,
    /// Repeats per cell.
    #[arg(long)]
    repeats: Option<u32>,
    /// One dilation factor for every cell (every time of the model this many times longer).
    #[arg(long)]
    dilation: Option<u32>,
    /// The main grid only: no sensitivity or crossing rows.
    #[arg(long)]
    grid_only: bool,
}

fn parse_workload(text: &str) -> Result<Workload, String> {
    let (name, n) = text.split_at(
        text.find(|c: char| c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let contention = match name {
        "uniform" => Contention::Uniform,
        "hot" => Contention::Hot,
        "moving" => Contention::Moving,
        _ => {
            return Err(format!(
                "{text:?}: a workload is uniform<N>, hot<N> or moving<N>, e.g. hot2"
            ));
        }
    };
    let participants = n
        .parse::<usize>()
        .ok()
        .filter(|p| *p >= 2 && p % 2 == 0)
        .ok_or_else(|| format!("{text:?}: participants are an even number, 2 or more"))?;
    Ok(Workload {
        contention,
        participants,
    })
}

fn parse_system(text: &str) -> Result<System, String> {
    System::from_name(text)
        .ok_or_else(|| format!("{text:?}: a system is one of native, auto, staged, classic"))
}

impl BenchArgs {
    /// The engine's name for the report, its URL, and the embedded engine when it is the one
    /// (it stops when dropped).
    fn engine(&self) -> Result<(String, String, Option<EmbeddedEngine>), String> {
        match self.engine.as_str() {
            "dynamodb-local" => Ok((
                twopc_bench::config::DYNAMODB_LOCAL.into(),
                self.endpoint.clone(),
                None,
            )),
            "embedded" => {
                let engine = EmbeddedEngine::start(Storage::InMemory)
                    .map_err(|e| format!("starting the embedded engine: {e}"))?;
                let url = engine.endpoint().to_owned();
                let name = "the embedded engine (twopc-engine, in memory, in the bench's process)";
                Ok((name.into(), url, Some(engine)))
            }
            url if url.starts_with("http://") || url.starts_with("https://") => {
                Ok((format!("the engine at {url}"), url.to_owned(), None))
            }
            other => Err(format!(
                "--engine {other:?}: an engine is dynamodb-local, embedded or a URL"
            )),
        }
    }

    fn config(&self, engine: String, endpoint: &str) -> BenchConfig {
        let mut c = if self.quick {
            BenchConfig::quick(endpoint)
        } else {
            BenchConfig::full(endpoint)
        };
        c.engine = engine;
        if !self.workloads.is_empty() {
            c.workloads.clone_from(&self.workloads);
        }
        if !self.concurrency.is_empty() {
            c.concurrency.clone_from(&self.concurrency);
            c.hot_concurrency.clone_from(&self.concurrency);
            c.moving_concurrency.clone_from(&self.concurrency);
        }
        if !self.systems.is_empty() {
            c.systems.clone_from(&self.systems);
        }
        if let Some(ms) = self.measure_ms {
            c.measure = Duration::from_millis(ms);
        }
        if let Some(n) = self.repeats {
            c.repeats = n.max(1);
        }
        if let Some(k) = self.dilation {
            c.dilation = vec![(usize::MAX, k.max(1))];
        }
        if self.grid_only {
            c.sensitivity.rows.clear();
            c.crossing.rows.clear();
        }
        c
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Render { out, page }) => render(&out, &page),
        None => bench(&cli.bench).await,
    }
}

async fn bench(args: &BenchArgs) -> ExitCode {
    let (engine, endpoint, _embedded) = match args.engine() {
        Ok(e) => e,
        Err(why) => {
            eprintln!("twopc-bench: {why}");
            return ExitCode::from(2);
        }
    };
    let config = args.config(engine, &endpoint);
    eprintln!(
        "twopc-bench: {} run on {} ({})",
        config.mode, config.engine, config.endpoint
    );
    let started = Instant::now();
    let progress = |line: &str| eprintln!("  [{:>4.0} s] {line}", started.elapsed().as_secs_f64());
    let report = match twopc_bench::run(&config, &progress).await {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if let Err(e) = report::write(&report, &args.out) {
        return fail(&e);
    }
    eprintln!(
        "twopc-bench: report in {} ({} s)",
        args.out.join("latest.md").display(),
        report.wall_seconds
    );
    if report.all_checks_pass() {
        ExitCode::SUCCESS
    } else {
        eprintln!("twopc-bench: CORRECTNESS CHECKS FAILED (see the report)");
        ExitCode::from(1)
    }
}

fn render(out: &std::path::Path, pages: &[PathBuf]) -> ExitCode {
    let result = report::read(&out.join("latest.json")).and_then(|r| {
        report::write(&r, out)?;
        for page in pages {
            report::rewrite_page(page, &r)?;
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Prints an error and its sources on one line; exit status 2.
fn fail(e: &(dyn std::error::Error + 'static)) -> ExitCode {
    eprintln!("twopc-bench: {}", twopc_bench::chain(e));
    ExitCode::from(2)
}
