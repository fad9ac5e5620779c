//! A Lambda function served locally by `cargo lambda watch`, for end-to-end tests of the
//! `lambda` transport.
//!
//! `cargo lambda watch --only-lambda-apis` serves both sides of Lambda: the Invoke API the
//! coordinator calls (`/2015-03-31/functions/NAME/invocations`) and the Runtime API the function
//! polls. The function process is the function's real binary (`target/debug/NAME`), started
//! here with its environment and pointed at that Runtime API, exactly as Lambda runs a
//! `provided.al2023` bootstrap. (Letting watch start it instead would `cargo run -p NAME`, whose
//! per-package feature resolution differs from the workspace build's and recompiles the AWS SDK
//! a second time inside a test.)
//!
//! Readiness is observed, never assumed: the server is up when it answers HTTP; the function is
//! up when a real call comes back from it.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use twopc_core::ids::TxId;
use twopc_core::message::{CompleteReply, CompleteRequest};
use twopc_core::op::Operation;
use twopc_core::ports::Transport;
use twopc_core::record::Target;
use twopc_function::var;
use twopc_runtime::transport::LambdaTransport;

/// The workspace's root folder.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The `cargo-lambda` executable: `TWOPC_CARGO_LAMBDA`, else the one `make tools` installs
/// into `.tools/venv`, else `cargo-lambda` on the `PATH`.
pub fn cargo_lambda() -> PathBuf {
    if let Ok(p) = std::env::var("TWOPC_CARGO_LAMBDA") {
        return PathBuf::from(p);
    }
    let venv = workspace_root().join(".tools/venv/bin/cargo-lambda");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("cargo-lambda")
}

/// The folder of the binaries built with the tests (`target/debug`).
fn bin_dir() -> PathBuf {
    // This test executable lives in target/debug/deps.
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| workspace_root().join("target/debug"))
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let t = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        newest = newest.max(t);
    }
    newest
}

