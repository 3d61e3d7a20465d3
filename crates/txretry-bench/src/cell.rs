//! A cell of the sweep (one policy at one worker count): the numbers of each of its runs,
//! and their median and range.

use std::collections::BTreeMap;

use serde::Serialize;

use txretry_lab::report::RunReport;

/// The policy name of the pgbench row.
pub const PGBENCH: &str = "pgbench";

/// What one run of a cell measured (a lab run or a pgbench run), as the JSON shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    /// Commits per second of the run's time.
    pub goodput: f64,
    /// Transactions committed.
    pub committed: u64,
    /// Transactions whose database error surfaced (retries ran out, or none were allowed).
    pub failed: u64,
    /// `failed` by kind.
    pub failed_by_kind: BTreeMap<String, u64>,
    /// Transactions refused for a business reason (insufficient funds; transfer only).
    pub business_failed: u64,
    /// Retries, all kinds.
    pub retries: u64,
    /// retries / committed (`null` when nothing committed).
    pub retries_per_commit: Option<f64>,
    /// Median latency of the committed transactions, milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile latency of the committed transactions, milliseconds.
    pub p99_ms: Option<f64>,
    /// Whether the invariant check of the tables passed.
    pub invariant_ok: bool,
    /// What the invariant check found.
    pub invariant: String,
    /// Whether Ctrl-C cut the run short.
    pub interrupted: bool,
}

impl Sample {
    /// The numbers of one lab run.
    pub fn of_run(r: &RunReport) -> Sample {
        Sample {
            goodput: r.tps,
            committed: r.committed,
            failed: r.failed,
            failed_by_kind: r.failed_by_kind.clone(),
            business_failed: r.business_failed,
            retries: r.retries,
            retries_per_commit: r.retries_per_commit,
            p50_ms: r.p50_ms,
            p99_ms: r.p99_ms,
            invariant_ok: r.invariant_ok,
            invariant: r.invariant.clone(),
            interrupted: r.interrupted,
        }
    }
}

/// The median and range of one number over a cell's runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// The middle value (the mean of the two middle ones for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// One cell: its runs and what they add up to.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// A preset's name, or [`PGBENCH`].
    pub policy: &'static str,
    /// Concurrent workers (pgbench: clients).
    pub workers: usize,
    /// Goodput, commits per second (`null` before any run).
    pub goodput: Option<Spread>,
    /// The median goodput as a percentage of the best median goodput among the *other*
    /// cells (`null` without any other cell with a goodput).
    pub goodput_pct_of_best_other: Option<f64>,
    /// Failed transactions per run.
    pub failed: Option<Spread>,
    /// Retries per commit (runs that committed nothing have none).
    pub retries_per_commit: Option<Spread>,
    /// Median latency, milliseconds.
    pub p50_ms: Option<Spread>,
    /// 99th percentile latency, milliseconds.
    pub p99_ms: Option<Spread>,
    /// Whether every run's invariant check passed.
    pub invariant_ok: bool,
    /// Whether Ctrl-C cut a run of this cell short.
    pub interrupted: bool,
    /// Every run, in the order they ran.
    pub runs: Vec<Sample>,
}

impl Cell {
    /// A cell with no runs yet.
    pub fn new(policy: &'static str, workers: usize) -> Cell {
        Cell {
            policy,
            workers,
            goodput: None,
            goodput_pct_of_best_other: None,
            failed: None,
            retries_per_commit: None,
            p50_ms: None,
            p99_ms: None,
            invariant_ok: true,
            interrupted: false,
            runs: Vec::new(),
        }
    }

    /// Adds one run and recomputes the spreads.
    pub fn push(&mut self, sample: Sample) {
        self.runs.push(sample);
        let runs = &self.runs;
        self.goodput = Spread::of(runs.iter().map(|s| s.goodput));
        self.failed = Spread::of(runs.iter().map(|s| s.failed as f64));
        self.retries_per_commit = Spread::of(runs.iter().filter_map(|s| s.retries_per_commit));
        self.p50_ms = Spread::of(runs.iter().filter_map(|s| s.p50_ms));
        self.p99_ms = Spread::of(runs.iter().filter_map(|s| s.p99_ms));
        self.invariant_ok = runs.iter().all(|s| s.invariant_ok);
        self.interrupted = runs.iter().any(|s| s.interrupted);
    }
}

/// Each value as a percentage of the largest of the *other* values: a cell is never
/// compared with itself, so the best one shows its lead over the runner-up (above 100%)
/// and every other its share of the best. `None` where there is nothing to compare with
/// (a single value, or the others all 0).
pub fn percent_of_best_other(values: &[f64]) -> Vec<Option<f64>> {
    (0..values.len())
        .map(|i| {
            let best = values
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, v)| *v)
                .fold(0.0, f64::max);
            (best > 0.0).then(|| 100.0 * values[i] / best)
        })
        .collect()
}

