//! The live bench's report: `live.md` (fresh and aged side by side, with ratios; aging; the
//! stage breakdown; the restart; the checks) and `live.json` (the same figures).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::{LiveError, LiveReport, Stages, Stopped};
use twopc_bench::stats::{Latency, ms};

fn ratio(a: Duration, b: Duration) -> Option<f64> {
    (!b.is_zero()).then(|| a.as_secs_f64() / b.as_secs_f64())
}

fn x(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.2}×"))
}

fn d(v: Duration) -> String {
    let m = ms(v);
    if m >= 10_000.0 {
        format!("{:.1} s", m / 1e3)
    } else {
        format!("{m:.0} ms")
    }
}

fn latency_rows(out: &mut String, what: &str, f: Latency, a: Latency) {
    for (q, fv, av) in [
        ("p50", f.p50, a.p50),
        ("p95", f.p95, a.p95),
        ("p99", f.p99, a.p99),
        ("max", f.max, a.max),
    ] {
        let _ = writeln!(
            out,
            "| {what} {q} | {} | {} | {} |",
            d(fv),
            d(av),
            x(ratio(av, fv))
        );
    }
}

fn stop_text(s: &Option<Stopped>) -> String {
    match s {
        None => "not reached".into(),
        Some(s) => format!(
            "{} in {:.1} s, {}",
            s.status
                .map_or_else(|| "did not exit (killed)".to_owned(), |st| st.to_string()),
            s.took.as_secs_f64(),
            s.java_left.map_or_else(
                || "no java left".to_owned(),
                |p| format!("DynamoDB Local pid {p} LEFT RUNNING (stopped by the bench)")
            )
        ),
    }
}

fn per_batch(st: &Stages) -> String {
    if st.batches == 0 {
        "-".into()
    } else {
        format!("{:.1}", st.records as f64 / st.batches as f64)
    }
}

/// The Markdown report: the run, fresh against aged, aging, the stages, the restart, the
/// checks. (Goals and their analysis are in `bench/results/NOTES.md`.)
pub fn markdown(r: &LiveReport, now: SystemTime) -> String {
    let mut o = header(r, now);
    fresh_and_aged(&mut o, r);
    aging(&mut o, r);
    stage_breakdown(&mut o, r);
    restart(&mut o, r);
    o
}

fn header(r: &LiveReport, now: SystemTime) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Live bench: a committed transfer's WebSocket push ({} run)\n",
        r.config.mode
    );
    let _ = writeln!(
        o,
        "{} · `{}` (`twopc serve` with its own persisted DynamoDB Local in a fresh data folder, \
         as `make run` runs it) · {} cores, load average {} at the start and {} at the end · \
         run {:.0} s\n",
        twopc_bench::report::utc(now),
        r.config.twopc.display(),
        r.cores,
        r.load_start.as_deref().unwrap_or("?"),
        r.load_end.as_deref().unwrap_or("?"),
        r.wall.as_secs_f64(),
    );
    let _ = writeln!(
        o,
        "Parameters: {} accounts of {} each; N = {} measured transfers at C = {} in flight, fresh \
         and again after aging the stack with K = {} transfers at {} in flight; a push counts as \
         missing {} s after its answer. Push latency: from the HTTP answer to the first WebSocket \
         message carrying the transfer's txId (`entity.committed` or `transaction.completed`), \
         on a connection subscribed with `{{\"all\": true}}`.\n",
        r.config.accounts,
        r.config.initial_balance,
        r.config.transfers,
        r.config.concurrency,
        r.config.age,
        r.config.age_concurrency,
        r.config.push_timeout.as_secs()
    );

    o
}

