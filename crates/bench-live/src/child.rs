//! `twopc serve` as a child process: started on a free loopback port with a data folder and a
//! data lake of the run's own (persisted DynamoDB Local, as `make run ARGS="--engine
//! dynamodb-local"` runs it: the engine the published results were measured on), waited for
//! until its API answers, stopped with SIGINT (Ctrl-C, as a user stops it), and checked to leave
//! no DynamoDB Local (`java`) behind.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::LiveError;
use super::http::Api;

/// How long a start may take (a JVM on a loaded 2-core machine, tables created on first start).
const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long `twopc serve` may take to stop after SIGINT (it stops DynamoDB Local: up to 5 s).
const STOP_WITHIN: Duration = Duration::from_secs(60);

/// Variables `twopc serve` reads as defaults for its options: removed, so the command line
/// alone says what it runs (`make test` exports `TWOPC_DYNAMODB_ENDPOINT`, for one). `RUST_LOG`
/// too: `twopc serve` then logs at its own default level, as under `make run`.
const SCRUBBED: &[&str] = &[
    "TWOPC_HOST",
    "TWOPC_PORT",
    "TWOPC_DYNAMODB_ENDPOINT",
    "TWOPC_DATA_DIR",
    "TWOPC_SWEEP_INTERVAL_MS",
    "TWOPC_TABLE_PREFIX",
    "TWOPC_LAKE_DIR",
    "TWOPC_WS_TOKEN",
    "RUST_LOG",
];

/// A running `twopc serve`.
pub struct Serve {
    child: Child,
    pid: u32,
    /// Its HTTP API.
    pub api: Api,
    /// Its base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// The shared WebSocket token it was started with (`--ws-token`, made for the run).
    pub ws_token: String,
    /// Its log (standard error).
    pub log: PathBuf,
    /// The DynamoDB Local it started (`dynamodb.pid` in the data folder).
    java: Option<u32>,
    /// How long it took until the API answered.
    pub startup: Duration,
    stopped: bool,
}

/// How a stop went (in JSON: its exit code, seconds, the `java` left).
#[derive(Clone, Debug)]
pub struct Stopped {
    /// `twopc serve`'s exit status.
    pub status: Option<ExitStatus>,
    /// How long it took to exit after SIGINT.
    pub took: Duration,
    /// A DynamoDB Local (`java`) still alive after `twopc serve` exited (then stopped here).
    pub java_left: Option<u32>,
}

impl serde::Serialize for Stopped {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde_json::json!({
            "exitCode": self.status.and_then(|st| st.code()),
            "success": self.status.is_some_and(|st| st.success()),
            "seconds": self.took.as_secs_f64(),
            "javaLeft": self.java_left,
        })
        .serialize(s)
    }
}

impl Stopped {
    /// Exited by itself, successfully, leaving nothing running.
    pub fn clean(&self) -> bool {
        self.status.is_some_and(|s| s.success()) && self.java_left.is_none()
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `pid` is a DynamoDB Local (and not a process that reused its pid).
fn is_dynamodb_local(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("DynamoDBLocal"))
}

fn signal(pid: u32, sig: &str) {
    // The workspace forbids `unsafe` (no libc::kill): the `kill` command sends it.
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The last `n` lines of a file, indented.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("\n    {l}"))
        .collect()
}

impl Serve {
    /// Starts `twopc serve --no-seed` with `data_dir` and `lake_dir`, its standard error into
    /// `log`, and waits until its API answers.
    pub async fn start(
        twopc: &Path,
        data_dir: &Path,
        lake_dir: &Path,
        log: &Path,
    ) -> Result<Serve, LiveError> {
        let port = free_port().map_err(|e| LiveError::io("a free port", e))?;
        let err = std::fs::File::create(log).map_err(|e| LiveError::io(log.display(), e))?;
        // The feed connects with the shared token (it subscribes to everything).
        let ws_token = format!("bench-{}", twopc_core::ids::TxId::random());
        let mut cmd = Command::new(twopc);
        cmd.arg("serve")
            .arg("--port")
            .arg(port.to_string())
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--lake-dir")
            .arg(lake_dir)
            .args(["--no-seed", "--engine", "dynamodb-local"])
            .arg("--ws-token")
            .arg(&ws_token)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        let started = Instant::now();
        let child = cmd.spawn().map_err(|e| {
            LiveError::Setup(format!(
                "cannot start {}: {e} (build it with `cargo build -p twopc`, or pass --twopc PATH)",
                twopc.display()
            ))
        })?;
        let pid = child.id().unwrap_or(0);
        let url = format!("http://127.0.0.1:{port}");
        let mut serve = Serve {
            child,
            pid,
            api: Api::new(&url),
            url,
            ws_token,
            log: log.to_path_buf(),
            java: None,
            startup: Duration::ZERO,
            stopped: false,
        };
        let until = started + READY_WITHIN;
        loop {
            // Ready when the API answers: a GET of an unknown transaction is a 404.
            let probe = format!("/transactions/{}", twopc_core::ids::TxId::random());
            if let Ok((404, _)) = serve.api.call("GET", &probe, None, None).await {
                break;
            }
            if let Ok(Some(status)) = serve.child.try_wait() {
                serve.stopped = true;
                return Err(LiveError::Setup(format!(
                    "twopc serve exited at start ({status}); last lines of {}:{}",
                    log.display(),
                    tail(log, 20)
                )));
            }
            if Instant::now() > until {
                let _ = serve.stop().await;
                return Err(LiveError::Setup(format!(
                    "twopc serve did not answer within {} s; last lines of {}:{}",
                    READY_WITHIN.as_secs(),
                    log.display(),
                    tail(log, 20)
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await; // a starting process gives no signal
        }
        serve.startup = started.elapsed();
        serve.java = std::fs::read_to_string(data_dir.join("dynamodb.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
        Ok(serve)
    }

    /// Stops it as Ctrl-C does (SIGINT), waits for it, and checks that the DynamoDB Local it
    /// started is gone too (stopping it here if not, and saying so).
    pub async fn stop(mut self) -> Stopped {
        self.stopped = true;
        let started = Instant::now();
        signal(self.pid, "INT");
        let status = match tokio::time::timeout(STOP_WITHIN, self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => {
                signal(self.pid, "KILL");
                let _ = self.child.wait().await;
                None
            }
        };
        let took = started.elapsed();
        let java_left = self
            .java
            .filter(|pid| alive(*pid) && is_dynamodb_local(*pid));
        if let Some(pid) = java_left {
            signal(pid, "TERM");
            let until = Instant::now() + Duration::from_secs(5);
            while alive(pid) && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(50)).await; // a foreign process's exit
            }
            if alive(pid) {
                signal(pid, "KILL");
            }
        }
        Stopped {
            status,
            took,
            java_left,
        }
    }
}

impl Drop for Serve {
    /// A run that failed half-way still stops its stack: SIGINT lets `twopc serve` stop its
    /// DynamoDB Local (a SIGKILL would leave the JVM running).
    fn drop(&mut self) {
        if !self.stopped && matches!(self.child.try_wait(), Ok(None)) {
            signal(self.pid, "INT");
            let until = Instant::now() + Duration::from_secs(15);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50)); // no runtime to await on in drop
            }
        }
    }
}
