//! Runs the built `txretry-bench` the way a user would, and checks what it prints and how
//! it exits. One test binary with a module per topic (linking is the slow part).

mod galera;
mod ha;
mod processes;
mod sweep;

use std::process::{Command, Output};

pub use txretry_testkit::lab::{check_run_shape, json_runs, texts};

/// Runs `txretry-bench` with `args`; no colours, no terminal.
pub fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_txretry-bench"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .output()
        .expect("the txretry-bench binary runs")
}

/// Runs `txretry-bench run` with `args`.
pub fn run(args: &[&str]) -> Output {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    bench(&all)
}
