//! `txretry-bench sweep`: the presets at several worker counts, several runs per cell, plus
//! pgbench on Postgres; a table with the median and range of each cell, `--json`, and
//! `--plot sweep.svg`.
//!
//! ```text
//! cargo run --release -p txretry-bench -- sweep
//! cargo run --release -p txretry-bench -- sweep --db postgres://postgres@127.0.0.1:5432/test \
//!     --workers 1,4,8,16,32 --policy all --duration 10s --repeat 3 --plot sweep.svg
//! ```
//!
//! Every run goes through the lab's own machinery in this process (`run::run`), so a
//! cell measures exactly what `txretry-lab --workers N --policy P` measures.

use std::fs::OpenOptions;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use clap::CommandFactory;
use clap::error::ErrorKind;
use serde::Serialize;
use txretry::TxOptions;

use crate::args::SweepArgs;
use crate::{cell, estimate, pgbench, plot, runner, table};

use crate::cell::Cell;
use crate::runner::{Outcome, Plan};
use txretry_lab::backend;
use txretry_lab::cli::IsolationArg;
use txretry_lab::duration::format_duration;
use txretry_lab::lab::Fatal;
use txretry_lab::report::Setup;
use txretry_lab::run::RunSpec;
use txretry_lab::signals::{self, StopSignals};
use txretry_lab::target::Target;
use txretry_lab::{
    EXIT_INTERRUPTED, EXIT_INVARIANT_FAILED, EXIT_NOT_RUN, checked_target, clap_exit,
};

/// The isolation a sweep runs at on a server when `--isolation` is not given: the level at
/// which a read-then-write transaction conflicts instead of queueing.
const DEFAULT_ISOLATION: IsolationArg = IsolationArg::RepeatableRead;

/// Runs `txretry-bench sweep` and returns the process's exit code.
pub fn main(args: &SweepArgs) -> ExitCode {
    let usage = |kind: ErrorKind, message: String| {
        let mut command = crate::Bench::command();
        // Built, the subcommand knows its full name for the usage line.
        command.build();
        let sweep = command.find_subcommand_mut("sweep").map(|c| c.clone());
        clap_exit(&sweep.unwrap_or(command).error(kind, message))
    };
    let target = match checked_target(&args.db, args.workload, args.rows) {
        Ok(target) => target,
        Err((kind, message)) => return usage(kind, message),
    };
    let rows = args.rows.unwrap_or_else(|| args.workload.default_rows());
    // Checked before the sweep, so a path that cannot be written fails now, not after it.
    let plot = match &args.plot {
        None => None,
        Some(path)
            if path
                .extension()
                .is_none_or(|e| !e.eq_ignore_ascii_case("svg")) =>
        {
            return usage(
                ErrorKind::ValueValidation,
                format!(
                    "invalid value for '--plot <PATH.svg>': the plot is SVG, so the file name must end in .svg (got {})",
                    path.display()
                ),
            );
        }
        Some(path) => match writable(path) {
            Ok(()) => Some(path.as_path()),
            Err(e) => {
                eprintln!("error: --plot: cannot write {}: {e}", path.display());
                return ExitCode::from(EXIT_NOT_RUN);
            }
        },
    };
    let Some(runtime) = txretry_lab::runtime() else {
        return ExitCode::from(EXIT_NOT_RUN);
    };
    match runtime.block_on(sweep(args, &target, rows, plot)) {
        Ok(code) => code,
        Err(Fatal(message)) => {
            eprintln!("error: {}", target.scrub(&message));
            ExitCode::from(EXIT_NOT_RUN)
        }
    }
}

