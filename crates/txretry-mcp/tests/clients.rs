//! `txretry-mcp` driven by MCP clients written elsewhere: the official Python SDK (`mcp` on
//! PyPI: stdio and streamable HTTP) and the MCP Inspector's CLI (npm
//! `@modelcontextprotocol/inspector --cli`), on SQLite, Postgres and MariaDB.
//!
//! The checks themselves are the pytest files in `tests/clients/`; this test runs them with
//! the binary cargo built. It finds the clients through
//! - `TXRETRY_MCP_PYTHON`: a Python with `mcp` and `pytest` installed (a venv's `bin/python`),
//! - `TXRETRY_MCP_INSPECTOR`: the inspector's `mcp-inspector` executable, or the npm prefix it
//!   was installed into,
//!
//! falling back to `target/mcp-clients/{venv/bin/python,npm}` where `.ci/run` installs them.
//! A client that is missing skips its checks (saying so) unless `TXRETRY_REQUIRE_CLIENTS=1`,
//! which CI sets: then the test fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const BINARY: &str = env!("CARGO_BIN_EXE_txretry-mcp");

fn flag(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// `target/mcp-clients` of this workspace (or of `CARGO_TARGET_DIR`).
fn install_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    workspace.join(target).join("mcp-clients")
}

/// The variable's path, or the default one if it exists.
fn located(var: &str, default: PathBuf) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => default.exists().then_some(default),
    }
}

/// Fails the test when the clients are required, else says why it skips.
fn missing(why: &str) {
    assert!(
        !flag("TXRETRY_REQUIRE_CLIENTS"),
        "TXRETRY_REQUIRE_CLIENTS=1 but {why}"
    );
    // Written to the process's stderr, not through the test harness's capture, so that a
    // passing run still shows that it skipped.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED clients: {why} (set TXRETRY_REQUIRE_CLIENTS=1 to fail instead)"
    );
}

#[test]
fn python_sdk_and_inspector_cli() {
    let Some(python) = located("TXRETRY_MCP_PYTHON", install_dir().join("venv/bin/python")) else {
        missing("TXRETRY_MCP_PYTHON is not set and target/mcp-clients/venv does not exist");
        return;
    };
    let probe = Command::new(&python)
        .args(["-c", "import mcp, pytest"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            missing(&format!(
                "{} cannot import mcp and pytest: {}",
                python.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return;
        }
        Err(error) => {
            missing(&format!("{} does not run: {error}", python.display()));
            return;
        }
    }
    let inspector = located("TXRETRY_MCP_INSPECTOR", install_dir().join("npm"));
    if inspector.is_none() {
        // The Python checks still run; pytest skips (or, when required, fails) the inspector's.
        missing("TXRETRY_MCP_INSPECTOR is not set and target/mcp-clients/npm does not exist");
    }

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
    let mut pytest = Command::new(&python);
    pytest
        .args(["-m", "pytest", "-q", "-rsfE", "-p", "no:cacheprovider"])
        .arg(&dir)
        .current_dir(&dir)
        .env("TXRETRY_MCP_BIN", BINARY)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    match &inspector {
        Some(path) => pytest.env("TXRETRY_MCP_INSPECTOR", path),
        None => pytest.env_remove("TXRETRY_MCP_INSPECTOR"),
    };
    let started = Instant::now();
    let out = pytest.output().expect("pytest runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    let summary = stdout
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("");
    eprintln!(
        "clients: pytest in {:.1}s: {summary}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "the MCP client checks failed (pytest exit {:?}); their output is above",
        out.status.code()
    );
    if flag("TXRETRY_REQUIRE_CLIENTS") {
        assert!(
            !summary.contains("skipped"),
            "TXRETRY_REQUIRE_CLIENTS=1 but some client checks skipped: {summary}"
        );
    }
}
