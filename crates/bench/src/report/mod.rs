//! The report of `make bench`: `latest.md` (Markdown tables), `latest.svg` (a hand-written
//! chart) and `latest.json` (the raw figures). Every transfer figure is shown beside the native
//! figure of the same run as a ratio. This module holds what the parts share and writes the
//! three files:
//!
//! - `targets`: the goals, evaluated on the run: issue 7's there, the hot keys' in
//!   `hot_targets`, the native transactions' in `native`, the injected cells' in
//!   [`crate::inject::report`];
//! - `markdown`: the page, section by section; `costs`: its sections on write units, time
//!   and CPU; `format`: how one figure is written;
//! - `svg`: the chart; `json`: the raw figures.

use std::time::SystemTime;

use crate::systems::System;
use crate::workload::{Contention, Workload};
use crate::{CellResult, Report};

mod costs;
mod format;
mod hot_targets;
mod json;
mod markdown;
mod native;
mod svg;
mod targets;

pub(crate) use format::utc;
pub use json::json;
pub use markdown::markdown;
pub use svg::svg;
pub use targets::targets;

/// A goal of issue 7 and how this run did.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// What is measured.
    pub what: String,
    /// The goal.
    pub goal: String,
    /// The measurement.
    pub measured: String,
    /// Whether it is met (None: not measured in this run).
    pub met: Option<bool>,
}

fn uniform(n: usize) -> Workload {
    Workload {
        contention: Contention::Uniform,
        participants: n,
    }
}

fn native_of<'a>(r: &'a Report, c: &CellResult) -> Option<&'a CellResult> {
    r.cell(System::Native, c.workload, c.concurrency)
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

fn times(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_owned(), |x| format!("{x:.2}×"))
}

/// The lowest and the highest concurrency of the run.
fn concurrency_range(r: &Report) -> (usize, usize) {
    let c = &r.config.concurrency;
    (
        c.iter().copied().min().unwrap_or(1),
        c.iter().copied().max().unwrap_or(1),
    )
}

fn participant_counts(r: &Report) -> Vec<usize> {
    let mut ns: Vec<usize> = r.config.workloads.iter().map(|w| w.participants).collect();
    ns.sort_unstable();
    ns.dedup();
    ns
}

fn hot(n: usize) -> Workload {
    Workload {
        contention: Contention::Hot,
        participants: n,
    }
}

/// Writes `latest.md`, `latest.svg` and `latest.json` into `dir`.
pub fn write(r: &Report, dir: &std::path::Path) -> Result<(), crate::BenchError> {
    let io = |path: &std::path::Path| {
        let path = path.display().to_string();
        move |source| crate::BenchError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let files = [
        ("latest.md", markdown(r, SystemTime::now())),
        ("latest.svg", svg(r)),
        (
            "latest.json",
            serde_json::to_string_pretty(&json(r)).unwrap_or_default() + "\n",
        ),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    Ok(())
}
