//! `latest.json`: the raw figures of every cell, burst and target, write units exact (as
//! decimal JSON numbers, never through a float).

use serde_json::{Value, json};

use super::targets;
use crate::counter::OPERATIONS;
use crate::stats::ms;
use crate::systems::Reason;
use crate::{CellResult, Report};

/// A cell's figures.
fn cell_json(c: &CellResult) -> Value {
    json!({
        "system": c.system.name(),
        "workload": c.workload.to_string(),
        "participants": c.workload.participants,
        "concurrency": c.concurrency,
        "committedPerSecond": c.throughput(),
        "transfers": c.tally.transfers,
        "committed": c.tally.committed,
        "abortedByReason": Reason::ALL.iter().map(|r| (r.name().to_owned(), json!(c.tally.aborted_for(*r)))).collect::<serde_json::Map<_, _>>(),
        "abortedAttemptsByReason": Reason::ALL.iter().map(|r| (r.name().to_owned(), json!(c.tally.aborted_attempts[r.index()]))).collect::<serde_json::Map<_, _>>(),
        "failed": c.tally.failed,
        "attempts": c.tally.attempts,
        "abortRate": c.tally.abort_rate(),
        "latencyMs": {"mean": ms(c.latency.mean), "p50": ms(c.latency.p50), "p95": ms(c.latency.p95), "p99": ms(c.latency.p99), "max": ms(c.latency.max), "n": c.latency.n},
        "requests": OPERATIONS.iter().map(|op| (op.to_string(), json!(c.costs.requests.of(op)))).collect::<serde_json::Map<_, _>>(),
        "requestsPerCommitted": c.requests_per_commit(),
        "rounds": c.costs.requests.rounds,
        "criticalPathRoundTrips": c.system.critical_path(c.workload.participants),
        "cpuMicrosPerCommitted": c.cpu_per_commit().as_secs_f64() * 1e6,
        "peakRssKiB": c.costs.peak_rss_kib,
        "maxFenceEntries": c.audit.max_fence,
        "writeUnits": units_json(c),
        "votes": {"reserved": c.tally.votes.reserved, "exclusive": c.tally.votes.exclusive, "fenced": c.tally.votes.fenced},
        "peaks": {"reservations": c.costs.peaks.reservations, "fenceEntries": c.costs.peaks.fence, "refusedItemBytes": c.costs.peaks.item_bytes},
        "audit": {"maxItemBytes": c.audit.max_item_bytes, "maxItemFenceBytes": c.audit.max_item_fence_bytes, "minAccountBalance": c.audit.min_account_balance.map(|b| b.to_string())},
        "problems": c.problems,
    })
}

/// A count of half-units as an exact JSON number (`12.5`).
fn units_number(halves: u64) -> Value {
    let text = if halves.is_multiple_of(2) {
        (halves / 2).to_string()
    } else {
        format!("{}.5", halves / 2)
    };
    text.parse::<serde_json::Number>()
        .map_or(Value::Null, Value::Number)
}

/// Write units of a cell: totals (exact), per committed transfer (two places), and by step.
fn units_json(c: &CellResult) -> Value {
    let u = &c.capacity.units;
    let steps: serde_json::Map<String, Value> = (0..crate::capacity::SLOTS)
        .filter(|&i| u.writes[i] > 0 || u.refused[i] > 0)
        .map(|i| {
            let name = crate::timing::STEPS
                .get(i)
                .copied()
                .unwrap_or("outside any step");
            (
                name.to_owned(),
                json!({
                    "writes": u.writes[i],
                    "table": units_number(u.table[i]),
                    "index": units_number(u.index[i]),
                    "refusedWrites": u.refused[i],
                    "refusedEstimate": units_number(u.refused_estimate[i]),
                }),
            )
        })
        .collect();
    json!({
        "total": units_number(u.write_halves()),
        "reported": units_number(u.reported_halves()),
        "refusedEstimate": units_number(u.refused_halves()),
        "perCommitted": c.units_per_commit().parse::<serde_json::Number>().map_or(Value::Null, Value::Number),
        "read": units_number(u.read),
        "anomalies": u.anomalies,
        "recordBytesAtBegin": u.put_bytes.checked_div(u.puts),
        "committedInSlice": c.capacity.committed,
        "byStep": steps,
    })
}

/// The raw figures.
pub fn json(r: &Report) -> Value {
    json!({
        "mode": r.config.mode,
        "wallSeconds": r.wall.as_secs_f64(),
        "makeWallSeconds": r.make_wall.map(|w| w.as_secs_f64()),
        "allChecksPass": r.all_checks_pass(),
        "loadAverage": {"start": r.load.0, "end": r.load.1},
        "fenceCapacity": r.config.fence_capacity,
        "unit": r.unit.iter().map(cell_json).collect::<Vec<_>>(),
        "cells": r.cells.iter().map(cell_json).collect::<Vec<_>>(),
        "bursts": r.bursts.iter().map(|b| json!({
            "system": b.system.name(),
            "rate": b.burst.rate,
            "seconds": b.burst.seconds,
            "workers": b.burst.workers,
            "transfers": b.tally.transfers,
            "committed": b.tally.committed,
            "runtimeSeconds": b.runtime.as_secs_f64(),
            "latencyMs": {"mean": ms(b.latency.mean), "p50": ms(b.latency.p50), "p95": ms(b.latency.p95), "p99": ms(b.latency.p99)},
            "requests": b.costs.requests.total(),
            "problems": b.problems,
        })).collect::<Vec<_>>(),
        "injection": crate::inject::report::parameters_json(r.injected.as_ref()),
        "injected": crate::inject::report::cells_json(r.injected.as_ref()),
        "targets": targets(r).iter().map(|t| json!({"what": t.what, "goal": t.goal, "measured": t.measured, "met": t.met})).collect::<Vec<_>>(),
    })
}
