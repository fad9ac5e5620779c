//! The report's sections on where a transaction's costs go: the write capacity units (by
//! coordinator step, table and index, and the sizes behind them), and the coordinator's
//! latency by step and CPU against the SDK's floor.

use std::fmt::Write as _;

use super::format::kb_per_commit;
use super::{concurrency_range, ratio, times};
use crate::Report;
use crate::stats::ms;
use crate::systems::System;
use crate::workload::Contention;

/// Where the write capacity units go: per coordinator step, table and index, and the refused
/// writes' estimate; the sizes behind them.
pub(super) fn capacity_section(md: &mut String, r: &Report) {
    if !r.config.write_units {
        let _ = writeln!(
            md,
            "\n## Write capacity\n\nNot measured in this run (`--no-write-units`: no units slices; no request \
             asked for its consumed capacity)."
        );
        return;
    }
    let _ = writeln!(
        md,
        "\n## Write capacity: what a transaction costs in DynamoDB units\n"
    );
    let _ = writeln!(
        md,
        "After a cell's measured slices each system runs one more slice of the same length at \
         the same concurrency in which every request asks for `ReturnConsumedCapacity=INDEXES` \
         (the total `TOTAL` reports, split between the table and its global secondary indexes), \
         set by the bench's SDK interceptor, which reads the units back from each response. The \
         measured slices do not ask: asking makes DynamoDB Local size every item it writes, \
         which slowed every system, the coordinator most (NOTES.md). DynamoDB Local \
         sizes them like DynamoDB: 1 unit per KB of the larger of the item before and after a \
         write, 2 per KB in a transaction; an index whose projected attributes change is \
         written too). A write refused by its condition is charged but reports nothing: its \
         units are estimated from the item the refusal returns (1 per KB, at least 1) and \
         included in the totals. DynamoDB Local under-reports a transaction that writes \
         several items of one table (it counts each distinct per-item figure once), so a \
         transaction is counted at no less than 2 units per item, exact for items under 1 KB as \
         the native bench's are. Units per committed transfer (of that slice) include aborted \
         and retried attempts.\n"
    );
    units_by_step(md, r);
    let anomalies: u64 = r
        .unit
        .iter()
        .chain(&r.cells)
        .map(|c| c.capacity.units.anomalies)
        .sum();
    let _ = writeln!(
        md,
        "\nSuccessful writes whose response carried no units (or units not a multiple of 0.5), \
         over every cell: {anomalies} (expected 0: the figures above are complete)."
    );
    sizes(md, r);
}

/// Write units per committed transfer by coordinator step, at the lowest and the highest
/// concurrency.
fn units_by_step(md: &mut String, r: &Report) {
    let (lowest, highest) = concurrency_range(r);
    let _ = writeln!(
        md,
        "By coordinator step, for the coordinator at concurrency {lowest} and {highest}:\n"
    );
    let _ = writeln!(
        md,
        "| workload | conc | step | writes / tx | table units / tx | index units / tx | units / write | refused writes / tx | their units / tx (est.) |\n\
         | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for c in r.cells.iter().filter(|c| {
        c.system == System::Coordinator && (c.concurrency == lowest || c.concurrency == highest)
    }) {
        let u = &c.capacity.units;
        let n = c.capacity.committed;
        for slot in 0..crate::capacity::SLOTS {
            if u.writes[slot] == 0 && u.refused[slot] == 0 {
                continue;
            }
            let name = crate::timing::STEPS
                .get(slot)
                .copied()
                .unwrap_or("outside any step");
            let units = u.table[slot] + u.index[slot];
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                c.workload,
                c.concurrency,
                name,
                crate::capacity::per(2 * u.writes[slot], n),
                crate::capacity::per(u.table[slot], n),
                crate::capacity::per(u.index[slot], n),
                crate::capacity::per(units, u.writes[slot]),
                crate::capacity::per(2 * u.refused[slot], n),
                crate::capacity::per(u.refused_estimate[slot], n),
            );
        }
        let _ = writeln!(
            md,
            "| {} | {} | **total** | | | | | | **{}** |",
            c.workload,
            c.concurrency,
            c.units_per_commit()
        );
    }
}

