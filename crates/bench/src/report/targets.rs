//! The report's targets (goals, not test assertions), evaluated on a run: issue 7's on the
//! uniform workloads here, one function per goal, and the list of every target in the order
//! the report shows them.

use std::time::Duration;

use super::{
    Target, concurrency_range, hot_targets, native, participant_counts, ratio, times, uniform,
};
use crate::stats::ms;
use crate::systems::System;
use crate::{CellResult, Report};

/// Every target, evaluated on this run.
pub fn targets(r: &Report) -> Vec<Target> {
    let mut out = vec![];
    for n in participant_counts(r) {
        out.extend(uniform_targets(r, n));
    }
    out.extend(hot_targets::targets(r));
    out.extend(native::targets(r));
    out.extend(crate::inject::report::targets(r));
    out
}

/// Issue 7's targets on the uniform `n`-participant workload.
fn uniform_targets(r: &Report, n: usize) -> Vec<Target> {
    let (lowest, highest) = concurrency_range(r);
    let w = uniform(n);
    let cells: Vec<&CellResult> = r
        .cells
        .iter()
        .filter(|c| c.system == System::Coordinator && c.workload == w)
        .collect();
    let mut out = vec![];
    if let Some(one) = cells.iter().find(|c| c.concurrency == lowest) {
        out.push(requests_target(n, one, &cells, (lowest, highest)));
        out.push(rounds_target(n, one, lowest));
    }
    let pair = |c: usize| {
        r.cell(System::Coordinator, w, c)
            .zip(r.cell(System::Native, w, c))
    };
    if let Some((co, na)) = pair(highest) {
        out.push(throughput_target(n, highest, co, na));
    }
    if let Some((co, na)) = pair(lowest) {
        out.push(latency_target(n, lowest, co, na));
    }
    out.extend(cpu_target(r, n, &cells));
    out
}

/// Requests per transaction at the lowest concurrency, exactly 2N+3 when nothing aborted.
fn requests_target(
    n: usize,
    one: &CellResult,
    cells: &[&CellResult],
    (lowest, highest): (usize, usize),
) -> Target {
    let bound = 2 * n + 3;
    let exact = one.costs.requests.total() == bound as u64 * one.tally.committed
        && one.tally.committed == one.tally.attempts;
    let busiest = cells
        .iter()
        .filter(|c| c.concurrency == highest)
        .map(|c| format!("; at concurrency {highest}, {}", extra_requests(c)))
        .next()
        .unwrap_or_default();
    Target {
        what: format!("requests per {n}-participant transaction (uniform)"),
        goal: format!("≤ 2N+3 = {bound}"),
        measured: format!(
            "{:.2} at concurrency {lowest} ({}){busiest}",
            one.requests_per_commit(),
            if exact {
                "exactly: every request counted, no conflict possible"
            } else {
                "not exact"
            }
        ),
        met: Some(exact),
    }
}

/// Sequential round trips before the answer, counted at the lowest concurrency.
fn rounds_target(n: usize, one: &CellResult, lowest: usize) -> Target {
    Target {
        what: format!("sequential round trips before the answer, {n} participants"),
        goal: "5 (the baseline protocol, docs/protocol.md; the 2-round fast path is not built)"
            .into(),
        measured: format!(
            "{:.2} counted at concurrency {lowest} (derived: begin, prepare ∥, decide, complete ∥, finalize = 5)",
            one.rounds_per_attempt()
        ),
        met: Some((one.rounds_per_attempt() - 5.0).abs() < 0.05),
    }
}

/// The coordinator's throughput against native's at the highest concurrency.
fn throughput_target(n: usize, highest: usize, co: &CellResult, na: &CellResult) -> Target {
    let x = ratio(co.throughput(), na.throughput());
    Target {
        what: format!("throughput, uniform {n}P, concurrency {highest}"),
        goal: "≥ 0.55× native".into(),
        measured: format!(
            "{} ({:.0} vs {:.0} tx/s)",
            times(x),
            co.throughput(),
            na.throughput()
        ),
        met: x.map(|x| x >= 0.55),
    }
}

/// The coordinator's median latency against native's at the lowest concurrency.
fn latency_target(n: usize, lowest: usize, co: &CellResult, na: &CellResult) -> Target {
    let x = ratio(ms(co.latency.p50), ms(na.latency.p50));
    Target {
        what: format!("p50 latency, uniform {n}P, concurrency {lowest}"),
        goal: "≤ 1.5× native".into(),
        measured: format!(
            "{} ({:.2} vs {:.2} ms)",
            times(x),
            ms(co.latency.p50),
            ms(na.latency.p50)
        ),
        met: x.map(|x| x <= 1.5),
    }
}

/// The coordinator's CPU per transaction at every concurrency, beside the SDK's own floor.
fn cpu_target(r: &Report, n: usize, cells: &[&CellResult]) -> Option<Target> {
    let bound = 2 * n + 3;
    let cpu: Vec<(usize, Duration)> = cells
        .iter()
        .map(|c| (c.concurrency, c.cpu_per_commit()))
        .collect();
    let worst = cpu.iter().map(|(_, d)| *d).max()?;
    let floor = r
        .unit
        .iter()
        .map(|u| u.cpu_per_commit())
        .min()
        .map_or_else(String::new, |u| {
            format!(
                " (the SDK alone: {bound} requests × {} µs for one plain UpdateItem = {} µs)",
                u.as_micros(),
                bound as u128 * u.as_micros()
            )
        });
    Some(Target {
        what: format!("coordinator CPU per transaction, uniform {n}P"),
        goal: "≤ 200 µs".into(),
        measured: format!(
            "{}{floor}",
            cpu.iter()
                .map(|(c, d)| format!("{} µs at c={c}", d.as_micros()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        met: Some(worst <= Duration::from_micros(200)),
    })
}

/// Requests per committed transfer, and where those beyond 2N+3 came from: writes refused by
/// their condition (a reservation's release that guessed wrong whether it was the last on its
/// attribute writes again) and attempts that aborted and were retried.
pub(super) fn extra_requests(c: &CellResult) -> String {
    let refused: u64 = c.costs.requests.units.refused.iter().sum();
    format!(
        "{:.2} per committed transfer ({} writes per transfer refused by their condition and made again; {:.1}% of attempts aborted and retried)",
        c.requests_per_commit(),
        crate::capacity::per(2 * refused, c.tally.committed),
        100.0
            * ratio(
                (c.tally.attempts - c.tally.committed) as f64,
                c.tally.attempts as f64
            )
            .unwrap_or(0.0)
    )
}
