//! The phases of `twopc-bench live` on one stack: start it and create the accounts, then
//! measure fresh, age it, measure aged; each measured phase's push, completion and message
//! figures from the WebSocket feed and the stack's log.

use std::path::Path;
use std::time::{Duration, Instant};

use super::child::Serve;
use super::http::Feed;
use super::load::{self, Load, Transfer, per_second};
use super::restart::restart;
use super::serve_log::{log_len, stages};
use super::{
    Aging, LiveConfig, LiveError, LiveReport, MESSAGES_PER_ACCOUNT, MESSAGES_PER_TRANSFER, Measured,
};
use twopc_bench::stats::Latency;

/// Every phase on one stack: start it and create the accounts, then fresh, aging, aged and
/// the restart.
pub(super) async fn phases(
    cfg: &LiveConfig,
    root: &Path,
    report: &mut LiveReport,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), LiveError> {
    let data = root.join("data");
    let lake = root.join("lake");
    let accounts = cfg.account_ids();

    progress(&format!(
        "starting {} serve (persisted DynamoDB Local)",
        cfg.twopc.display()
    ));
    let serve = Serve::start(&cfg.twopc, &data, &lake, &root.join("serve-1.log")).await?;
    report.restart.startups.push(serve.startup);
    progress(&format!(
        "  {} answers ({:.1} s)",
        serve.url,
        serve.startup.as_secs_f64()
    ));
    let feed = Feed::open(&serve.url, &serve.ws_token).await?;
    let created = load::create_accounts(&serve.api, &accounts, cfg.initial_balance).await;
    if let Some(e) = created.failed.first() {
        return Err(LiveError::Check(e.clone()));
    }
    // The accounts' pushes show the pipeline works end to end before anything is measured.
    let txs = created.txs();
    if !feed
        .wait_for(
            &txs,
            MESSAGES_PER_ACCOUNT,
            Instant::now() + cfg.push_timeout.max(Duration::from_secs(60)),
        )
        .await
    {
        return Err(LiveError::Check(format!(
            "the accounts' creations were not pushed within {} s",
            cfg.push_timeout.max(Duration::from_secs(60)).as_secs()
        )));
    }
    progress(&format!("  {} accounts created and pushed", txs.len()));

    report.fresh = measure(cfg, &serve, &feed, &accounts, "fresh", progress).await;
    progress(&summary(&report.fresh));
    report.aging = age(cfg, &serve, &feed, &accounts, progress).await;
    report.data_bytes = dir_size(&data);
    report.aged = measure(cfg, &serve, &feed, &accounts, "aged", progress).await;
    progress(&summary(&report.aged));

    restart(
        cfg,
        (serve, feed),
        (root, &data, &lake),
        &accounts,
        &mut report.restart,
        progress,
    )
    .await
}

