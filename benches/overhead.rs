//! Happy-path overhead: an operation that succeeds at once, called directly, through
//! `RetryPolicy::run_blocking` / `RetryPolicy::run`, and through backon's retry of the same
//! operation. Blocking and async variants each form one criterion group, so the three are
//! measured side by side on the same input in the same run.
//!
//! The async variants all run on one current-thread tokio runtime, driven the way criterion's
//! `to_async` does it (one `block_on` per sample, the iterations awaited in a loop inside), so
//! every variant pays the same driving cost. criterion's `async_tokio` feature is not enabled
//! in this workspace, hence the hand-written `iter_custom`.
//!
//! Heap allocations and instructions per call are printed before the timings (data, not
//! assertions). A counting `#[global_allocator]` would need `unsafe impl GlobalAlloc`, which
//! the workspace's `unsafe_code = "forbid"` rejects in this bench target (an inner `allow`
//! cannot override `forbid`), so the bench re-runs itself in a probe mode
//! (`--probe <variant> <calls>`) under `valgrind --tool=dhat` (heap blocks and bytes) and
//! `valgrind --tool=callgrind` (instructions, which unlike the timings do not depend on what
//! else the machine is doing), and prints the difference between runs with 1 and 1 + N calls,
//! divided by N. Set `TXRETRY_BENCH_SKIP_VALGRIND=1` to skip that step; it is also skipped,
//! with a note, when valgrind is not installed.

use std::future::Future;
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use backon::{BlockingRetryable, ExponentialBuilder, Retryable};
use criterion::Criterion;
use tokio::runtime::Runtime;
use txretry::RetryPolicy;

type OpError = std::io::Error;

/// The operation under test: succeeds at once.
fn op(x: u64) -> Result<u64, OpError> {
    Ok(black_box(x))
}

/// The async twin of [`op`].
async fn op_async(x: u64) -> Result<u64, OpError> {
    Ok(black_box(x))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread tokio runtime")
}

/// What criterion's `AsyncBencher::iter` does: one `block_on` per sample, the iterations
/// awaited inside it, the clock read around the loop only.
fn drive<F, Fut>(rt: &Runtime, iters: u64, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(f().await);
        }
        start.elapsed()
    })
}

fn blocking(c: &mut Criterion) {
    let policy = RetryPolicy::default();
    let mut group = c.benchmark_group("overhead/blocking");
    group.bench_function("direct", |b| b.iter(|| op(black_box(42))));
    group.bench_function("txretry run_blocking", |b| {
        b.iter(|| policy.run_blocking(|| op(black_box(42))))
    });
    group.bench_function("backon retry", |b| {
        b.iter(|| {
            (|| op(black_box(42)))
                .retry(ExponentialBuilder::default())
                .call()
        })
    });
    group.finish();
}

fn asynchronous(c: &mut Criterion) {
    let rt = runtime();
    let policy = RetryPolicy::default();
    let mut group = c.benchmark_group("overhead/async");
    group.bench_function("direct .await", |b| {
        b.iter_custom(|iters| drive(&rt, iters, || op_async(black_box(42))))
    });
    group.bench_function("txretry run", |b| {
        b.iter_custom(|iters| {
            drive(&rt, iters, || {
                policy.run(async || op_async(black_box(42)).await)
            })
        })
    });
    group.bench_function("backon retry", |b| {
        b.iter_custom(|iters| {
            drive(&rt, iters, || {
                (|| op_async(black_box(42))).retry(ExponentialBuilder::default())
            })
        })
    });
    group.finish();
}

// ---------------------------------------------------------------------------------------
// Per-call allocations and instructions, counted by valgrind

/// The variants the probe knows, in report order. The control allocates one `Box<u64>` per
/// call, to show the probe sees allocations when there are some.
const VARIANTS: [&str; 7] = [
    "control/box",
    "blocking/direct",
    "blocking/txretry",
    "blocking/backon",
    "async/direct",
    "async/txretry",
    "async/backon",
];

/// Calls per variant counted on top of the first (warm-up) call.
const PROBE_CALLS: u64 = 1000;

/// Runs `variant` `calls` times and returns. The policy and the runtime are built whatever
/// `calls` is, so they cancel out of the difference between two runs.
fn probe(variant: &str, calls: u64) {
    let policy = RetryPolicy::default();
    let rt = runtime();
    match variant {
        "control/box" => (0..calls).for_each(|_| {
            drop(black_box(Box::new(black_box(42_u64))));
        }),
        "blocking/direct" => (0..calls).for_each(|_| {
            let _ = black_box(op(black_box(42)));
        }),
        "blocking/txretry" => (0..calls).for_each(|_| {
            let _ = black_box(policy.run_blocking(|| op(black_box(42))));
        }),
        "blocking/backon" => (0..calls).for_each(|_| {
            let _ = black_box(
                (|| op(black_box(42)))
                    .retry(ExponentialBuilder::default())
                    .call(),
            );
        }),
        "async/direct" => {
            drive(&rt, calls, || op_async(black_box(42)));
        }
        "async/txretry" => {
            drive(&rt, calls, || {
                policy.run(async || op_async(black_box(42)).await)
            });
        }
        "async/backon" => {
            drive(&rt, calls, || {
                (|| op_async(black_box(42))).retry(ExponentialBuilder::default())
            });
        }
        other => panic!("unknown probe variant {other:?}; known: {VARIANTS:?}"),
    }
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

fn report_per_call() {
    let Ok(version) = Command::new("valgrind").arg("--version").output() else {
        println!("per-call allocations and instructions: skipped (valgrind not found)\n");
        return;
    };
    println!(
        "per call, counted by {} (dhat: heap blocks and bytes; callgrind: instructions), \
         (run with 1+{PROBE_CALLS} calls - run with 1 call) / {PROBE_CALLS}:",
        String::from_utf8_lossy(&version.stdout).trim()
    );
    println!(
        "  {:<18} {:>12} {:>12} {:>14}",
        "variant", "allocations", "bytes", "instructions"
    );
    for variant in VARIANTS {
        match per_call(variant, PROBE_CALLS) {
            Ok([blocks, bytes, instructions]) => {
                println!("  {variant:<18} {blocks:>12.3} {bytes:>12.1} {instructions:>14.1}")
            }
            Err(e) => println!("  {variant:<18} valgrind run failed: {e}"),
        }
    }
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--probe") {
        let usage = "--probe <variant> <calls>";
        let variant = args.get(at + 1).expect(usage);
        let calls = args.get(at + 2).and_then(|n| n.parse().ok()).expect(usage);
        probe(variant, calls);
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and skips the counts.
    if args.iter().any(|a| a == "--bench")
        && std::env::var_os("TXRETRY_BENCH_SKIP_VALGRIND").is_none()
    {
        report_per_call();
    }
    let mut criterion = Criterion::default().configure_from_args();
    blocking(&mut criterion);
    asynchronous(&mut criterion);
    criterion.final_summary();
}