/// Fills in every cell's [`Cell::goodput_pct_of_best_other`] (cells without runs take no
/// part).
pub fn compare(cells: &mut [Cell]) {
    let measured: Vec<usize> = (0..cells.len())
        .filter(|&i| cells[i].goodput.is_some())
        .collect();
    let medians: Vec<f64> = measured
        .iter()
        .filter_map(|&i| cells[i].goodput.map(|g| g.median))
        .collect();
    for (&i, pct) in measured.iter().zip(percent_of_best_other(&medians)) {
        cells[i].goodput_pct_of_best_other = pct;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct(values: &[f64]) -> Vec<Option<String>> {
        percent_of_best_other(values)
            .into_iter()
            .map(|p| p.map(|p| format!("{p:.0}")))
            .collect()
    }

    #[test]
    fn a_cell_is_never_compared_with_itself() {
        // The best cell is measured against the runner-up, so it can exceed 100%.
        assert_eq!(
            percent_of_best_other(&[50.0, 200.0, 100.0]),
            vec![Some(25.0), Some(200.0), Some(50.0)]
        );
    }

    #[test]
    fn single_empty_tied_and_zero() {
        assert_eq!(percent_of_best_other(&[1234.5]), vec![None]);
        assert_eq!(percent_of_best_other(&[]), Vec::<Option<f64>>::new());
        assert_eq!(
            percent_of_best_other(&[80.0, 80.0, 40.0]),
            vec![Some(100.0), Some(100.0), Some(50.0)]
        );
        assert_eq!(percent_of_best_other(&[0.0, 0.0]), vec![None, None]);
        assert_eq!(percent_of_best_other(&[5.0, 0.0]), vec![None, Some(0.0)]);
    }

    #[test]
    fn benchmarks_md_run_2_at_32_workers() {
        // BENCHMARKS.md, section 3, run 2: contention at 32 workers (1613) was the best
        // cell; the best of the others was contention at 16 workers (1298).
        let cells = [
            911.0, 1178.0, 884.0, 743.0, 464.0, 894.0, 1136.0, 1049.0, 810.0, 653.0, 1022.0, 576.0,
            501.0, 553.0, 692.0, 1019.0, 1077.0, 980.0, 779.0, 631.0, 1192.0, 894.0, 866.0, 1068.0,
            820.0, 660.0, 1225.0, 943.0, 1298.0, 1613.0,
        ];
        let p = pct(&cells);
        assert_eq!(p[29].as_deref(), Some("124"));
        assert_eq!(p[28].as_deref(), Some("80"));
        assert_eq!(p[0].as_deref(), Some("56"));
    }

    #[test]
    fn spreads() {
        assert_eq!(Spread::of([]), None);
        assert_eq!(
            Spread::of([3.0, 1.0, 2.0]),
            Some(Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0
            })
        );
        assert_eq!(Spread::of([4.0, 1.0]).map(|s| s.median), Some(2.5));
        assert_eq!(Spread::of([f64::NAN, 7.0]).map(|s| s.max), Some(7.0));
    }

    #[test]
    fn cells_add_up_their_runs() {
        let run = |goodput: f64, failed: u64, ok: bool| Sample {
            goodput,
            committed: 10,
            failed,
            failed_by_kind: BTreeMap::new(),
            business_failed: 0,
            retries: 5,
            retries_per_commit: Some(0.5),
            p50_ms: Some(1.0),
            p99_ms: None,
            invariant_ok: ok,
            invariant: String::new(),
            interrupted: false,
        };
        let mut a = Cell::new("none", 4);
        a.push(run(100.0, 3, true));
        a.push(run(300.0, 1, true));
        a.push(run(200.0, 2, false));
        assert_eq!(
            a.goodput.map(|g| (g.median, g.min, g.max)),
            Some((200.0, 100.0, 300.0))
        );
        assert_eq!(a.failed.map(|f| f.median), Some(2.0));
        assert_eq!(a.p99_ms, None);
        assert!(!a.invariant_ok);
        let mut b = Cell::new(PGBENCH, 4);
        b.push(run(400.0, 0, true));
        let mut cells = vec![a, b, Cell::new("default", 4)];
        compare(&mut cells);
        assert_eq!(cells[0].goodput_pct_of_best_other, Some(50.0));
        assert_eq!(cells[1].goodput_pct_of_best_other, Some(200.0));
        assert_eq!(cells[2].goodput_pct_of_best_other, None);
    }
}
