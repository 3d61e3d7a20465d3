//! Per-call heap allocations and instructions, counted by running the bench binary itself
//! under valgrind in probe mode (`--probe <variant> <calls>`): dhat counts heap blocks and
//! bytes, callgrind counts instructions. A counting global allocator would need `unsafe`,
//! which the workspace forbids. Instruction counts do not depend on machine load, so they
//! are the stable half of every comparison.

use std::process::Command;

/// The `--probe <variant> <calls>` request this process was started with, if any.
pub fn request(usage: &str) -> Option<(String, u64)> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--probe")?;
    let variant = args.get(at + 1).expect(usage).clone();
    let calls = args.get(at + 2).and_then(|n| n.parse().ok()).expect(usage);
    Some((variant, calls))
}

/// Whether to print the counts: under `cargo bench` (which passes `--bench`; `cargo test
/// --benches` does not) unless `TXRETRY_BENCH_SKIP_VALGRIND` is set.
pub fn counts_wanted() -> bool {
    std::env::args().any(|a| a == "--bench")
        && std::env::var_os("TXRETRY_BENCH_SKIP_VALGRIND").is_none()
}

/// Prints allocations, bytes and instructions per call for every variant.
pub fn report(variants: &[String], calls: u64) {
    let Ok(version) = Command::new("valgrind").arg("--version").output() else {
        println!("per-call allocations and instructions: skipped (valgrind not found)\n");
        return;
    };
    println!(
        "per call, counted by {} (dhat: heap blocks and bytes; callgrind: instructions), \
         (run with 1+{calls} calls - run with 1 call) / {calls}:",
        String::from_utf8_lossy(&version.stdout).trim()
    );
    let width = variants.iter().map(String::len).max().unwrap_or(8);
    println!(
        "  {:<width$} {:>12} {:>12} {:>14}",
        "variant", "allocations", "bytes", "instructions"
    );
    for variant in variants {
        match per_call(variant, calls) {
            Ok([blocks, bytes, instructions]) => {
                println!("  {variant:<width$} {blocks:>12.3} {bytes:>12.1} {instructions:>14.1}")
            }
            Err(e) => println!("  {variant:<width$} valgrind run failed: {e}"),
        }
    }
    println!();
}

/// This bench binary, run under valgrind with `tool_args` in probe mode; valgrind's stderr.
fn valgrind(tool_args: &[&str], variant: &str, calls: u64) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new("valgrind")
        .args(tool_args)
        .arg(exe)
        .args(["--probe", variant, &calls.to_string()])
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(stderr)
    } else {
        Err(stderr)
    }
}

/// The numbers on valgrind's summary line after `label`, e.g. DHAT's
/// `==1== Total:     2,089 bytes in 7 blocks` or callgrind's `==1== Collected : 587810`.
fn summary_numbers(stderr: &str, label: &str) -> Vec<u64> {
    let Some((_, rest)) = stderr.lines().find_map(|line| line.split_once(label)) else {
        return Vec::new();
    };
    rest.split_whitespace()
        .filter_map(|w| w.replace(',', "").parse().ok())
        .collect()
}

/// Heap blocks, heap bytes and instructions of one probe run.
fn totals(variant: &str, calls: u64) -> Result<[u64; 3], String> {
    let heap = valgrind(
        &["--tool=dhat", "--dhat-out-file=/dev/null"],
        variant,
        calls,
    )?;
    let cpu = valgrind(
        &["--tool=callgrind", "--callgrind-out-file=/dev/null"],
        variant,
        calls,
    )?;
    match (
        &summary_numbers(&heap, "Total:")[..],
        &summary_numbers(&cpu, "Collected :")[..],
    ) {
        (&[bytes, blocks], &[instructions]) => Ok([blocks, bytes, instructions]),
        _ => Err(format!("unexpected valgrind summaries:\n{heap}\n{cpu}")),
    }
}

/// Allocated blocks, allocated bytes and instructions per call of `variant`: the difference
/// between a run with 1 + `calls` calls and a run with 1 call, divided by `calls`.
fn per_call(variant: &str, calls: u64) -> Result<[f64; 3], String> {
    let one = totals(variant, 1)?;
    let many = totals(variant, 1 + calls)?;
    Ok([0, 1, 2].map(|i| (many[i] as f64 - one[i] as f64) / calls as f64))
}
