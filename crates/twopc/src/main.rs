//! `twopc`: the local stack (`twopc serve`) and the command line that talks to it.

mod cli;
mod conformance;
mod console;
mod serve;
mod token;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "twopc", version, about = "dynamo-2pc: atomic changes across DynamoDB-backed services", after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    common: cli::Common,
}

const EXIT_CODES: &str = "Exit codes: 0 committed / done, 1 aborted, 2 error, 3 not decided yet (its coordinator or the sweeper ends it).";

#[derive(Subcommand)]
enum Command {
    /// Run the local stack: HTTP API, an embedded DynamoDB engine (or DynamoDB Local), sweeper.
    Serve(serve::ServeArgs),
    /// Submit a transaction from a JSON file (`-` reads standard input).
    Submit {
        /// The transaction (the shape of `POST /transactions`, docs/api.md, "A transaction").
        file: PathBuf,
        /// Idempotency key (a retry with the same key never applies twice).
        #[arg(long)]
        idempotency_key: Option<String>,
        #[command(flatten)]
        wait: cli::WaitArg,
    },
    /// Move an amount between two accounts (debit refused below zero).
    Transfer(cli::TransferArgs),
    /// Show a transaction.
    Status {
        /// Transaction id.
        tx_id: String,
    },
    /// List unfinished transactions, oldest deadline first (GET /transactions?status=pending).
    Pending(cli::PendingArgs),
    /// Create the deployed stack's demo items (accounts alice 200 and bob 0, wallets bob 0)
    /// through the API; a second run changes nothing.
    Seed,
    /// Run one recovery pass now.
    Sweep,
    /// List the accounts.
    Accounts,
    /// List the items of a participant service.
    Items {
        /// Service name (accounts, inventory).
        participant: String,
    },
    /// Play the participant conformance checks over HTTP against a running service (any
    /// language): exit 0 if it passes every one, 1 if not (docs/participants.md).
    Conformance(conformance::ConformanceArgs),
    /// Serve the operator console on 127.0.0.1 for the stack at --url, relaying its operator
    /// calls signed with your AWS credentials (SigV4), or with --token for a local stack.
    Console(console::ConsoleArgs),
    /// Mint a WebSocket token with the local stack's key (its data folder's).
    Token(token::TokenArgs),
    /// Show one item.
    Get {
        /// Service name.
        participant: String,
        /// The item's key value.
        id: String,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Serve(args) => {
            init_stderr_logs();
            serve::serve(args.clone())
                .await
                .map(|()| cli::EXIT_OK)
                .map_err(|e| cli::CliFailure::new("serve_failed", e.to_string()))
        }
        Command::Submit {
            file,
            idempotency_key,
            wait,
        } => cli::submit(&cli.common, file, idempotency_key.as_deref(), *wait).await,
        Command::Transfer(a) => cli::transfer(&cli.common, a).await,
        Command::Status { tx_id } => cli::status(&cli.common, tx_id).await,
        Command::Pending(a) => cli::pending(&cli.common, a).await,
        Command::Seed => cli::seed(&cli.common).await,
        Command::Sweep => cli::sweep(&cli.common).await,
        Command::Accounts => cli::items(&cli.common, "accounts").await,
        Command::Items { participant } => cli::items(&cli.common, participant).await,
        Command::Get { participant, id } => cli::get(&cli.common, participant, id).await,
        Command::Conformance(args) => conformance::run(args).await.map(|report| {
            if cli.common.json {
                println!("{}", serde_json::json!(report));
            } else {
                conformance::print(&report);
            }
            if report.failed == 0 {
                cli::EXIT_OK
            } else {
                conformance::EXIT_FAILED
            }
        }),
        Command::Token(args) => token::mint(args, cli.common.json),
        Command::Console(args) => console::run(&cli.common, args).await,
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            failure.print(cli.common.json);
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}

fn init_stderr_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // The embedded engine (dynoxide) warns of every error it answers: a failed condition
        // is an answer the protocol expects, not news.
        tracing_subscriber::EnvFilter::new(
            "info,aws_config=warn,aws_smithy_runtime=warn,dynoxide=error",
        )
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}
