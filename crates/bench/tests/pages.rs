//! One truth for figures: the report's Markdown and the pages' summary are rendered from
//! `bench/results/latest.json`, and no other page a user reads quotes a bench figure.

use std::path::{Path, PathBuf};

use twopc_bench::report;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_committed_report_is_rendered_from_its_json() {
    let r = report::read(&root().join("bench/results/latest.json")).expect("latest.json");
    assert_eq!(r.mode, "full", "the committed report is a full run");
    assert!(r.all_checks_pass());
    let md = read("bench/results/latest.md");
    assert!(
        md == report::render(&r),
        "bench/results/latest.md differs from what latest.json renders: run `twopc-bench render --page docs/bench.md`"
    );
}

#[test]
fn the_bench_page_summary_is_the_reports() {
    let r = report::read(&root().join("bench/results/latest.json")).expect("latest.json");
    let page = read("docs/bench.md");
    let rendered = report::with_summary(&page, &r).expect("docs/bench.md has a summary block");
    assert!(
        page == rendered,
        "docs/bench.md's summary differs from latest.json's: run `twopc-bench render --page docs/bench.md`"
    );
}

/// A bench figure in prose: a ratio (`2.5×`), a throughput (`300 tx/s`) or a latency
/// percentile (`p50 26 ms`).
fn figures(text: &str) -> Vec<String> {
    let mut found = vec![];
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '.' && c != '×');
            let number = |s: &str| s.chars().next().is_some_and(|c| c.is_ascii_digit());
            let next = words.get(i + 1).copied().unwrap_or("");
            if (number(w) && w.ends_with('×'))
                || (number(w) && next.starts_with("tx/s"))
                || (w.starts_with("p50") || w.starts_with("p99")) && number(next)
            {
                found.push(line.trim().to_owned());
            }
        }
    }
    found
}

#[test]
fn no_page_quotes_a_bench_figure_outside_the_rendered_summary() {
    for page in [
        "README.md",
        "docs/limitations.md",
        "docs/bench.md",
        "docs/protocol.md",
    ] {
        let text = read(page);
        let outside = match (text.split_once(report::BEGIN), text.split_once(report::END)) {
            (Some((head, _)), Some((_, tail))) => format!("{head}\n{tail}"),
            _ => text,
        };
        let quoted = figures(&outside);
        assert!(
            quoted.is_empty(),
            "{page} quotes bench figures the report does not render; link to bench/results/latest.md instead:\n{}",
            quoted.join("\n")
        );
    }
}

#[test]
fn the_figure_finder_finds_ratios_throughputs_and_percentiles() {
    assert_eq!(figures("staged is 0.44× native").len(), 1);
    assert_eq!(figures("native does 459 tx/s here").len(), 1);
    assert_eq!(figures("answer p50 26.4 ms").len(), 1);
    assert!(figures("two rounds, N participants, 1,000 write units a second").is_empty());
}
