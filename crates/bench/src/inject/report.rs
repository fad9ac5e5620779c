//! The injected cells in the report: the model's parameters and their source, one row per cell
//! beside a floor row per workload, issue 22's latency targets, and `latest.json`'s `injected`
//! list (and `injection`, the parameters).

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::Report;
use crate::inject::cells::{InjectedCell, InjectedRun};
use crate::inject::model::{LatencyModel, SINGLE, SOURCE};
use crate::report::Target;
use crate::stats::ms;
use crate::systems::System;
use crate::workload::Workload;

/// The injected name of the system issue 22 adds (`System::injected_name`).
const STAGED: &str = "staged";

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

fn times(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_owned(), |x| format!("{x:.2}×"))
}

fn floor_ms(model: &LatencyModel, w: Workload, q: f64) -> f64 {
    model.floor(w.participants, q)
}

/// Delay injected per committed transfer, all requests added up (ms).
fn injected_per_commit(c: &InjectedCell) -> Option<f64> {
    let total: f64 = c.injected.total.iter().map(|d| ms(*d)).sum();
    ratio(total, c.tally.committed as f64)
}

/// Issue 22's latency targets on the injected cells (`None` met: the staged commit is not in
/// this run).
pub fn targets(r: &Report) -> Vec<Target> {
    let Some(run) = &r.injected else {
        return vec![];
    };
    let mut out = vec![];
    let at_one: Vec<&InjectedCell> = run.cells.iter().filter(|c| c.concurrency == 1).collect();
    let rounds = at_one
        .iter()
        .filter_map(|c| {
            c.rounds_to_answer
                .map(|x| format!("{} {} {x:.2}", c.workload, c.system.injected_name()))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let staged_rounds: Vec<f64> = at_one
        .iter()
        .filter(|c| c.system.injected_name() == STAGED)
        .filter_map(|c| c.rounds_to_answer)
        .collect();
    out.push(Target {
        what: "round trips to the answer, committing, latency injected, one in flight".into(),
        goal: "1 (staged)".into(),
        measured: format!("counted: {rounds}"),
        met: (!staged_rounds.is_empty()).then(|| staged_rounds.iter().all(|x| *x == 1.0)),
    });
    for c in at_one.iter().filter(|c| c.system == System::Native) {
        let w = c.workload;
        let native = ms(c.answer.p50);
        let floor = floor_ms(&run.injection.model, w, 0.5);
        let others = |f: &dyn Fn(f64) -> Option<f64>| {
            at_one
                .iter()
                .filter(|o| o.workload == w && o.system != System::Native)
                .map(|o| {
                    format!(
                        "{} {}",
                        o.system.injected_name(),
                        times(f(ms(o.answer.p50)))
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let staged = at_one
            .iter()
            .find(|o| o.workload == w && o.system.injected_name() == STAGED)
            .map(|o| ms(o.answer.p50));
        out.push(Target {
            what: format!("answer p50, {w}, latency injected, one in flight, ÷ native"),
            goal: "staged ≤ 0.6×".into(),
            measured: format!("native {native:.1} ms; {}", others(&|x| ratio(x, native))),
            met: staged.map(|s| s <= 0.6 * native),
        });
        out.push(Target {
            what: format!("answer p50, {w}, latency injected, one in flight, ÷ the floor"),
            goal: "staged ≤ 1.3×".into(),
            measured: format!(
                "floor {floor:.1} ms; native {}, {}",
                times(ratio(native, floor)),
                others(&|x| ratio(x, floor))
            ),
            met: staged.map(|s| s <= 1.3 * floor),
        });
    }
    out
}

/// The section of `latest.md`.
pub fn section(md: &mut String, r: &Report) {
    let Some(run) = &r.injected else {
        return;
    };
    let i = &run.injection;
    let m = &i.model;
    let _ = writeln!(
        md,
        "\n## Injected latency: DynamoDB as measured from Lambda\n\n\
         DynamoDB Local answers a request in about a millisecond and serves one at a time, so a \
         protocol's round trips barely show on it, and requests sent together queue. Here every \
         DynamoDB request of the systems below takes a delay drawn from a lognormal fitted to \
         published figures (the SDK's HTTP client wrapped; one seeded generator, seed {}): it \
         waits half the delay, goes to DynamoDB Local, and its response is held until the whole \
         delay has passed, so its write lands midway and DynamoDB Local's own time stays hidden \
         unless longer than the second half (`Local late` counts those requests). Each cell runs {} transfers \
         after {} unmeasured, at {} in flight, each worker starting its next transfer once the \
         previous one was applied. Figures measured from Lambda by {SOURCE}; a fit's \
         `sigma = ln(p99 / p50) / 2.3263` (2.3263 = Φ⁻¹(0.99)), `mu = ln p50`.\n",
        m.seed,
        i.transfers,
        i.warmup,
        i.concurrency
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(" and "),
    );
    let _ = writeln!(
        md,
        "| request | published p50 / p99 ms | mu (ln ms) | sigma | injected p50 / p99 ms |\n\
         | --- | ---: | ---: | ---: | ---: |"
    );
    let single = m.single();
    let _ = writeln!(
        md,
        "| single item ({}) | {} / {} | {:.4} | {:.4} | {:.2} / {:.2} |",
        SINGLE.join(", "),
        m.single.0,
        m.single.1,
        single.mu,
        single.sigma,
        single.quantile(0.5),
        single.quantile(0.99)
    );
    let mut sizes: Vec<usize> = i.workloads.iter().map(|w| w.participants).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let published = |n: usize| {
        if n == m.transact_items {
            format!("{} / {}", m.transact.0, m.transact.1)
        } else if n == m.transact_large_items {
            format!("{} / –", m.transact_large)
        } else {
            "– (median interpolated)".to_owned()
        }
    };
    let mut rows: Vec<usize> = vec![m.transact_items, m.transact_large_items];
    rows.extend(sizes.iter().copied());
    rows.sort_unstable();
    rows.dedup();
    for n in rows {
        let d = m.transact(n);
        let _ = writeln!(
            md,
            "| `TransactWriteItems`, {n} items | {} | {:.4} | {:.4} | {:.2} / {:.2} |",
            published(n),
            d.mu,
            d.sigma,
            d.quantile(0.5),
            d.quantile(0.99)
        );
    }
    let _ = writeln!(
        md,
        "\n`TransactWriteItems`' median is interpolated linearly in the item count between the \
         two published medians (extrapolated below {} items); its spread is the {}-item fit's \
         (the only published p99). Lambda invoke hop before every participant call of the \
         coordinator: **{} ms** (`--lambda-hop-ms`; 0 is the `direct` transport, a deployment \
         with the `lambda` transport pays one invoke per prepare and per release). Other \
         operations (table administration, scans, batches) are not delayed.\n",
        m.transact_items,
        m.transact_items,
        m.hop_ms()
    );
    let _ = writeln!(
        md,
        "Rows: **answer** is when the client has its answer, **applied** when every write is \
         applied (the same moment for native and classic; a staged commit answers first). \
         **Lock hold** per item: from a participant's `yes` back at the coordinator to its \
         release acknowledged (native: inside DynamoDB, not visible). **Round trips**: rounds \
         of DynamoDB requests from a transfer's start to its answer, counted by the SDK \
         interceptor at one in flight. The **floor** row is one round of the slowest of the \
         N+1 writes a one-round commit sends together (the record's put and N prepares, the \
         prepares behind the hop), from the same distributions: its p50 and p99, exact \
         (`F⁻¹(q^(1/(N+1)))` without a hop). `× floor` and `× native` compare answer p50s.\n"
    );
    let _ = writeln!(
        md,
        "| workload | conc | system | committed / transfers | answer p50 ms | × native | × floor | answer p99 ms | applied p50 ms | applied p99 ms | lock hold per item p50 / p99 ms | round trips to answer | requests / tx | injected ms / tx (all requests) | Local late | check |\n\
         | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    );
    for w in &i.workloads {
        let floor = (floor_ms(m, *w, 0.5), floor_ms(m, *w, 0.99));
        let _ = writeln!(
            md,
            "| {w} | – | floor: slowest of {} writes | – | {:.2} | {} | 1.00× | {:.2} | – | – | – | 1 | – | – | – | – |",
            w.participants + 1,
            floor.0,
            times(
                run.cells
                    .iter()
                    .find(|c| c.workload == *w && c.system == System::Native && c.concurrency == 1)
                    .and_then(|n| ratio(floor.0, ms(n.answer.p50)))
            ),
            floor.1
        );
        for c in run.cells.iter().filter(|c| c.workload == *w) {
            let native = run
                .cell(System::Native, c.workload, c.concurrency)
                .map(|n| ms(n.answer.p50));
            let answer = ms(c.answer.p50);
            let _ = writeln!(
                md,
                "| {w} | {} | {} | {} / {} | {answer:.2} | {} | {} | {:.2} | {:.2} | {:.2} | {} | {} | {:.2} | {} | {} of {} | {} |",
                c.concurrency,
                c.system.injected_name(),
                c.tally.committed,
                c.tally.transfers,
                times(native.and_then(|n| ratio(answer, n))),
                times(ratio(answer, floor.0)),
                ms(c.answer.p99),
                ms(c.applied.p50),
                ms(c.applied.p99),
                if c.hold.n == 0 {
                    "–".to_owned()
                } else {
                    format!(
                        "{:.2} / {:.2} ({} items)",
                        ms(c.hold.p50),
                        ms(c.hold.p99),
                        c.hold.n
                    )
                },
                c.rounds_to_answer
                    .map_or_else(|| "–".to_owned(), |x| format!("{x:.2}")),
                c.requests_per_commit(),
                injected_per_commit(c).map_or_else(|| "–".to_owned(), |x| format!("{x:.1}")),
                c.injected.overruns,
                c.injected.requests(),
                if c.problems.is_empty() {
                    "ok".to_owned()
                } else {
                    format!("**FAILED**: {}", c.problems.join("; "))
                }
            );
        }
    }
}

/// `latest.json`'s `injection`: the parameters.
pub fn parameters_json(run: Option<&InjectedRun>) -> Value {
    let Some(run) = run else {
        return Value::Null;
    };
    let m = &run.injection.model;
    let single = m.single();
    json!({
        "source": SOURCE,
        "seed": m.seed,
        "transfersPerCell": run.injection.transfers,
        "warmupPerCell": run.injection.warmup,
        "lambdaHopMs": m.hop_ms(),
        "single": {"operations": SINGLE, "p50Ms": m.single.0, "p99Ms": m.single.1, "mu": single.mu, "sigma": single.sigma},
        "transactWriteItems": {
            "items": m.transact_items, "p50Ms": m.transact.0, "p99Ms": m.transact.1,
            "largeItems": m.transact_large_items, "largeP50Ms": m.transact_large,
            "sigma": m.transact(m.transact_items).sigma,
        },
    })
}

/// `latest.json`'s `injected`: one object per cell.
pub fn cells_json(run: Option<&InjectedRun>) -> Value {
    let Some(run) = run else {
        return json!([]);
    };
    let m = &run.injection.model;
    Value::Array(
        run.cells
            .iter()
            .map(|c| {
                json!({
                    "workload": c.workload.to_string(),
                    "contention": c.workload.contention.to_string(),
                    "participants": c.workload.participants,
                    "system": c.system.injected_name(),
                    "concurrency": c.concurrency,
                    "transfers": c.tally.transfers,
                    "committed": c.tally.committed,
                    "attempts": c.tally.attempts,
                    "answerP50Ms": ms(c.answer.p50),
                    "answerP99Ms": ms(c.answer.p99),
                    "appliedP50Ms": ms(c.applied.p50),
                    "appliedP99Ms": ms(c.applied.p99),
                    "holdP50Ms": (c.hold.n > 0).then(|| ms(c.hold.p50)),
                    "holdP99Ms": (c.hold.n > 0).then(|| ms(c.hold.p99)),
                    "holdItems": c.hold.n,
                    "floorP50Ms": floor_ms(m, c.workload, 0.5),
                    "floorP99Ms": floor_ms(m, c.workload, 0.99),
                    "roundTrips": c.rounds_to_answer,
                    "requestsPerCommitted": c.requests_per_commit(),
                    "injectedMsPerCommitted": injected_per_commit(c),
                    "delayedRequests": c.injected.requests(),
                    "localLate": c.injected.overruns,
                    "wallSeconds": c.wall.as_secs_f64(),
                    "problems": c.problems,
                })
            })
            .collect(),
    )
}
