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

#[path = "probe/mod.rs"]
mod probe;

use std::future::Future;
use std::hint::black_box;
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

fn main() {
    if let Some((variant, calls)) = probe::request("--probe <variant> <calls>") {
        probe(&variant, calls);
        return;
    }
    if probe::counts_wanted() {
        probe::report(&VARIANTS.map(String::from), PROBE_CALLS);
    }
    let mut criterion = Criterion::default().configure_from_args();
    blocking(&mut criterion);
    asynchronous(&mut criterion);
    criterion.final_summary();
}