fn fresh_and_aged(o: &mut String, r: &LiveReport) {
    let (f, a) = (&r.fresh, &r.aged);
    o.push_str("\n## Fresh and aged, same run\n\n| | fresh | aged | aged / fresh |\n| --- | --- | --- | --- |\n");
    latency_rows(o, "push latency", f.push, a.push);
    let _ = writeln!(
        o,
        "| pushes missing after {} s | {} of {} | {} of {} | |",
        r.config.push_timeout.as_secs(),
        f.missing,
        f.committed,
        a.missing,
        a.committed
    );
    let _ = writeln!(
        o,
        "| pushes that beat the HTTP answer | {} | {} | |",
        f.before_answer, a.before_answer
    );
    latency_rows(
        o,
        "`transaction.completed` latency",
        f.completed,
        a.completed,
    );
    let _ = writeln!(
        o,
        "| transfers without all {} messages after {} s | {} | {} | |",
        super::MESSAGES_PER_TRANSFER,
        r.config.push_timeout.as_secs(),
        f.incomplete,
        a.incomplete
    );
    latency_rows(o, "write latency (HTTP)", f.http, a.http);
    let _ = writeln!(
        o,
        "| committed transfers/s at {} in flight | {:.1} | {:.1} | {} |",
        r.config.concurrency,
        f.commit_rate,
        a.commit_rate,
        x((f.commit_rate > 0.0).then(|| a.commit_rate / f.commit_rate))
    );
    let _ = writeln!(
        o,
        "| WebSocket messages (first to last push) | {} in {:.1} s: {:.1}/s | {} in {:.1} s: {:.1}/s | {} |",
        f.messages,
        f.push_span.as_secs_f64(),
        f.message_rate(),
        a.messages,
        a.push_span.as_secs_f64(),
        a.message_rate(),
        x((f.message_rate() > 0.0).then(|| a.message_rate() / f.message_rate()))
    );
    let _ = writeln!(
        o,
        "| attempts aborted / errored (retried) | {} / {} | {} / {} | |",
        f.aborted_attempts, f.error_attempts, a.aborted_attempts, a.error_attempts
    );
}

fn aging(o: &mut String, r: &LiveReport) {
    let g = &r.aging;
    let _ = writeln!(
        o,
        "\n## Aging\n\n{} transfers at {} in flight: {:.1} committed/s over {:.0} s (HTTP p50 {}, \
         p99 {}). Push latency under that load: p50 {}, p99 {}, max {}; `transaction.completed`: \
         p50 {}, p99 {}, max {}. When the last answer came, {} committed transfers had no push \
         yet and {} had not all their messages; {}. WebSocket messages of the aging transfers: \
         {} in {:.0} s, {:.1}/s (the stream processor's rate while it had a backlog). \
         DynamoDB Local's data folder after aging: {:.1} MB.\n",
        g.committed,
        r.config.age_concurrency,
        super::per_second(g.committed, g.span),
        g.span.as_secs_f64(),
        d(g.http.p50),
        d(g.http.p99),
        d(g.push.p50),
        d(g.push.p99),
        d(g.push.max),
        d(g.completed.p50),
        d(g.completed.p99),
        d(g.completed.max),
        g.backlog,
        g.backlog_messages,
        match (g.drain_first, g.drain) {
            (_, Some(all)) => format!(
                "every one had its first push {:.1} s after the last answer and all its messages {:.1} s after it",
                g.drain_first.unwrap_or(all).as_secs_f64(),
                all.as_secs_f64()
            ),
            (Some(first), None) => format!(
                "every one had its first push {:.1} s after the last answer, but not all messages came within the drain timeout",
                first.as_secs_f64()
            ),
            (None, None) => format!("{} had no push when the drain timed out", g.missing),
        },
        g.messages,
        g.push_span.as_secs_f64(),
        super::per_second(g.messages, g.push_span),
        r.data_bytes as f64 / 1e6
    );
}

