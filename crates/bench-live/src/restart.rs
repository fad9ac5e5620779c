//! The restart of `twopc-bench live`: stop the stack with SIGINT, start it on the same data
//! folder, check the balances, count what is delivered again (WebSocket messages, lake rows)
//! of what was delivered before, and check that new transfers are still pushed.

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use serde_json::Value;

use super::child::{Serve, Stopped};
use super::http::Feed;
use super::load::{self, Transfer};
use super::phases::push_latency;
use super::{LiveConfig, LiveError, MESSAGES_PER_TRANSFER, Restart};

/// The restart: what was committed stays; what was delivered is delivered again rarely.
pub(super) async fn restart(
    cfg: &LiveConfig,
    (serve, feed): (Serve, Feed),
    (root, data, lake): (&Path, &Path, &Path),
    accounts: &[String],
    r: &mut Restart,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), LiveError> {
    r.before = serve.api.balances().await?;
    let before = Delivered::read(&feed, lake, r);
    feed.close().await;
    progress("restart: SIGINT");
    let stopped = serve.stop().await;
    progress(&stop_line(&stopped));
    r.first_stop = Some(stopped);
    let serve = Serve::start(&cfg.twopc, data, lake, &root.join("serve-2.log")).await?;
    r.startups.push(serve.startup);
    let feed = Feed::open(&serve.url, &serve.ws_token).await?;
    r.after = serve.api.balances().await?;
    progress(&format!(
        "  restarted in {:.1} s; balances {}",
        serve.startup.as_secs_f64(),
        if r.balances_kept() { "kept" } else { "DIFFER" }
    ));
    transfers_after(cfg, &serve, &feed, accounts, r).await;
    before.count_again(&feed, lake, r);
    feed.close().await;
    let stopped = serve.stop().await;
    progress(&format!(
        "  after the restart: {} committed, {} pushed; {} messages and {} lake rows delivered again; stopped in {:.1} s",
        r.after_committed,
        r.after_pushed,
        r.ws_redelivered,
        r.lake_redelivered,
        stopped.took.as_secs_f64()
    ));
    r.second_stop = Some(stopped);
    Ok(())
}

/// How the stack stopped, for the progress lines.
fn stop_line(stopped: &Stopped) -> String {
    format!(
        "  stopped in {:.1} s ({}){}",
        stopped.took.as_secs_f64(),
        stopped
            .status
            .map_or_else(|| "killed".to_owned(), |s| s.to_string()),
        stopped.java_left.map_or_else(String::new, |p| format!(
            "; DynamoDB Local (pid {p}) WAS LEFT RUNNING"
        ))
    )
}

/// Transfers after the restart, then their pushes awaited (until the push timeout after the
/// last answer).
async fn transfers_after(
    cfg: &LiveConfig,
    serve: &Serve,
    feed: &Feed,
    accounts: &[String],
    r: &mut Restart,
) {
    let tick = |_: &[Transfer]| {};
    let after = load::transfers(
        &serve.api,
        accounts,
        "restart",
        cfg.after_restart,
        cfg.concurrency.min(cfg.after_restart).max(1),
        cfg.progress_every,
        &tick,
    )
    .await;
    let after_txs = after.txs();
    let deadline = after
        .done
        .iter()
        .map(|t| t.answered)
        .max()
        .unwrap_or_else(Instant::now)
        + cfg.push_timeout;
    // Redeliveries come before the new records in each stream: once every message of the new
    // transfers is in, so are they.
    feed.wait_for(&after_txs, MESSAGES_PER_TRANSFER, deadline)
        .await;
    let (push, missing, _) = push_latency(feed, &after.done, cfg.push_timeout);
    r.after_committed = after.done.len();
    r.after_pushed = after.done.len() - missing;
    r.after_push = push;
}

/// What was delivered before the stop: the WebSocket messages' events, the lake rows'
/// `eventId`s and the lake's files.
struct Delivered {
    events: HashSet<String>,
    rows: HashSet<String>,
    files: HashSet<String>,
}

impl Delivered {
    /// Reads what was delivered so far, noting in `r` the distinct messages and the repeated
    /// ones.
    fn read(feed: &Feed, lake: &Path, r: &mut Restart) -> Delivered {
        let events: HashSet<String> = match feed.received.lock() {
            Ok(rec) => {
                r.ws_repeated_before = rec.events.values().map(|n| n - 1).sum();
                rec.events.keys().cloned().collect()
            }
            Err(_) => HashSet::new(),
        };
        r.pushed_before = events.len();
        let rows: HashSet<String> = lake_rows(lake)
            .into_iter()
            .map(|(_, row)| row["eventid"].to_string())
            .collect();
        let files: HashSet<String> = lake_rows(lake).into_iter().map(|(f, _)| f).collect();
        Delivered {
            events,
            rows,
            files,
        }
    }

    /// Counts in `r` what was delivered again since: messages of events pushed before, lake
    /// rows in new files of events written before, and lake rows of a repeated `eventId`.
    fn count_again(&self, feed: &Feed, lake: &Path, r: &mut Restart) {
        if let Ok(rec) = feed.received.lock() {
            r.ws_redelivered = rec
                .events
                .iter()
                .filter(|(e, _)| self.events.contains(*e))
                .map(|(_, n)| n)
                .sum();
        }
        let rows = lake_rows(lake);
        r.lake_redelivered = rows
            .iter()
            .filter(|(f, row)| {
                !self.files.contains(f) && self.rows.contains(&row["eventid"].to_string())
            })
            .count();
        let mut seen = HashSet::new();
        r.lake_duplicates = rows
            .iter()
            .filter(|(_, row)| !seen.insert(row["eventid"].to_string()))
            .count();
    }
}

/// Every lake row under `dir` (Parquet under `committed/dt=*/`), with the file it is in; each
/// row an object keyed by column name (`eventid`).
fn lake_rows(dir: &Path) -> Vec<(String, Value)> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let mut rows = vec![];
    for day in std::fs::read_dir(dir.join("committed"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for file in std::fs::read_dir(day.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = file.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".parquet") {
                continue; // a roll's temporary file
            }
            let Ok(reader) = std::fs::File::open(file.path())
                .map_err(|e| e.to_string())
                .and_then(|f| SerializedFileReader::new(f).map_err(|e| e.to_string()))
            else {
                continue;
            };
            let Ok(iter) = reader.get_row_iter(None) else {
                continue;
            };
            rows.extend(iter.flatten().map(|r| (name.clone(), r.to_json_value())));
        }
    }
    rows
}
