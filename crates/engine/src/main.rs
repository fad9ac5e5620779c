//! `twopc-engine`: the embedded DynamoDB engine as a process of its own, for test harnesses and
//! the bench. Serves until Ctrl-C (printing its URL), or runs a command against it and exits
//! with that command's status.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use twopc_engine::{EmbeddedEngine, EngineError, Storage};
// The variable the suites, `twopc serve` and the functions read a DynamoDB endpoint from.
use twopc_function::var::DYNAMODB_ENDPOINT;

#[derive(Parser)]
#[command(
    name = "twopc-engine",
    version,
    about = "Serve DynamoDB's API from the embedded engine (dynoxide) on 127.0.0.1",
    after_help = "Without COMMAND: prints the endpoint URL on one line, serves until Ctrl-C or SIGTERM.\n\
                  With COMMAND: runs it with TWOPC_DYNAMODB_ENDPOINT set to the URL, then stops; \
                  exits with its status."
)]
struct Args {
    /// Port on 127.0.0.1 (0: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Keep the tables in DIR/dynamodb.sqlite (created if missing) instead of in memory.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// A command to run against the engine.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let storage = args
        .data_dir
        .as_deref()
        .map_or(Storage::InMemory, Storage::in_folder);
    match run(args.port, storage, &args.command).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("twopc-engine: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(port: u16, storage: Storage, command: &[String]) -> Result<ExitCode, EngineError> {
    let engine = EmbeddedEngine::start_on_port(storage, port)?;
    let code = match command.split_first() {
        None => {
            println!("{}", engine.endpoint());
            let _ = std::io::stdout().flush();
            shutdown_signal().await;
            ExitCode::SUCCESS
        }
        Some((program, rest)) => {
            eprintln!("twopc-engine: {}", engine.endpoint());
            run_command(program, rest, engine.endpoint()).await
        }
    };
    engine.shutdown().await?;
    Ok(code)
}

/// Runs the command to its end; a Ctrl-C reaches it from the terminal as it reaches us, so we
/// only wait for it.
async fn run_command(program: &str, args: &[String], endpoint: &str) -> ExitCode {
    let status = tokio::process::Command::new(program)
        .args(args)
        .env(DYNAMODB_ENDPOINT, endpoint)
        .status();
    let status = tokio::select! {
        status = status => status,
        never = ignore_interrupts() => match never {},
    };
    match status {
        Ok(s) => s
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .map_or(ExitCode::FAILURE, ExitCode::from),
        Err(e) => {
            eprintln!("twopc-engine: cannot run {program}: {e}");
            ExitCode::from(127)
        }
    }
}

/// Swallows Ctrl-C while the command runs (it gets its own and ends; then we stop).
async fn ignore_interrupts() -> std::convert::Infallible {
    loop {
        if tokio::signal::ctrl_c().await.is_err() {
            return std::future::pending().await;
        }
    }
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}