fn stage_breakdown(o: &mut String, r: &LiveReport) {
    let (f, g, a) = (&r.fresh, &r.aging, &r.aged);
    o.push_str(
        "## Stage breakdown\n\n\
         The stream processor logs each batch it delivered (those that yielded rows or pushes) \
         with its stages; the run reads them back from `twopc serve`'s log. Per batch, p50 / p99:\n\n\
         | | fresh | aging | aged |\n| --- | --- | --- | --- |\n",
    );
    let st = [&f.stages, &g.stages, &a.stages];
    let row = |o: &mut String, what: &str, v: &dyn Fn(&Stages) -> String| {
        let _ = writeln!(o, "| {what} | {} | {} | {} |", v(st[0]), v(st[1]), v(st[2]));
    };
    let spread = |l: &Latency| {
        if l.n == 0 {
            "-".to_owned()
        } else {
            format!("{} / {}", d(l.p50), d(l.p99))
        }
    };
    row(o, "batches logged", &|x| x.batches.to_string());
    row(o, "stream records in them (per batch)", &|x| {
        format!("{} ({})", x.records, per_batch(x))
    });
    row(o, "time between two batches, p50 / max", &|x| {
        format!("{} / {}", d(x.gap_p50), d(x.gap_max))
    });
    row(
        o,
        "transaction record's age on arrival (write → stream → poller)",
        &|x| spread(&x.age),
    );
    row(o, "`GetRecords`", &|x| spread(&x.read));
    row(o, "lake append (beside the pushes)", &|x| spread(&x.lake));
    row(o, "subscription lookups", &|x| spread(&x.lookup));
    row(o, "WebSocket sends", &|x| spread(&x.push));
    o.push('\n');
}

fn restart(o: &mut String, r: &LiveReport) {
    let rs = &r.restart;
    let _ = writeln!(
        o,
        "## Restart on the same data folder\n\n\
         | | |\n| --- | --- |\n\
         | first stop (SIGINT) | {} |\n\
         | startups (to the API's first answer) | {} |\n\
         | balances after the restart | {} ({} accounts) |\n\
         | distinct messages received before the stop | {} (and {} received twice on the same connection) |\n\
         | WebSocket messages delivered again after the restart | {} |\n\
         | lake rows written again after the restart | {} |\n\
         | lake rows with a repeated eventId, whole run | {} |\n\
         | transfers after the restart | {} committed, {} pushed (push p50 {}, max {}) |\n\
         | second stop (SIGINT) | {} |\n",
        stop_text(&rs.first_stop),
        rs.startups
            .iter()
            .map(|t| format!("{:.1} s", t.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", "),
        if rs.balances_kept() {
            "the same as before it"
        } else {
            "DIFFERENT from before it"
        },
        rs.after.len(),
        rs.pushed_before,
        rs.ws_repeated_before,
        rs.ws_redelivered,
        rs.lake_redelivered,
        rs.lake_duplicates,
        rs.after_committed,
        rs.after_pushed,
        d(rs.after_push.p50),
        d(rs.after_push.max),
        stop_text(&rs.second_stop),
    );
    o.push_str(
        "The WebSocket count is a lower bound: the poller starts before the API answers, so a \
         redelivery in its first moments reaches no subscriber; the lake count is exact.\n\n## Checks\n\n",
    );
    for (what, ok) in r.checks() {
        let _ = writeln!(o, "- {} {what}", if ok { "pass" } else { "FAIL" });
    }
}

/// The JSON report: every figure, and the checks.
pub fn json(r: &LiveReport) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    v["ratios"] = json!({
        "pushP50": ratio(r.aged.push.p50, r.fresh.push.p50),
        "pushP99": ratio(r.aged.push.p99, r.fresh.push.p99),
        "httpP50": ratio(r.aged.http.p50, r.fresh.http.p50),
        "httpP99": ratio(r.aged.http.p99, r.fresh.http.p99),
    });
    v["checks"] = r
        .checks()
        .into_iter()
        .map(|(what, pass)| json!({"what": what, "pass": pass}))
        .collect();
    v
}

/// Writes `live.md` and `live.json` into `dir`.
pub fn write(r: &LiveReport, dir: &Path) -> Result<(), LiveError> {
    std::fs::create_dir_all(dir).map_err(|e| LiveError::io(dir.display(), e))?;
    let md = dir.join("live.md");
    std::fs::write(&md, markdown(r, SystemTime::now()))
        .map_err(|e| LiveError::io(md.display(), e))?;
    let js = dir.join("live.json");
    let text = serde_json::to_string_pretty(&json(r)).unwrap_or_default() + "\n";
    std::fs::write(&js, text).map_err(|e| LiveError::io(js.display(), e))?;
    Ok(())
}
