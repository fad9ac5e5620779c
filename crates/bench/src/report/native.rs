//! The targets of native transactions (`auto`, the default mode) and of hot items at uniform
//! cost: `auto` against native on plain tables, every protocol system's hot cells against its
//! own uniform cells, and the largest hot item.

use super::{Target, hot, ratio, times, uniform};
use crate::Report;
use crate::stats::ms;
use crate::systems::{Reason, System};
use crate::workload::Contention;

/// Largest item a hot item may grow to and still cost one write unit per write.
const ONE_UNIT_BYTES: u64 = 1024;

/// The targets, evaluated on this run.
pub fn targets(r: &Report) -> Vec<Target> {
    let mut out = vec![];
    let lowest = r.config.concurrency.iter().copied().min().unwrap_or(1);
    let highest = r.config.concurrency.iter().copied().max().unwrap_or(1);
    let pair = |w, c| r.cell(System::Auto, w, c).zip(r.cell(System::Native, w, c));
    for n in [2, 8] {
        if let Some((auto, na)) = pair(uniform(n), highest) {
            let x = ratio(auto.throughput(), na.throughput());
            out.push(Target {
                what: format!("throughput, uniform {n}P, concurrency {highest}, auto"),
                goal: "≥ 0.9× native".into(),
                measured: format!(
                    "{} ({:.0} vs {:.0} tx/s)",
                    times(x),
                    auto.throughput(),
                    na.throughput()
                ),
                met: x.map(|x| x >= 0.9),
            });
            if r.config.write_units {
                let x = ratio(auto.halves_per_commit(), na.halves_per_commit());
                out.push(Target {
                    what: format!("write units per committed transaction, uniform {n}P, auto"),
                    goal: "≤ 1.6× native".into(),
                    measured: format!(
                        "{} ({} vs {}) at concurrency {highest}",
                        times(x),
                        auto.units_per_commit(),
                        na.units_per_commit()
                    ),
                    met: x.map(|x| x <= 1.6),
                });
            }
        }
        if let Some((auto, na)) = pair(uniform(n), lowest) {
            let x = ratio(ms(auto.latency.p50), ms(na.latency.p50));
            out.push(Target {
                what: format!("p50 latency, uniform {n}P, concurrency {lowest}, auto"),
                goal: "≤ 1.1× native".into(),
                measured: format!(
                    "{} ({:.2} vs {:.2} ms)",
                    times(x),
                    ms(auto.latency.p50),
                    ms(na.latency.p50)
                ),
                met: x.map(|x| x <= 1.1),
            });
        }
    }
    for (n, goal) in [(2, 0.5), (8, 0.4)] {
        if let Some((auto, na)) = pair(hot(n), highest) {
            let x = ratio(auto.throughput(), na.throughput());
            let conflicts = auto.tally.aborted_attempts[Reason::Conflict.index()];
            out.push(Target {
                what: format!(
                    "throughput, hot {n}P, concurrency {highest}, auto (hot services: staged)"
                ),
                goal: format!("≥ {goal}× native, 0 conflict aborts"),
                measured: format!(
                    "{} ({:.0} vs {:.0} tx/s), {conflicts} conflict aborts",
                    times(x),
                    auto.throughput(),
                    na.throughput()
                ),
                met: x.map(|x| x >= goal && conflicts == 0),
            });
        }
    }
    if r.config.write_units {
        out.extend(hot_units(r));
    }
    let largest = r
        .cells
        .iter()
        .filter(|c| c.workload.contention == Contention::Hot && c.system.keeps_records())
        .max_by_key(|c| c.audit.max_item_bytes);
    if let Some(c) = largest {
        out.push(Target {
            what: "largest hot item, protocol systems".into(),
            goal: format!("< {ONE_UNIT_BYTES} bytes (one write unit)"),
            measured: format!(
                "{} bytes, of which the fence {} ({} c={} {})",
                c.audit.max_item_bytes,
                c.audit.max_item_fence_bytes,
                c.workload,
                c.concurrency,
                c.system
            ),
            met: Some(c.audit.max_item_bytes < ONE_UNIT_BYTES),
        });
    }
    out
}

/// Every hot cell's write units per transaction against the same system's uniform cell.
fn hot_units(r: &Report) -> Vec<Target> {
    let mut rows = vec![];
    let mut met = true;
    for system in [System::Auto, System::Staged, System::Coordinator] {
        for c in r
            .cells
            .iter()
            .filter(|c| c.system == system && c.workload.contention == Contention::Hot)
        {
            let same = r.cell(system, uniform(c.workload.participants), c.concurrency);
            let Some(u) = same else { continue };
            let x = ratio(c.halves_per_commit(), u.halves_per_commit());
            met &= x.is_some_and(|x| x <= 1.1);
            rows.push(format!(
                "{system} {} c={} {}",
                c.workload,
                c.concurrency,
                times(x)
            ));
        }
    }
    if rows.is_empty() {
        return vec![];
    }
    vec![Target {
        what: "write units per transaction, hot cell ÷ the same system's uniform cell".into(),
        goal: "≤ 1.1×".into(),
        measured: rows.join(", "),
        met: Some(met),
    }]
}