/// The sizes behind the units: the record at begin, the largest item and its fence.
fn sizes(md: &mut String, r: &Report) {
    let (_, highest) = concurrency_range(r);
    let _ = writeln!(
        md,
        "\nSizes behind the units (DynamoDB's sizing: names plus values; a 36-character \
         transaction id names every fence entry and reservation):\n"
    );
    let _ = writeln!(
        md,
        "| workload | conc | system | record at begin, B | largest item after the cell, B | its fence, B | largest fence, entries |\n\
         | --- | ---: | --- | ---: | ---: | ---: | ---: |"
    );
    for c in r.cells.iter().filter(|c| c.concurrency == highest) {
        let u = &c.capacity.units;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            c.workload,
            c.concurrency,
            c.system,
            u.put_bytes
                .checked_div(u.puts)
                .map_or_else(|| "–".into(), |b| b.to_string()),
            c.audit.max_item_bytes,
            c.audit.max_item_fence_bytes,
            c.costs.peaks.fence.max(c.audit.max_fence as u64)
        );
    }
}

/// Where the coordinator's latency (by step, at the lowest concurrency) and CPU (against the
/// SDK's cost of one plain request) go.
pub(super) fn breakdown(md: &mut String, r: &Report) {
    let (lowest, highest) = concurrency_range(r);
    let _ = writeln!(md, "\n## Where the coordinator's time and CPU go\n");
    let _ = writeln!(
        md,
        "Latency by step at concurrency {lowest} and {highest}, timed at the coordinator's ports \
         (the bench wraps its transaction log and transport; steps sent together overlap, so the \
         step means do not add up to the transaction's latency exactly; at {highest} in flight \
         each step also waits its turn in DynamoDB Local, which serves one request at a time). \
         The unit column is one plain conditional `UpdateItem` at the same concurrency.\n"
    );
    let _ = writeln!(
        md,
        "| workload | conc | step | calls / tx | mean ms | × unit UpdateItem p50 |\n| --- | ---: | --- | ---: | ---: | ---: |"
    );
    for c in r.cells.iter().filter(|c| {
        c.system == System::Coordinator && (c.concurrency == lowest || c.concurrency == highest)
    }) {
        let unit_p50 = r
            .unit
            .iter()
            .find(|u| u.concurrency == c.concurrency)
            .map(|u| ms(u.latency.p50));
        let steps = &c.costs.steps;
        let attempts = c.tally.attempts.max(1) as f64;
        for (i, name) in crate::timing::STEPS.iter().enumerate() {
            let Some(mean) = steps.mean(i) else { continue };
            let _ = writeln!(
                md,
                "| {} | {} | {name} | {:.2} | {:.2} | {} |",
                c.workload,
                c.concurrency,
                steps.calls[i] as f64 / attempts,
                ms(mean),
                times(unit_p50.and_then(|u| ratio(ms(mean), u)))
            );
        }
        let _ = writeln!(
            md,
            "| {} | {} | **whole transaction (p50)** | | {:.2} | {} |",
            c.workload,
            c.concurrency,
            ms(c.latency.p50),
            times(unit_p50.and_then(|u| ratio(ms(c.latency.p50), u)))
        );
    }
    cpu_against_floor(md, r);
}

/// CPU per committed transaction against K requests × the CPU of one plain request.
fn cpu_against_floor(md: &mut String, r: &Report) {
    let _ = writeln!(
        md,
        "\nCPU of this process per committed transaction against the SDK's floor: K requests \
         × the CPU of one plain `UpdateItem` request at the same concurrency (the unit rows). \
         What is left is the protocol's own work (request validation, hashing, records and \
         locks to and from DynamoDB JSON) plus the SDK's extra cost for its larger requests and \
         responses.\n"
    );
    let _ = writeln!(
        md,
        "| workload | conc | system | CPU µs / tx | K requests | K × unit CPU µs | rest µs | KB / tx |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
    );
    for c in r
        .cells
        .iter()
        .filter(|c| c.workload.contention == Contention::Uniform)
    {
        let Some(u) = r.unit.iter().find(|u| u.concurrency == c.concurrency) else {
            continue;
        };
        let k = c.requests_per_commit();
        let floor = k * u.cpu_per_commit().as_secs_f64() * 1e6;
        let cpu = c.cpu_per_commit().as_secs_f64() * 1e6;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {cpu:.0} | {k:.2} | {floor:.0} | {:.0} | {:.1} |",
            c.workload,
            c.concurrency,
            c.system,
            cpu - floor,
            kb_per_commit(c)
        );
    }
}
