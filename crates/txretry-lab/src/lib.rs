//! The lab's machinery, shared by its two binaries: `txretry-lab` (the first thing to run:
//! the retry presets side by side on one database) and `txretry-bench` (the sweeps behind
//! BENCHMARKS.md, in `crates/txretry-bench`). Not published: its API is whatever the two
//! binaries need.

pub mod backend;
pub mod cli;
pub mod duration;
pub mod error;
pub mod events;
pub mod grid;
pub mod hints;
pub mod json;
pub mod lab;
pub mod presets;
pub mod progress;
pub mod report;
pub mod run;
pub mod server;
pub mod signals;
pub mod stats;
pub mod target;
pub mod workload;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::error::ErrorKind;

use crate::cli::Workload;
use crate::lab::Fatal;
use crate::report::RunReport;
use crate::target::Target;

/// Exit code when an invariant check failed.
pub const EXIT_INVARIANT_FAILED: u8 = 1;
/// Exit code when nothing could be measured.
pub const EXIT_NOT_RUN: u8 = 2;
/// Exit code when Ctrl-C cut the runs short (and every invariant checked held).
pub const EXIT_INTERRUPTED: u8 = 130;

/// The multi-threaded tokio runtime every mode runs on, or `None` (after saying why).
pub fn runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| eprintln!("error: could not start the async runtime: {e}"))
        .ok()
}

/// Prints a clap error (or help / version) and returns its exit code (2 for usage errors),
/// with every password that appears on the command line masked: clap echoes bad values,
/// and a misplaced URL may hold one.
pub fn clap_exit(error: &clap::Error) -> ExitCode {
    let code = u8::try_from(error.exit_code()).unwrap_or(EXIT_NOT_RUN);
    if !error.use_stderr() {
        // --help, --version: nothing secret in them.
        let _ = error.print();
        return ExitCode::from(code);
    }
    let secrets: Vec<String> = std::env::args()
        .flat_map(|arg| txretry::sqlx::redact::passwords_in(&arg))
        .collect();
    let rendered = error.render();
    let text = if std::io::stderr().is_terminal() {
        rendered.ansi().to_string()
    } else {
        rendered.to_string()
    };
    eprint!("{}", txretry::sqlx::redact::scrub(&text, &secrets));
    ExitCode::from(code)
}

/// The target `db` names, and `rows` (or the workload's default) checked against what
/// `workload` needs: what can be checked before anything connects. Else a usage error's
/// kind and message (which never hold the URL: it may hold a password).
pub fn checked_target(
    db: &str,
    workload: Workload,
    rows: Option<u32>,
) -> Result<Target, (ErrorKind, String)> {
    let target = Target::parse(db).map_err(|why| {
        (
            ErrorKind::InvalidValue,
            format!("invalid value for '--db <DB>': {why}"),
        )
    })?;
    let rows = rows.unwrap_or_else(|| workload.default_rows());
    if rows < workload.min_rows() {
        let message = format!(
            "--workload {} needs --rows {} or more (got {rows})",
            workload.as_str(),
            workload.min_rows()
        );
        return Err((ErrorKind::ValueValidation, message));
    }
    Ok(target)
}

/// The exit code of an invocation that ran ([`lab::main`]'s result), saying on stderr what
/// stopped it, if anything did.
pub fn exit_code(result: Result<Vec<RunReport>, Fatal>, target: &Target) -> ExitCode {
    match result {
        Ok(reports) if reports.iter().any(|r| !r.invariant_ok) => {
            ExitCode::from(EXIT_INVARIANT_FAILED)
        }
        Ok(reports) if reports.iter().any(|r| r.interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        // Every invocation runs at least one preset: none ran, so Ctrl-C came first.
        Ok(reports) if reports.is_empty() => ExitCode::from(EXIT_INTERRUPTED),
        Ok(_) => ExitCode::SUCCESS,
        Err(Fatal(message)) => {
            eprintln!("error: {}", target.scrub(&message));
            ExitCode::from(EXIT_NOT_RUN)
        }
    }
}
