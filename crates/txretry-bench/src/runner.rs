//! Runs a sweep's cells in this process, through the lab's own run (`run::run`: fresh
//! tables, the workers, the invariant check), each run on a fresh pool sized like a
//! single `txretry-lab --workers N` run; the pgbench row in between.
//!
//! Rounds: every cell once, then every cell again, `--repeat` times, and the presets take
//! turns going first from one round to the next, so a slow stretch of the machine (or a
//! server warming up) does not always land on the same cell.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Pool;

use crate::cell::{Cell, PGBENCH, Sample};
use crate::estimate;
use crate::pgbench::Bench;
use txretry_lab::backend::LabDb;
use txretry_lab::lab::Fatal;
use txretry_lab::presets::Preset;
use txretry_lab::report::{RunReport, Setup};
use txretry_lab::run::{RunSpec, run};
use txretry_lab::target::Target;

/// What a sweep runs.
#[derive(Debug)]
pub struct Plan {
    /// Worker counts, smallest first.
    pub workers: Vec<usize>,
    /// The presets, in their table order.
    pub presets: Vec<Preset>,
    /// Runs per cell.
    pub repeat: u32,
    /// Every run's spec but its preset and workers.
    pub spec: RunSpec,
    /// Every run's setup but its workers.
    pub setup: Setup,
    /// The pgbench row, when there is one.
    pub pgbench: Option<Bench>,
}

impl Plan {
    /// Every cell, empty: the pgbench row first, then the presets, each at every worker
    /// count.
    pub fn cells(&self) -> Vec<Cell> {
        let pgbench = self.pgbench.as_ref().map(|_| PGBENCH);
        pgbench
            .into_iter()
            .chain(self.presets.iter().map(|p| p.name()))
            .flat_map(|policy| self.workers.iter().map(move |&w| Cell::new(policy, w)))
            .collect()
    }

    /// Lab runs and pgbench runs of the whole sweep.
    pub fn runs(&self) -> (usize, usize) {
        let rounds = self.repeat as usize * self.workers.len();
        (
            rounds * self.presets.len(),
            if self.pgbench.is_some() { rounds } else { 0 },
        )
    }

    /// How long `lab` lab runs and `pgbench` pgbench runs take, roughly.
    pub fn estimate(&self, (lab, pgbench): (usize, usize)) -> Duration {
        let seconds = self.pgbench.as_ref().map_or(0, |b| b.seconds);
        estimate::total(lab, self.spec.duration, pgbench, seconds)
    }
}

/// What a sweep measured.
#[derive(Debug)]
pub struct Outcome {
    /// Every cell, in [`Plan::cells`] order, with the runs it got.
    pub cells: Vec<Cell>,
    /// What stopped the sweep or the pgbench row early, one line each (scrubbed).
    pub notes: Vec<String>,
    /// Whether Ctrl-C cut the sweep short.
    pub interrupted: bool,
    /// Whether an error stopped the sweep after it had measured something.
    pub failed: bool,
}

/// Runs `plan`, connecting with `connect(workers)` for each run. Errors only when the very
/// first run cannot be measured; later errors end the sweep with what ran.
pub async fn sweep<DB: LabDb>(
    connect: impl AsyncFn(usize) -> Result<Pool<DB>, sqlx::Error>,
    plan: &Plan,
    target: &Target,
    stop: &Arc<AtomicBool>,
) -> Result<Outcome, Fatal> {
    let mut outcome = Outcome {
        cells: plan.cells(),
        notes: Vec::new(),
        interrupted: false,
        failed: false,
    };
    let (mut lab_left, mut pgbench_left) = plan.runs();
    let total = lab_left + pgbench_left;
    let mut pgbench = plan.pgbench.clone();
    let n = plan.presets.len();
    'rounds: for round in 0..plan.repeat {
        for &workers in &plan.workers {
            if let Some(bench) = &pgbench {
                progress(
                    plan,
                    total,
                    (lab_left, pgbench_left),
                    PGBENCH,
                    workers,
                    round,
                );
                pgbench_left -= 1;
                match bench.run(workers).await {
                    Ok(sample) => record(&mut outcome.cells, PGBENCH, workers, sample),
                    Err(_) if stop.load(Ordering::Relaxed) => {
                        // Ctrl-C reached pgbench too (one process group): it stopped.
                        outcome.interrupted = true;
                        break 'rounds;
                    }
                    Err(why) => {
                        outcome
                            .notes
                            .push(target.scrub(&format!(
                                "pgbench row stopped at {workers} clients: {why}"
                            )));
                        pgbench_left = 0;
                        pgbench = None;
                    }
                }
            }
            for k in 0..n {
                if stop.load(Ordering::Relaxed) {
                    outcome.interrupted = true;
                    break 'rounds;
                }
                let preset = plan.presets[(k + round as usize) % n];
                progress(
                    plan,
                    total,
                    (lab_left, pgbench_left),
                    preset.name(),
                    workers,
                    round,
                );
                lab_left -= 1;
                match measure(&connect, plan, preset, workers, target, stop).await {
                    Ok(sample) => {
                        outcome.interrupted |= sample.interrupted;
                        record(&mut outcome.cells, preset.name(), workers, sample);
                    }
                    Err(Fatal(why)) if outcome.cells.iter().all(|c| c.runs.is_empty()) => {
                        return Err(Fatal(why));
                    }
                    Err(Fatal(why)) => {
                        outcome.notes.push(format!("sweep stopped: {why}"));
                        outcome.failed = true;
                        break 'rounds;
                    }
                }
            }
        }
    }
    if outcome.interrupted {
        outcome
            .notes
            .push("(interrupted: Ctrl-C cut the sweep short; cells show the runs they got)".into());
    }
    Ok(outcome)
}

/// One lab run of `preset` with `workers` workers on a fresh pool.
async fn measure<DB: LabDb>(
    connect: &impl AsyncFn(usize) -> Result<Pool<DB>, sqlx::Error>,
    plan: &Plan,
    preset: Preset,
    workers: usize,
    target: &Target,
    stop: &Arc<AtomicBool>,
) -> Result<Sample, Fatal> {
    let pool = connect(workers)
        .await
        .map_err(|e| Fatal::connect(target, &e))?;
    let spec = RunSpec {
        preset,
        workers,
        ..plan.spec.clone()
    };
    let result = run(&pool, &spec, stop).await;
    pool.close().await;
    let result = result.map_err(|e| Fatal::setup(target, &spec, &e))?;
    let setup = Setup {
        workers,
        ..plan.setup.clone()
    };
    Ok(Sample::of_run(&RunReport::new(&setup, result)))
}

/// Adds `sample` to the cell of `policy` at `workers` ([`Plan::cells`] made one for every
/// run).
fn record(cells: &mut [Cell], policy: &str, workers: usize, sample: Sample) {
    if let Some(cell) = cells
        .iter_mut()
        .find(|c| c.policy == policy && c.workers == workers)
    {
        cell.push(sample);
    }
}

/// One line on stderr before each run, with the time the rest should take.
fn progress(
    plan: &Plan,
    total: usize,
    left: (usize, usize),
    policy: &str,
    workers: usize,
    round: u32,
) {
    let done = total - left.0 - left.1;
    eprintln!(
        "[{}/{total}] {policy} at {workers} worker{}, run {} of {} (about {} left)",
        done + 1,
        if workers == 1 { "" } else { "s" },
        round + 1,
        plan.repeat,
        estimate::approx(plan.estimate(left))
    );
}
