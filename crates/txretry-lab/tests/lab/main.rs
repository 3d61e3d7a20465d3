//! Runs the built `txretry-lab` binary the way a user would, and checks what it prints and
//! how it exits. One test binary with a module per topic (linking is the slow part).

mod interrupts;
mod restarts;
mod servers;
mod sqlite;
mod usage;

use std::process::{Command, Output};

pub use txretry_testkit::lab::{PRESETS, check_run_shape, json_runs, texts};

/// Runs the lab with `args`; no colours, no terminal.
pub fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_txretry-lab"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .output()
        .expect("the txretry-lab binary runs")
}
