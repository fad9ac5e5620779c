//! The live page in headless Chromium (Debian `chromium`, driven by playwright-core from npm;
//! `make browser-tools` installs both, `make test` runs it): load `/`, submit a transfer, see
//! the pushed update on the page. The screenshot is kept as `target/artifacts/live-page.png`.

mod common;

use std::path::PathBuf;

use common::{interrupt, start_on_shared};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_page_shows_a_transfer_pushed_over_the_websocket() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("tests/browser/live-page.mjs");
    assert!(
        root.join("tests/browser/node_modules/playwright-core")
            .is_dir(),
        "playwright-core is missing: run `make browser-tools` (make test does)"
    );
    let (serve, _) = start_on_shared("browser", &[]).await;
    let artifacts = root.join("target/artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts folder");
    let shot = artifacts.join("live-page.png");
    let _ = std::fs::remove_file(&shot);
    let out = tokio::process::Command::new("node")
        .arg(&script)
        .arg(format!("{}/", serve.url))
        .arg(&shot)
        .output()
        .await
        .expect("run node");
    let _ = interrupt(serve).await;
    assert!(
        out.status.success(),
        "browser check failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::metadata(&shot)
            .map(|m| m.len() > 10_000)
            .unwrap_or(false),
        "no screenshot at {}",
        shot.display()
    );
}
