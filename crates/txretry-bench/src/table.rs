//! The sweep's human output: one row per cell (policy and worker count) with the median of
//! its runs and their range, a one-line legend under it, then what went wrong.

use std::fmt::Write as _;

use crate::cell::{Cell, PGBENCH, Spread};
use crate::pgbench::MAX_TRIES;
use txretry_lab::grid;

/// The table of `cells` under `headline`, with `notes` (one line each) at the end.
pub fn render(headline: &str, cells: &[Cell], repeat: u32, notes: &[String]) -> String {
    let header = [
        "policy",
        "workers",
        "goodput/s",
        "vs best",
        "failed",
        "retry/commit",
        "p50 ms",
        "p99 ms",
        "invariant",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for c in cells {
        rows.push(vec![
            c.policy.to_owned(),
            c.workers.to_string(),
            spread(c.goodput, goodput_places(c.goodput)),
            c.goodput_pct_of_best_other
                .map_or_else(|| "-".to_owned(), |p| format!("{p:.0}%")),
            spread(c.failed, 0),
            spread(c.retries_per_commit, 2),
            spread(c.p50_ms, 2),
            spread(c.p99_ms, 2),
            if c.runs.is_empty() {
                "-".to_owned()
            } else if c.invariant_ok {
                "OK".to_owned()
            } else {
                "FAILED".to_owned()
            },
        ]);
    }
    let columns = header.len();
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    // Names left-aligned, numbers right-aligned.
    out.push_str(&grid::render(&header, rows, |i| i == 0 || i == columns - 1));
    let _ = writeln!(
        out,
        "{}",
        legend(repeat, cells.iter().any(|c| c.policy == PGBENCH))
    );
    for c in cells {
        for (i, run) in c.runs.iter().enumerate() {
            if !run.invariant_ok {
                let _ = writeln!(
                    out,
                    "invariant FAILED for {} at {} workers, run {}: {}",
                    c.policy,
                    c.workers,
                    i + 1,
                    run.invariant
                );
            }
        }
    }
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    out
}

/// The line under the table that says what its columns mean.
pub fn legend(repeat: u32, pgbench: bool) -> String {
    let runs = if repeat == 1 {
        "one run per cell".to_owned()
    } else {
        format!("median of {repeat} runs per cell [min-max]")
    };
    let pgbench = if pgbench {
        format!("; pgbench: --max-tries={MAX_TRIES}, whole seconds")
    } else {
        String::new()
    };
    format!(
        "{runs}; goodput: commits/s; vs best: median goodput as % of the best other cell; \
         failed: transactions per run whose error surfaced; p50/p99: latency of commits{pgbench}"
    )
}

/// Goodputs of 100 and more need no decimals.
fn goodput_places(goodput: Option<Spread>) -> usize {
    match goodput {
        Some(g) if g.median < 100.0 => 1,
        _ => 0,
    }
}

/// `median [min-max]`, just the median when the runs agree (or there is one), `-` for none.
fn spread(s: Option<Spread>, places: usize) -> String {
    match s {
        None => "-".to_owned(),
        Some(s) => {
            let median = format!("{:.places$}", s.median);
            let (min, max) = (format!("{:.places$}", s.min), format!("{:.places$}", s.max));
            if min == max {
                median
            } else {
                format!("{median} [{min}-{max}]")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::Sample;
    use std::collections::BTreeMap;

    fn sample(goodput: f64, failed: u64, invariant_ok: bool) -> Sample {
        Sample {
            goodput,
            committed: 100,
            failed,
            failed_by_kind: BTreeMap::new(),
            business_failed: 0,
            retries: 50,
            retries_per_commit: Some(0.5),
            p50_ms: Some(1.25),
            p99_ms: Some(9.5),
            invariant_ok,
            invariant: "counters off by 1".into(),
            interrupted: false,
        }
    }

    #[test]
    fn rows_legend_and_failures() {
        let mut a = Cell::new("none", 4);
        a.push(sample(900.0, 30, true));
        a.push(sample(1100.0, 10, false));
        let mut b = Cell::new(PGBENCH, 4);
        b.push(sample(500.0, 0, true));
        b.push(sample(500.0, 0, true));
        let mut cells = vec![b, a, Cell::new("default", 4)];
        crate::cell::compare(&mut cells);
        let text = render("headline", &cells, 2, &["pgbench note".into()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "headline");
        assert!(
            lines[1].contains("failed") && lines[1].contains("vs best"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("pgbench") && lines[3].contains(" 500 "),
            "{text}"
        );
        assert!(lines[3].contains("50%"), "{text}");
        assert!(lines[4].contains("1000 [900-1100]"), "{text}");
        assert!(lines[4].contains("20 [10-30]"), "{text}");
        assert!(
            lines[4].contains("200%") && lines[4].ends_with("FAILED"),
            "{text}"
        );
        assert!(
            lines[5].starts_with("default") && lines[5].ends_with('-'),
            "{text}"
        );
        assert!(
            lines[6].starts_with("median of 2 runs per cell [min-max]"),
            "{text}"
        );
        assert!(lines[6].contains("pgbench: --max-tries=1000"), "{text}");
        assert_eq!(
            lines[7],
            "invariant FAILED for none at 4 workers, run 2: counters off by 1"
        );
        assert_eq!(lines[8], "pgbench note");
    }

    #[test]
    fn spreads_print_compactly() {
        assert_eq!(spread(None, 2), "-");
        let one = Spread::of([0.5]);
        assert_eq!(spread(one, 2), "0.50");
        assert_eq!(spread(Spread::of([1.0, 2.0, 4.0]), 1), "2.0 [1.0-4.0]");
        assert_eq!(goodput_places(Spread::of([42.0])), 1);
        assert!(legend(1, false).starts_with("one run per cell;"));
        assert!(!legend(1, false).contains("pgbench"));
    }
}
