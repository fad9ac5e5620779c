//! The quick live bench runs inside `make test`, so `make bench-live` cannot rot: the real
//! `twopc serve` (its debug build, which `make test` builds with `--bins`) with its own
//! persisted DynamoDB Local from `.tools/` (`make test` installs it). Behaviour only, never a
//! time: every transfer commits, every push arrives, the restart keeps the balances and
//! leaves nothing running.

use std::path::PathBuf;

use twopc_bench_live::{LiveConfig, report};

/// `twopc` beside this test's own binary (`target/<profile>/deps/..` → `target/<profile>/twopc`).
fn twopc_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("twopc"))
        .expect("target folder");
    assert!(
        bin.is_file(),
        "{} is missing: build it first (`cargo build -p twopc`; `make test` does)",
        bin.display()
    );
    bin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_live_bench_commits_pushes_and_keeps_balances_across_a_restart() {
    // GIVEN the quick parameters and the debug `twopc`
    let config = LiveConfig::quick(twopc_binary());

    // WHEN the whole live bench runs
    let r = twopc_bench_live::run(&config, &|line| eprintln!("{line}"))
        .await
        .expect("the live bench runs");
    let md = report::markdown(&r, std::time::SystemTime::now());

    // THEN every measured and aging transfer committed, and each was pushed
    assert_eq!(r.fresh.committed, config.transfers, "{md}");
    assert_eq!(r.aged.committed, config.transfers, "{md}");
    assert_eq!(r.aging.committed, config.age, "{md}");
    assert_eq!(
        (r.fresh.missing, r.aged.missing, r.aging.missing),
        (0, 0, 0),
        "{md}"
    );
    assert_eq!(r.fresh.push.n, config.transfers, "{md}");
    assert!(r.fresh.messages >= config.transfers, "{md}");

    // AND the restart kept every balance (and their sum), new transfers commit and are pushed
    assert!(r.restart.balances_kept(), "{md}");
    assert_eq!(r.restart.after.len(), config.accounts, "{md}");
    assert_eq!(r.restart.after_committed, config.after_restart, "{md}");
    assert_eq!(r.restart.after_pushed, r.restart.after_committed, "{md}");

    // AND `twopc serve` stopped on SIGINT both times, leaving no DynamoDB Local running
    for stop in [&r.restart.first_stop, &r.restart.second_stop] {
        let stop = stop.as_ref().expect("stopped");
        assert!(stop.clean(), "{stop:?}\n{md}");
    }
    assert!(r.all_checks_pass(), "{md}");

    // AND the report renders, every section present
    for section in [
        "## Fresh and aged",
        "## Aging",
        "## Stage breakdown",
        "## Restart",
        "## Checks",
    ] {
        assert!(md.contains(section), "{section}\n{md}");
    }
    let dir = std::env::temp_dir().join(format!("twopc-bench-live-quick-{}", std::process::id()));
    report::write(&r, &dir).expect("report written");
    assert!(dir.join("live.md").exists() && dir.join("live.json").exists());
    let _ = std::fs::remove_dir_all(dir);
}
