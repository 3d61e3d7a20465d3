//! Classification cost: `txretry::classify` against the classifier people hand-write
//! (`to_string().to_lowercase()` of every link in the `source()` chain, searched for
//! substrings), on the same errors in the same run, one criterion group.
//!
//! Inputs, each wrapped one level in an application error (thiserror, `#[from]`), as real
//! code returns them:
//! - `typed sqlite 517`: `rusqlite::Error::SqliteFailure(ffi::Error::new(517), None)`
//!   (SQLITE_BUSY_SNAPSHOT), which the rusqlite adapter's registered extractor reads;
//! - `message 200 B`: a message-only error of 200 bytes starting with the server's own text
//!   for error 1213, "Deadlock found when trying to get lock; try restarting transaction"
//!   (MySQL and MariaDB print the same; the message fallback matches only such exact driver
//!   phrases, case included);
//! - `message 1 MB`: the same phrase at the start of a 1 MiB message;
//! - `permanent 200 B`: a message-only error of 200 bytes with no transient phrase.
//!
//! The setup asserts what both classifiers answer on every input before timing anything, so
//! a broken setup (say, the rusqlite extractor not linked) fails instead of timing the
//! message fallback under the typed name.
//!
//! As in `overhead.rs`, heap allocations and instructions per call are counted first by
//! re-running this binary under valgrind (dhat, callgrind) in a probe mode
//! (`--probe <classifier>/<input> <calls>`); `TXRETRY_BENCH_SKIP_VALGRIND=1` skips that.

#[path = "probe/mod.rs"]
mod probe;

use std::error::Error;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion};
use txretry::{Classification, Code, TransientKind, Verdict};

/// A driver error that only has a message (no typed code), like a proxy's or an ORM's.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ServerMessage(String);

/// The one level of wrapping real application code adds.
#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("transfer failed")]
    Db(#[from] rusqlite::Error),
    #[error("transfer failed")]
    Server(#[from] ServerMessage),
}

/// The classifier people hand-write: Display of each link, lower-cased, searched.
fn naive_classify(error: &(dyn Error + 'static)) -> Option<&'static str> {
    const NEEDLES: [&str; 4] = [
        "deadlock",
        "lock wait timeout",
        "serialization failure",
        "database is locked",
    ];
    let mut link = Some(error);
    while let Some(e) = link {
        let text = e.to_string().to_lowercase();
        if let Some(needle) = NEEDLES.into_iter().find(|n| text.contains(n)) {
            return Some(needle);
        }
        link = e.source();
    }
    None
}

/// `head` followed by ASCII filler (none of the phrases either classifier looks for), cut to
/// exactly `len` bytes.
fn message(head: &str, len: usize) -> String {
    const FILLER: &str = " while executing UPDATE accounts SET balance = balance - ? WHERE id = ?;";
    let mut text = String::with_capacity(len + FILLER.len());
    text.push_str(head);
    while text.len() < len {
        text.push_str(FILLER);
    }
    text.truncate(len);
    text
}

struct Input {
    name: &'static str,
    error: AppError,
    ours: Classification,
    naive: Option<&'static str>,
}

fn inputs() -> Vec<Input> {
    const DEADLOCK: &str = "Deadlock found when trying to get lock; try restarting transaction";
    // The fallback reports the driver phrase it matched, not the whole message.
    let deadlock = Classification::new(
        Verdict::Transient(TransientKind::Deadlock),
        Some(Code::Message("Deadlock found when trying to get lock")),
    );
    vec![
        Input {
            name: "typed sqlite 517",
            error: AppError::from(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(517),
                None,
            )),
            ours: Classification::new(
                Verdict::Transient(TransientKind::Busy),
                Some(Code::Sqlite(517)),
            ),
            naive: Some("database is locked"),
        },
        Input {
            name: "message 200 B",
            error: AppError::from(ServerMessage(message(DEADLOCK, 200))),
            ours: deadlock,
            naive: Some("deadlock"),
        },
        Input {
            name: "message 1 MB",
            error: AppError::from(ServerMessage(message(DEADLOCK, 1 << 20))),
            ours: deadlock,
            naive: Some("deadlock"),
        },
        Input {
            name: "permanent 200 B",
            error: AppError::from(ServerMessage(message(
                "Order 17 not found for customer 4711",
                200,
            ))),
            ours: Classification::new(Verdict::Permanent, None),
            naive: None,
        },
    ]
}

/// Fails loudly unless both classifiers answer what this bench claims to measure.
fn check(inputs: &[Input]) {
    // Nothing from `txretry::rusqlite` is named here on purpose: with the `rusqlite` feature
    // on, the default classifier must know rusqlite's codes with no further setup, so the
    // typed input below also checks that the adapter's extractor is registered and linked.
    for input in inputs {
        let error: &(dyn Error + 'static) = &input.error;
        let ours = txretry::classify(error);
        assert_eq!(
            (ours.verdict, ours.code),
            (input.ours.verdict, input.ours.code),
            "txretry::classify on {:?}; is the rusqlite adapter's extractor registered and linked?",
            input.name,
        );
        assert_eq!(
            naive_classify(error),
            input.naive,
            "naive classifier on {:?}",
            input.name
        );
    }
}

fn classify(c: &mut Criterion) {
    let inputs = inputs();
    check(&inputs);
    let mut group = c.benchmark_group("classify");
    for input in &inputs {
        let error: &(dyn Error + 'static) = &input.error;
        group.bench_with_input(BenchmarkId::new("txretry", input.name), error, |b, e| {
            b.iter(|| txretry::classify(black_box(e)))
        });
        group.bench_with_input(BenchmarkId::new("naive", input.name), error, |b, e| {
            b.iter(|| naive_classify(black_box(e)))
        });
    }
    group.finish();
}

/// The two classifiers, as the benchmark ids and the probe name them.
const CLASSIFIERS: [&str; 2] = ["txretry", "naive"];

// ---------------------------------------------------------------------------------------
// Per-call allocations and instructions, counted by valgrind (see benches/overhead.rs)

/// Calls per variant counted on top of the first (warm-up) call.
const PROBE_CALLS: u64 = 100;

/// Runs `<classifier>/<input name>` `calls` times. The inputs are built whatever `calls` is,
/// so they cancel out of the difference between two runs.
fn probe(variant: &str, calls: u64) {
    let inputs = inputs();
    check(&inputs);
    let (classifier, name) = variant.split_once('/').expect("<classifier>/<input>");
    let input = inputs
        .iter()
        .find(|i| i.name == name)
        .expect("a known input name");
    let error: &(dyn Error + 'static) = &input.error;
    match classifier {
        "txretry" => (0..calls).for_each(|_| {
            black_box(txretry::classify(black_box(error)));
        }),
        "naive" => (0..calls).for_each(|_| {
            black_box(naive_classify(black_box(error)));
        }),
        other => panic!("unknown classifier {other:?}; known: {CLASSIFIERS:?}"),
    }
}

fn main() {
    if let Some((variant, calls)) = probe::request("--probe <classifier>/<input> <calls>") {
        probe(&variant, calls);
        return;
    }
    if probe::counts_wanted() {
        let variants: Vec<String> = inputs()
            .iter()
            .flat_map(|input| CLASSIFIERS.map(|c| format!("{c}/{}", input.name)))
            .collect();
        probe::report(&variants, PROBE_CALLS);
    }
    let mut criterion = Criterion::default().configure_from_args();
    classify(&mut criterion);
    criterion.final_summary();
}
