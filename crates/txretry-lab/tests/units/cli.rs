//! `src/cli.rs`.

use clap::CommandFactory;
use clap::Parser;
use clap::error::ErrorKind;
use std::time::Duration;
use txretry_lab::cli::Cli;
use txretry_lab::cli::*;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("txretry-lab").chain(args.iter().copied()))
}

#[test]
fn the_command_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn no_arguments_is_the_first_run_demo() {
    let cli = parse(&[]).expect("parses").run;
    assert_eq!(cli.db, "sqlite");
    assert_eq!(cli.workload, Workload::Transfer);
    // Every preset side by side, on SQLite writers that collide, in a few seconds.
    assert_eq!(cli.policy, [PolicyArg::All]);
    assert_eq!(cli.sqlite_begin, SqliteBeginArg::Deferred);
    assert_eq!(cli.duration, Duration::from_secs(1));
    assert!(cli.workers > 1);
    assert!(!cli.json);
}

#[test]
fn bad_values_are_usage_errors() {
    for args in [
        &["--workers", "-3"][..],
        &["--workers", "0"],
        &["--workers", "many"],
        &["--workers", "100000"],
        &["--rows", "0"],
        &["--duration", "5x"],
        &["--duration", "0s"],
        &["--duration", "-1s"],
        &["--policy", "bogus"],
        &["--isolation", "chaos"],
        &["--workload", "nope"],
    ] {
        let err = parse(args).expect_err(&format!("{args:?} must be refused"));
        assert_eq!(err.exit_code(), 2, "{args:?}");
        assert!(
            matches!(
                err.kind(),
                ErrorKind::ValueValidation | ErrorKind::InvalidValue
            ),
            "{args:?}: {:?}",
            err.kind()
        );
    }
}

#[test]
fn workers_error_says_what_is_allowed() {
    let err = parse(&["--workers", "-3"])
        .expect_err("refused")
        .to_string();
    assert!(err.contains("--workers"), "{err}");
    assert!(err.contains("from 1 to"), "{err}");
}

#[test]
fn every_flag_parses() {
    let cli = parse(&[
        "--db",
        "postgres://u@h/db",
        "--workload",
        "hot-rows",
        "--rows",
        "4",
        "--workers",
        "32",
        "--duration",
        "500ms",
        "--isolation",
        "repeatable-read",
        "--sqlite-begin",
        "deferred",
        "--policy",
        "exp-jitter",
        "--json",
    ])
    .expect("parses")
    .run;
    assert_eq!(cli.workload, Workload::HotRows);
    assert_eq!(cli.rows, Some(4));
    assert_eq!(cli.workers, 32);
    assert_eq!(cli.duration, Duration::from_millis(500));
    assert_eq!(cli.isolation, Some(IsolationArg::RepeatableRead));
    assert_eq!(cli.sqlite_begin, SqliteBeginArg::Deferred);
    assert_eq!(cli.policy, [PolicyArg::ExpJitter]);
    assert!(cli.json);
}