/// A measured phase: `n` transfers at `c` in flight, then their messages awaited (each
/// transfer's first within the push timeout; all of them, for the message rate, by then too).
async fn measure(
    cfg: &LiveConfig,
    serve: &Serve,
    feed: &Feed,
    accounts: &[String],
    label: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Measured {
    progress(&format!(
        "{label}: {} transfers, {} in flight",
        cfg.transfers, cfg.concurrency
    ));
    let log_from = log_len(&serve.log);
    let tick = |d: &[Transfer]| {
        progress(&format!(
            "  {label}: {}/{} committed, {} pushed",
            d.len(),
            cfg.transfers,
            d.iter().filter(|t| feed.arrival(&t.tx).is_some()).count()
        ));
    };
    let load = load::transfers(
        &serve.api,
        accounts,
        label,
        cfg.transfers,
        cfg.concurrency,
        cfg.progress_every,
        &tick,
    )
    .await;
    let txs = load.txs();
    let last_answer = load.done.iter().map(|t| t.answered).max();
    let deadline = last_answer.unwrap_or_else(Instant::now) + cfg.push_timeout;
    if !feed.wait_for(&txs, MESSAGES_PER_TRANSFER, deadline).await {
        progress(&format!(
            "  {label}: {} of {} transfers without their first push, {} without all {} messages, {} s after the last answer",
            txs.len() - feed.arrived(&txs, 1),
            txs.len(),
            txs.len() - feed.arrived(&txs, MESSAGES_PER_TRANSFER),
            MESSAGES_PER_TRANSFER,
            cfg.push_timeout.as_secs()
        ));
    }
    let log_to = log_len(&serve.log);
    measured(cfg, feed, label, &load, (&serve.log, log_from, log_to))
}

/// A measured phase's figures: its load's, the feed's and the log's between two lengths.
fn measured(
    cfg: &LiveConfig,
    feed: &Feed,
    label: &str,
    load: &Load,
    log: (&Path, u64, u64),
) -> Measured {
    let txs = load.txs();
    let mut http: Vec<Duration> = load.done.iter().map(Transfer::http).collect();
    let (push, missing, before_answer) = push_latency(feed, &load.done, cfg.push_timeout);
    let (messages, push_span) = message_span(feed, &txs);
    Measured {
        label: label.to_owned(),
        committed: load.done.len(),
        failed: load.failed.clone(),
        aborted_attempts: load.aborted_attempts,
        error_attempts: load.error_attempts,
        unfinished: load.done.iter().filter(|t| t.unfinished).count(),
        http: Latency::of(&mut http),
        commit_rate: load.rate(),
        push,
        missing,
        before_answer,
        completed: completed_latency(feed, &load.done),
        incomplete: txs.len() - feed.arrived(&txs, MESSAGES_PER_TRANSFER),
        messages,
        push_span,
        stages: stages(log),
    }
}

/// Ages the stack: `cfg.age` transfers as fast as it takes them, then waits for the stream
/// processor to deliver every message of every one of them.
async fn age(
    cfg: &LiveConfig,
    serve: &Serve,
    feed: &Feed,
    accounts: &[String],
    progress: &(dyn Fn(&str) + Sync),
) -> Aging {
    progress(&format!(
        "aging: {} transfers, {} in flight",
        cfg.age, cfg.age_concurrency
    ));
    let log_from = log_len(&serve.log);
    let started = Instant::now();
    let tick = |d: &[Transfer]| {
        let (mut first, mut all) = (0, 0);
        for t in d {
            if let Some(a) = feed.arrival(&t.tx) {
                first += 1;
                all += usize::from(a.count >= MESSAGES_PER_TRANSFER);
            }
        }
        progress(&format!(
            "  aging: {}/{} committed ({:.1} tx/s); pushed: {first} first message, {all} all {MESSAGES_PER_TRANSFER}",
            d.len(),
            cfg.age,
            per_second(d.len(), started.elapsed()),
        ));
    };
    let load = load::transfers(
        &serve.api,
        accounts,
        "aging",
        cfg.age,
        cfg.age_concurrency,
        cfg.progress_every,
        &tick,
    )
    .await;
    let txs = load.txs();
    let ended = Instant::now();
    let backlog = txs.len() - feed.arrived(&txs, 1);
    let backlog_messages = txs.len() - feed.arrived(&txs, MESSAGES_PER_TRANSFER);
    progress(&format!(
        "  aging: {} committed in {:.0} s ({:.1} tx/s); {backlog} without a push yet, {backlog_messages} without all their messages: draining",
        txs.len(),
        load.span.as_secs_f64(),
        load.rate(),
    ));
    let drained = wait_drained(cfg, feed, &txs, ended, progress).await;
    let (drain_first, drain) = drain_times(feed, &txs, ended, drained);
    let log_to = log_len(&serve.log);
    let m = measured(
        &LiveConfig {
            push_timeout: Duration::MAX / 4,
            ..cfg.clone()
        },
        feed,
        "aging",
        &load,
        (&serve.log, log_from, log_to),
    );
    Aging {
        committed: m.committed,
        failed: m.failed,
        aborted_attempts: m.aborted_attempts,
        error_attempts: m.error_attempts,
        span: load.span,
        http: m.http,
        push: m.push,
        backlog,
        backlog_messages,
        drain_first,
        drain,
        completed: m.completed,
        missing: m.missing,
        messages: m.messages,
        push_span: m.push_span,
        stages: m.stages,
    }
}

/// Waits until every message of every aging transfer arrived, a progress line now and then:
/// whether they all did within the drain timeout (counted from `ended`).
async fn wait_drained(
    cfg: &LiveConfig,
    feed: &Feed,
    txs: &[String],
    ended: Instant,
    progress: &(dyn Fn(&str) + Sync),
) -> bool {
    let deadline = ended + cfg.drain_timeout;
    loop {
        let next = (Instant::now() + cfg.progress_every).min(deadline);
        if feed.wait_for(txs, MESSAGES_PER_TRANSFER, next).await {
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        progress(&format!(
            "  draining: {} of {} with a push, {} with all their messages ({:.0} s)",
            feed.arrived(txs, 1),
            txs.len(),
            feed.arrived(txs, MESSAGES_PER_TRANSFER),
            ended.elapsed().as_secs_f64()
        ));
    }
}

/// When the last first push and the last message came after `ended`, from the arrivals
/// themselves (the last message's only if `drained`).
fn drain_times(
    feed: &Feed,
    txs: &[String],
    ended: Instant,
    drained: bool,
) -> (Option<Duration>, Option<Duration>) {
    let arrivals: Vec<_> = txs.iter().filter_map(|t| feed.arrival(t)).collect();
    let after_end = |t: Instant| t.saturating_duration_since(ended);
    let first = (arrivals.len() == txs.len())
        .then(|| arrivals.iter().map(|a| after_end(a.first)).max())
        .flatten();
    let all = drained
        .then(|| arrivals.iter().map(|a| after_end(a.last)).max())
        .flatten();
    (first, all)
}

/// Answer-to-first-push latencies of `done` within `timeout`: (summary, missing, before answer).
pub(super) fn push_latency(
    feed: &Feed,
    done: &[Transfer],
    timeout: Duration,
) -> (Latency, usize, usize) {
    let mut samples = vec![];
    let (mut missing, mut early) = (0, 0);
    for t in done {
        match feed.arrival(&t.tx) {
            Some(a) if a.first <= t.answered => {
                early += 1;
                samples.push(Duration::ZERO);
            }
            Some(a) if a.first - t.answered <= timeout => samples.push(a.first - t.answered),
            _ => missing += 1,
        }
    }
    (Latency::of(&mut samples), missing, early)
}

/// Answer-to-`transaction.completed` latencies of `done`, those that arrived.
fn completed_latency(feed: &Feed, done: &[Transfer]) -> Latency {
    let mut samples: Vec<Duration> = done
        .iter()
        .filter_map(|t| {
            let c = feed.arrival(&t.tx)?.completed?;
            Some(c.saturating_duration_since(t.answered))
        })
        .collect();
    Latency::of(&mut samples)
}

/// Messages carrying `txs` and their span, first to last.
fn message_span(feed: &Feed, txs: &[String]) -> (usize, Duration) {
    let Ok(r) = feed.received.lock() else {
        return (0, Duration::ZERO);
    };
    let arrivals: Vec<_> = txs.iter().filter_map(|t| r.by_tx.get(t)).collect();
    let count = arrivals.iter().map(|a| a.count).sum();
    let first = arrivals.iter().map(|a| a.first).min();
    let last = arrivals.iter().map(|a| a.last).max();
    match (first, last) {
        (Some(f), Some(l)) => (count, l - f),
        _ => (0, Duration::ZERO),
    }
}

/// The size of a folder's files, all the way down.
fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match entry.metadata() {
            Ok(m) if m.is_dir() => total += dir_size(&entry.path()),
            Ok(m) => total += m.len(),
            Err(_) => {}
        }
    }
    total
}

/// A measured phase's progress line.
fn summary(m: &Measured) -> String {
    let ms = twopc_bench::stats::ms;
    format!(
        "  {}: http p50 {:.0} ms p99 {:.0} ms; push p50 {:.0} ms p95 {:.0} ms p99 {:.0} ms max {:.0} ms; {} missing; {} messages at {:.1}/s",
        m.label,
        ms(m.http.p50),
        ms(m.http.p99),
        ms(m.push.p50),
        ms(m.push.p95),
        ms(m.push.p99),
        ms(m.push.max),
        m.missing,
        m.messages,
        m.message_rate()
    )
}
