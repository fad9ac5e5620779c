//! `infra/dynamodb-local.sh` (what `make ddb-start`, `make watch` and every `make test` use):
//! one instance per state folder, told by the advisory lock the JVM holds, not by its pid. A
//! JVM killed with SIGKILL where nobody reaps it (this machine's PID 1 does not) lingers as a
//! zombie under its pid; the next start must not take it for a running instance.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/dynamodb-local.sh")
}

fn run(state: &Path, cmd: &str) -> Output {
    Command::new(script())
        .arg(cmd)
        .env("TWOPC_DDB_STATE_DIR", state)
        .env_remove("TWOPC_DDB_PORT")
        .output()
        .expect("run infra/dynamodb-local.sh")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).trim().to_owned()
}

/// The state letter of `/proc/<pid>/stat` (`Z` for a zombie), or `None` once the pid is gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn started(state: &Path) -> (String, u32) {
    let out = run(state, "start");
    assert!(out.status.success(), "start: {}", text(&out.stderr));
    let url = text(&out.stdout);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let pid = std::fs::read_to_string(state.join("pid"))
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    (url, pid)
}

#[test]
fn an_instance_killed_with_sigkill_does_not_block_the_next_start() {
    let state = std::env::temp_dir().join(format!(
        "twopc-ddb-script-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    let (url, pid) = started(&state);
    let status = run(&state, "status");
    assert_eq!(
        (status.status.success(), text(&status.stdout)),
        (true, url.clone())
    );

    // A live instance is refused, named.
    let second = run(&state, "start");
    assert!(!second.status.success());
    let err = text(&second.stderr);
    assert!(
        err.contains("already running") && err.contains(&format!("pid {pid}")),
        "{err}"
    );

    // SIGKILL: the JVM (an orphan of the script's shell, so PID 1's child) dies; where PID 1
    // does not reap, it stays a zombie with the same pid.
    assert!(
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("kill")
            .success()
    );
    let until = Instant::now() + Duration::from_secs(10);
    while !matches!(process_state(pid), None | Some('Z')) {
        assert!(Instant::now() < until, "pid {pid} still runs after SIGKILL");
        std::thread::sleep(Duration::from_millis(20)); // the kernel tearing it down
    }
    eprintln!("pid {pid} after SIGKILL: {:?}", process_state(pid));

    // The next start succeeds at once, and stop stops the new instance (not the dead pid).
    let (url2, pid2) = started(&state);
    assert_ne!(pid2, pid);
    assert_eq!(text(&run(&state, "status").stdout), url2);
    let stop = run(&state, "stop");
    assert!(stop.status.success(), "{}", text(&stop.stderr));
    assert!(matches!(process_state(pid2), None | Some('Z')));
    assert!(!run(&state, "status").status.success());
    let _ = std::fs::remove_dir_all(&state);
}
