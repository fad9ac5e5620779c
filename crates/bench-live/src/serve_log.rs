//! What `twopc serve`'s log says about pushes: the stream processor logs each batch it
//! delivered with its stages, read back here between two lengths of the log.

use std::path::Path;
use std::time::Duration;

use super::Stages;
use twopc_bench::stats::Latency;

/// The time of day (seconds) a log line starts with (`2026-11-23T20:37:55.010089Z ...`).
fn log_time(line: &str) -> Option<f64> {
    let t = line.get(11..)?.split(['Z', ' ']).next()?;
    let mut parts = t.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// A `name=value` field of a log line (`stream{read_ms=3}: ... lake_ms=1 ...`), in ms.
fn field_ms(line: &str, name: &str) -> Option<Duration> {
    line.split([' ', '{', '}', ':'])
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .and_then(|n| n.parse::<u64>().ok())
        .map(Duration::from_millis)
}

/// The batches the processor logged between two lengths of its log.
pub(super) fn stages(log: (&Path, u64, u64)) -> Stages {
    let Ok(bytes) = std::fs::read(log.0) else {
        return Stages::default();
    };
    let slice = &bytes[(log.1 as usize).min(bytes.len())..(log.2 as usize).min(bytes.len())];
    let text = String::from_utf8_lossy(slice);
    let (mut batches, mut records, mut gaps) = (0, 0, vec![]);
    let mut fields: [Vec<Duration>; 5] = Default::default();
    const FIELDS: [&str; 5] = ["age_ms", "read_ms", "lake_ms", "lookup_ms", "push_ms"];
    let mut previous: Option<f64> = None;
    for line in text
        .lines()
        .filter(|l| l.contains("stream batch processed"))
    {
        batches += 1;
        records += line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("records="))
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        for (samples, name) in fields.iter_mut().zip(FIELDS) {
            samples.extend(field_ms(line, name));
        }
        let at = log_time(line);
        if let (Some(a), Some(b)) = (previous, at)
            && b >= a
        {
            gaps.push(Duration::from_secs_f64(b - a));
        }
        previous = at.or(previous);
    }
    gaps.sort_unstable();
    let [age, read, lake, lookup, push] = fields.map(|mut f| Latency::of(&mut f));
    Stages {
        batches,
        records,
        gap_p50: twopc_bench::stats::percentile(&gaps, 0.5),
        gap_max: gaps.last().copied().unwrap_or_default(),
        age,
        read,
        lake,
        lookup,
        push,
    }
}

/// The log's length now, where the next phase's lines start.
pub(super) fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_line_of_twopc_serve_yields_its_stages() {
        // GIVEN two batch lines as `twopc serve` logs them (the poller's span, then the fields)
        let dir = std::env::temp_dir().join(format!("twopc-live-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let log = dir.join("serve.log");
        let text = "2026-11-23T21:43:29.230566Z  INFO stream{read_ms=257}: stream batch processed records=76 rows=25 pushed=25 gone=0 failed=0 age_ms=1663 lake_ms=0 lookup_ms=614 push_ms=126\n\
                    2026-11-23T21:43:29.300000Z  INFO tx{txId=\"x\"}: answered status=200 latency_ms=99\n\
                    2026-11-23T21:43:30.270919Z  INFO stream{read_ms=471}: stream batch processed records=65 rows=33 pushed=33 gone=0 failed=0 lake_ms=4 lookup_ms=64 push_ms=234\n";
        std::fs::write(&log, text).expect("write");

        // WHEN the whole log is read
        let st = stages((&log, 0, text.len() as u64));
        let _ = std::fs::remove_dir_all(&dir);

        // THEN both batches count, with their records, gap and stage times
        assert_eq!((st.batches, st.records), (2, 141));
        assert!(st.gap_max.abs_diff(Duration::from_micros(1_040_353)) < Duration::from_micros(2));
        assert_eq!((st.read.n, st.read.max), (2, Duration::from_millis(471)));
        assert_eq!((st.age.n, st.age.max), (1, Duration::from_millis(1663)));
        assert_eq!(st.lookup.max, Duration::from_millis(614));
        assert_eq!(st.push.max, Duration::from_millis(234));
        assert_eq!(st.lake.max, Duration::from_millis(4));
    }
}