/// The function's binary, checked to be newer than the sources it is built from.
fn function_binary(name: &str) -> PathBuf {
    let bin = bin_dir().join(name);
    let built = std::fs::metadata(&bin)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "{} is missing: build the functions first with `cargo build --workspace --bins` \
                 (`make test` does)",
                bin.display()
            )
        });
    let root = workspace_root();
    let sources = ["core", "dynamo", "runtime", name]
        .iter()
        .filter_map(|c| newest_mtime(&root.join("crates").join(c).join("src")))
        .max();
    if let Some(src) = sources {
        assert!(
            built >= src,
            "{} is older than its sources: rebuild with `cargo build --workspace --bins` \
             (`make test` does)",
            bin.display()
        );
    }
    bin
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One HTTP exchange; the status code of the answer, if any came.
fn http_status(port: u16, request: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// A function served by `cargo lambda watch` on a loopback port. Stopped when dropped.
pub struct LocalFunction {
    /// The Lambda API's URL (give it to the Lambda client as its endpoint).
    pub url: String,
    /// The function's name (its binary's name).
    pub name: String,
    /// The function's log (its stdout and stderr).
    pub log: PathBuf,
    logs: PathBuf,
    watch: Child,
    function: Option<Child>,
}

impl LocalFunction {
    /// Serves the binary `name` with these environment variables (its configuration).
    pub async fn start(name: &str, env: &[(&str, String)]) -> LocalFunction {
        let port = free_port();
        let logs = std::env::temp_dir().join(format!("twopc-lambda-{}", TxId::random()));
        std::fs::create_dir_all(&logs).expect("log folder");
        let watch_log = logs.join("watch.log");
        let log = logs.join(format!("{name}.log"));
        let out = |p: &Path| File::create(p).expect("log file");
        let watch = Command::new(cargo_lambda())
            .args([
                "lambda",
                "watch",
                "--only-lambda-apis",
                "-A",
                "127.0.0.1",
                "-P",
            ])
            .arg(port.to_string())
            .current_dir(workspace_root())
            .stdin(Stdio::null())
            .stdout(out(&watch_log))
            .stderr(out(&watch_log))
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e}; install cargo-lambda with `make tools` (or set \
                     TWOPC_CARGO_LAMBDA)",
                    cargo_lambda().display()
                )
            });
        let mut me = LocalFunction {
            url: format!("http://127.0.0.1:{port}"),
            name: name.to_owned(),
            log: log.clone(),
            logs: logs.clone(),
            watch,
            function: None,
        };
        // The server is up when it answers: a GET on the invoke route is refused (405) without
        // invoking anything.
        let probe = format!(
            "GET /2015-03-31/functions/{name}/invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_status(port, &probe).is_none() {
            if let Ok(Some(status)) = me.watch.try_wait() {
                panic!(
                    "cargo lambda watch exited ({status}):\n{}",
                    std::fs::read_to_string(&watch_log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "cargo lambda watch did not answer on port {port} within 60 s:\n{}",
                std::fs::read_to_string(&watch_log).unwrap_or_default()
            );
            // Polling a starting process: it offers no readiness signal to wait on.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        me.function = Some(
            Command::new(function_binary(name))
                .env(
                    "AWS_LAMBDA_RUNTIME_API",
                    format!("http://127.0.0.1:{port}/.rt/{name}"),
                )
                .env("AWS_LAMBDA_FUNCTION_NAME", name)
                .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
                .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .stdin(Stdio::null())
                .stdout(out(&log))
                .stderr(out(&log))
                .spawn()
                .expect("start the function"),
        );
        me.wait_for_function().await;
        me
    }

    /// A Lambda client for this server.
    pub async fn client(&self) -> aws_sdk_lambda::Client {
        aws_sdk_lambda::Client::new(&twopc_dynamo::sdk_config(Some(&self.url)).await)
    }

    /// The function is up when a call comes back from it: an abort of a transaction nobody
    /// began, on an item that does not exist, changes nothing and answers `alreadyDone`.
    async fn wait_for_function(&mut self) {
        let transport = LambdaTransport::new(self.client().await, Duration::from_secs(60));
        let target = Target::Lambda {
            function: self.name.clone(),
        };
        let probe = CompleteRequest {
            tx_id: TxId::random(),
            deadline: 0,
            began: 0,
            key: [(
                "id".to_owned(),
                serde_json::Value::String(format!("readiness-{}", TxId::random())),
            )]
            .into(),
            op: Operation::from_json("op", &serde_json::json!({"remove": ["probe"]}))
                .expect("a valid operation"),
            prune: None,
            refused: false,
        };
        let call = transport.abort(&target, &probe);
        tokio::pin!(call);
        let answer = loop {
            tokio::select! {
                answer = &mut call => break answer,
                // A function that dies at start (bad configuration) never answers: notice it.
                () = tokio::time::sleep(Duration::from_millis(100)) => {
                    if let Some(Ok(Some(status))) = self.function.as_mut().map(Child::try_wait) {
                        panic!("the {} function exited ({status}):\n{}", self.name, self.log_text());
                    }
                }
            }
        };
        match answer {
            Ok(CompleteReply::AlreadyDone) => {}
            other => panic!(
                "the {} function did not come up: {other:?}\n{}",
                self.name,
                self.log_text()
            ),
        }
    }

    /// What the function logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for LocalFunction {
    fn drop(&mut self) {
        for child in self.function.iter_mut().chain([&mut self.watch]) {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Keep the logs of a failed test for whoever investigates it.
        if std::thread::panicking() {
            eprintln!("function logs kept in {}", self.logs.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.logs);
        }
    }
}

/// The participant function's environment for a world's `service` table.
pub fn participant_env(w: &crate::World, service: &str) -> Vec<(&'static str, String)> {
    vec![
        (var::TRANSACTIONS_TABLE, w.tx_table.clone()),
        (var::PARTICIPANT_TABLE, w.table(service).to_owned()),
        (var::DYNAMODB_ENDPOINT, crate::endpoint()),
        (var::LOG, "info".to_owned()),
    ]
}