/// The sweep as `--json` prints it.
#[derive(Debug, Serialize)]
struct Report<'a> {
    /// The database, password redacted.
    db: &'a str,
    engine: &'static str,
    workload: &'static str,
    rows: u32,
    isolation: &'a str,
    sqlite_begin: Option<&'static str>,
    /// Each lab run's duration, seconds.
    duration_s: f64,
    /// Each pgbench run's duration (whole seconds); `null` without a pgbench row.
    pgbench_duration_s: Option<u64>,
    /// Runs per cell.
    repeat: u32,
    /// What a cell's `min` and `max` are.
    spread: &'static str,
    /// Why the pgbench row is missing, what stopped the sweep early.
    notes: &'a [String],
    interrupted: bool,
    cells: &'a [Cell],
}

async fn sweep(
    args: &SweepArgs,
    target: &Target,
    rows: u32,
    plot: Option<&Path>,
) -> Result<ExitCode, Fatal> {
    let isolation = if target.is_sqlite() {
        if args.isolation.is_some() {
            eprintln!(
                "note: --isolation is ignored on SQLite (its transactions are always serializable)"
            );
        }
        None
    } else {
        Some(args.isolation.unwrap_or(DEFAULT_ISOLATION))
    };
    let mut options = TxOptions::new().sqlite_begin(args.sqlite_begin.begin());
    if let Some(level) = isolation {
        options = options.isolation(level.level());
    }
    let setup = Setup {
        db: target.to_string(),
        engine: target.engine(),
        workload: args.workload.as_str(),
        isolation: isolation
            .map_or("serializable", IsolationArg::as_str)
            .to_owned(),
        sqlite_begin: target.is_sqlite().then(|| args.sqlite_begin.as_str()),
        rows,
        workers: 0,
        processes: 1,
        duration: args.duration,
    };
    let mut notes = Vec::new();
    let pgbench = match target {
        Target::Postgres(url) => {
            let on_path = pgbench::on_path().await;
            match pgbench::skipped_because(true, args.workload, on_path) {
                Some(why) => {
                    notes.push(why.to_owned());
                    None
                }
                None => Some(pgbench::Bench {
                    url: url.clone(),
                    rows,
                    isolation: isolation.unwrap_or(DEFAULT_ISOLATION),
                    seconds: pgbench::seconds(args.duration),
                }),
            }
        }
        _ => {
            notes.extend(pgbench::skipped_because(false, args.workload, false).map(str::to_owned));
            None
        }
    };
    let plan = Plan {
        workers: args.workers.0.clone(),
        presets: args.policy.0.clone(),
        repeat: args.repeat,
        spec: RunSpec {
            workload: args.workload,
            rows,
            workers: 0,
            duration: args.duration,
            options,
            preset: txretry_lab::presets::Preset::Default,
            first_worker: 0,
            timed: false,
            in_flight: None,
            check_tries: 1,
        },
        setup,
        pgbench,
    };
    let headline = headline(&plan);
    announce(&plan, &headline, &notes);
    let stop = Arc::new(AtomicBool::new(false));
    let ctrl_c =
        StopSignals::listen().map_err(|e| Fatal(format!("could not listen for Ctrl-C: {e}")))?;
    // The first Ctrl-C ends the run in progress and the sweep, which reports what ran; a
    // second one aborts the run in progress (run.rs sees `signals::quitting()`).
    let watcher = {
        let stop = stop.clone();
        tokio::spawn(ctrl_c.watch(move || stop.store(true, Ordering::Relaxed), || {}))
    };
    let outcome = match target {
        Target::EmbeddedSqlite => {
            let (_dir, file) = txretry_lab::lab::temp_sqlite_file()?;
            runner::sweep(
                async |w| backend::sqlite_file(&file, w).await,
                &plan,
                target,
                &stop,
            )
            .await
        }
        Target::Sqlite(url) => {
            runner::sweep(
                async |w| backend::sqlite_url(url, w).await,
                &plan,
                target,
                &stop,
            )
            .await
        }
        Target::Postgres(url) => {
            runner::sweep(
                async |w| backend::postgres(url, w, backend::ACQUIRE_TIMEOUT).await,
                &plan,
                target,
                &stop,
            )
            .await
        }
        Target::MySql(url) => {
            runner::sweep(async |w| backend::mysql(url, w).await, &plan, target, &stop).await
        }
    };
    watcher.abort();
    if signals::quitting() {
        // The run's tables are dropped (run.rs); what was measured is not reported.
        eprintln!("quit: no report");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let Outcome {
        mut cells,
        notes: more,
        interrupted,
        failed,
    } = outcome?;
    notes.extend(more);
    cell::compare(&mut cells);
    let human = table::render(&headline, &cells, plan.repeat, &notes);
    if args.json {
        if std::io::stderr().is_terminal() {
            eprint!("{human}");
        }
        let report = Report {
            db: &plan.setup.db,
            engine: plan.setup.engine,
            workload: plan.setup.workload,
            rows,
            isolation: &plan.setup.isolation,
            sqlite_begin: plan.setup.sqlite_begin,
            duration_s: args.duration.as_secs_f64(),
            pgbench_duration_s: plan.pgbench.as_ref().map(|b| b.seconds),
            repeat: plan.repeat,
            spread: "min-max",
            notes: &notes,
            interrupted,
            cells: &cells,
        };
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Fatal(format!("could not serialize the report: {e}")))?;
        let _ = writeln!(std::io::stdout().lock(), "{text}");
    } else {
        let _ = write!(std::io::stdout().lock(), "{human}");
    }
    if let Some(path) = plot {
        let titles = plot::Titles {
            headline,
            repeat: plan.repeat,
        };
        let drawn = plot::render(&cells, &titles)
            .and_then(|svg| std::fs::write(path, svg).map_err(|e| e.to_string()));
        if let Err(e) = drawn {
            eprintln!("error: --plot: cannot write {}: {e}", path.display());
            return Ok(ExitCode::from(EXIT_NOT_RUN));
        }
        eprintln!("plot written to {}", path.display());
    }
    Ok(if cells.iter().any(|c| !c.invariant_ok) {
        ExitCode::from(EXIT_INVARIANT_FAILED)
    } else if failed {
        ExitCode::from(EXIT_NOT_RUN)
    } else if interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether `path` can be written, found by opening it for writing without truncating it
/// (an existing plot stays as it is until the new one is drawn; a new file is removed
/// again).
fn writable(path: &Path) -> std::io::Result<()> {
    let existed = path.exists();
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if !existed {
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// The line saying what the sweep runs where.
fn headline(plan: &Plan) -> String {
    let s = &plan.setup;
    let begin = s
        .sqlite_begin
        .map(|b| format!(", begin {b}"))
        .unwrap_or_default();
    format!(
        "txretry-bench sweep: {} on {}, {} rows, isolation {}{begin}, {} per run, {} per cell",
        s.workload,
        s.db,
        s.rows,
        s.isolation,
        format_duration(s.duration),
        if plan.repeat == 1 {
            "1 run".to_owned()
        } else {
            format!("{} runs", plan.repeat)
        }
    )
}

/// Says on stderr what will run and how long it should take, before it starts.
fn announce(plan: &Plan, headline: &str, notes: &[String]) {
    let (lab, pgbench) = plan.runs();
    let total = plan.estimate((lab, pgbench));
    let pgbench_part = match &plan.pgbench {
        Some(b) => format!(" + {pgbench} pgbench runs of {}s", b.seconds),
        None => String::new(),
    };
    eprintln!("{headline}");
    for note in notes {
        eprintln!("{note}");
    }
    eprintln!(
        "{} worker counts x {} policies x {} runs = {lab} runs of {}{pgbench_part}: about {} (until about {})",
        plan.workers.len(),
        plan.presets.len(),
        plan.repeat,
        format_duration(plan.spec.duration),
        estimate::approx(total),
        estimate::clock_after(SystemTime::now(), total)
    );
}
