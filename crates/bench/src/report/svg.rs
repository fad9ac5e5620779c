//! `latest.svg`: a hand-written bar chart, one panel per figure (committed tx/s, p50 latency,
//! write units per transfer), a group of bars per workload and concurrency, log scales.

use std::fmt::Write as _;

use super::ratio;
use crate::stats::ms;
use crate::systems::System;
use crate::workload::Workload;
use crate::{CellResult, Report};

const COLORS: [(System, &str); 4] = [
    (System::Native, "#4e79a7"),
    (System::Auto, "#e15759"),
    (System::Coordinator, "#f28e2b"),
    (System::Serial, "#59a14f"),
];

/// A panel's title and the figure it draws of a cell.
type Metric<'a> = (&'a str, &'a dyn Fn(&CellResult) -> f64);

/// Where things go: the margins, the chart's width, a panel's height, and the groups of bars
/// (one per workload and concurrency) with their width and their bars'.
struct Frame {
    groups: Vec<(Workload, usize)>,
    left: f64,
    right: f64,
    width: f64,
    panel_h: f64,
    /// A group's width.
    gw: f64,
    /// A bar's width.
    bw: f64,
}

/// One panel's vertical extent and its log scale, in powers of ten.
struct Scale {
    top: f64,
    bottom: f64,
    panel_h: f64,
    lo_e: f64,
    hi_e: f64,
}

impl Scale {
    /// The height of `v` on the panel.
    fn y(&self, v: f64) -> f64 {
        self.bottom
            - (v.max(10f64.powf(self.lo_e)).log10() - self.lo_e) / (self.hi_e - self.lo_e)
                * self.panel_h
    }
}

/// A bar chart of committed tx/s and p50 latency per workload and concurrency (log scales),
/// written as SVG text.
pub fn svg(r: &Report) -> String {
    let groups: Vec<(Workload, usize)> = r
        .config
        .workloads
        .iter()
        .flat_map(|w| r.config.concurrency.iter().map(move |c| (*w, *c)))
        .collect();
    let (left, right, width) = (70.0, 20.0, 1000.0);
    let panel_h = 230.0;
    let gw = (width - left - right) / groups.len().max(1) as f64;
    let bw = (gw - 10.0) / 3.0;
    let frame = Frame {
        groups,
        left,
        right,
        width,
        panel_h,
        gw,
        bw,
    };
    let mut s = String::new();
    let panels: [Metric; 3] = [
        ("committed transfers per second (log scale)", &|c| {
            c.throughput()
        }),
        ("p50 latency, ms (log scale)", &|c| ms(c.latency.p50)),
        (
            "write capacity units per committed transfer (log scale)",
            &|c| c.halves_per_commit() / 2.0,
        ),
    ];
    let height = panels.len() as f64 * (panel_h + 90.0) + 60.0;
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    legend(&mut s, left);
    for (p, metric) in panels.iter().enumerate() {
        panel(&mut s, r, &frame, p, *metric);
    }
    s.push_str("</svg>\n");
    s
}

/// The systems' colours and the engine bound's line.
fn legend(s: &mut String, left: f64) {
    for (i, (system, color)) in COLORS.iter().enumerate() {
        let x = left + 10.0 + 150.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="12" width="12" height="12" fill="{color}"/><text x="{}" y="22">{}</text>"#,
            x + 16.0,
            system.name()
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22">— engine bound: UpdateItem/s ÷ (2N+3)</text>"#,
        left + 470.0
    );
}

/// Panel `p`: its title, its scale's lines, a group of bars per workload and concurrency.
fn panel(s: &mut String, r: &Report, f: &Frame, p: usize, (title, metric): Metric) {
    let left = f.left;
    let top = 50.0 + p as f64 * (f.panel_h + 90.0);
    let bottom = top + f.panel_h;
    let values: Vec<f64> = r
        .cells
        .iter()
        .map(metric)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    if values.is_empty() {
        return;
    }
    let lo = values
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(1e-3);
    let hi = values.iter().copied().fold(0.0, f64::max).max(lo * 10.0);
    let scale = Scale {
        top,
        bottom,
        panel_h: f.panel_h,
        lo_e: lo.log10().floor(),
        hi_e: hi.log10().ceil(),
    };
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="{}" font-size="13" font-weight="bold">{title}</text>"#,
        top - 8.0
    );
    gridlines(s, f, &scale);
    for (g, (w, c)) in f.groups.iter().enumerate() {
        group(s, r, f, &scale, (g, *w, *c), (p, metric));
    }
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="{:.1}" font-size="10" fill="#555">coordinator ÷ native above each group</text>"##,
        bottom + 48.0
    );
}

/// A line and a label per power of ten.
fn gridlines(s: &mut String, f: &Frame, scale: &Scale) {
    let left = f.left;
    let mut e = scale.lo_e;
    while e <= scale.hi_e {
        let v = 10f64.powf(e);
        let yy = scale.y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            f.width - f.right,
            left - 6.0,
            yy + 4.0,
            if v >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v}")
            }
        );
        e += 1.0;
    }
}

/// Group `g` (workload `w` at concurrency `c`): a bar per system, the engine bound on the first
/// panel, the coordinator ÷ native ratio above, the labels below.
fn group(
    s: &mut String,
    r: &Report,
    f: &Frame,
    scale: &Scale,
    (g, w, c): (usize, Workload, usize),
    (p, metric): (usize, &dyn Fn(&CellResult) -> f64),
) {
    let (gw, bw, bottom) = (f.gw, f.bw, scale.bottom);
    let gx = f.left + 5.0 + g as f64 * gw;
    for (i, (system, color)) in COLORS.iter().enumerate() {
        let Some(cell) = r.cell(*system, w, c) else {
            continue;
        };
        let v = metric(cell);
        if v.is_nan() || v <= 0.0 {
            continue;
        }
        let x = gx + i as f64 * bw;
        let yy = scale.y(v);
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="{yy:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{} {} c={} : {v:.2}</title></rect>"#,
            bw - 1.0,
            bottom - yy,
            system.name(),
            w,
            c
        );
    }
    if p == 0 {
        engine_bound(s, r, scale, (w, c), gx + bw, bw);
    }
    if let (Some(co), Some(na)) = (
        r.cell(System::Coordinator, w, c),
        r.cell(System::Native, w, c),
    ) && let Some(x) = ratio(metric(co), metric(na))
    {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{x:.2}×</text>"#,
            gx + 1.5 * bw,
            scale.top + 6.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">c={c}</text>"#,
        gx + 1.5 * bw,
        bottom + 14.0
    );
    if g % r.config.concurrency.len().max(1) == 0 {
        let span = gw * r.config.concurrency.len() as f64;
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-weight="bold">{w}</text><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#999"/>"##,
            gx - 5.0 + span / 2.0,
            bottom + 30.0,
            gx,
            gx + span - 10.0,
            bottom + 19.0,
            bottom + 19.0
        );
    }
}

/// The engine's bound for workload `w` at concurrency `c` (UpdateItem/s ÷ (2N+3)), a line
/// across the bar at `x`.
fn engine_bound(
    s: &mut String,
    r: &Report,
    scale: &Scale,
    (w, c): (Workload, usize),
    x: f64,
    bw: f64,
) {
    let unit = r
        .unit
        .iter()
        .find(|u| u.concurrency == c)
        .map(|u| u.throughput() / (2 * w.participants + 3) as f64);
    if let Some(b) = unit.filter(|b| *b > 0.0) {
        let yy = scale.y(b);
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="black" stroke-width="2"/>"#,
            x - 2.0,
            x + bw + 1.0
        );
    }
}
