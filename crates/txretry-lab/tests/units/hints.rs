//! `src/hints.rs`.

use std::time::Duration;
use txretry::TransientKind;
use txretry::Verdict;
use txretry_lab::hints::*;
use txretry_lab::presets::Preset;
use txretry_lab::report::{RunReport, Setup};
use txretry_lab::run::{Measured, RunResult};
use txretry_lab::server::Facts;
use txretry_lab::stats::{RetryCounter, Tally};
use txretry_lab::workload::Invariant;

fn setup(engine: &'static str, begin: Option<&'static str>) -> Setup {
    Setup {
        db: "x".into(),
        engine,
        workload: "transfer",
        isolation: "serializable".into(),
        sqlite_begin: begin,
        rows: 8,
        workers: 4,
        processes: 1,
        duration: Duration::from_secs(1),
    }
}

fn report(setup: &Setup, preset: Preset, failed: u64, retries: u64, p50_us: u64) -> RunReport {
    let counter = RetryCounter::default();
    for _ in 0..retries {
        counter.record(Some(TransientKind::Deadlock));
    }
    let mut tally = Tally {
        committed: 10,
        attempts: 10 + failed + retries,
        latencies: std::iter::repeat_n(p50_us, 10).collect(),
        ..Tally::default()
    };
    for _ in 0..failed {
        tally.record_failure(Verdict::Transient(TransientKind::Busy), || "busy".into());
    }
    let measured = Measured {
        tally,
        retries: counter,
        elapsed: Duration::from_secs(1),
        ..Measured::default()
    };
    let result = RunResult::new(preset, measured, Invariant::passed("fine".into()));
    RunReport::new(setup, result)
}

/// A Postgres server with the default `deadlock_timeout` (1 s).
fn postgres_facts() -> Facts {
    Facts {
        deadlock_timeout: Some(Duration::from_secs(1)),
        ..Facts::default()
    }
}

#[test]
fn a_p50_near_deadlock_timeout_is_explained() {
    let pg = setup("postgres", None);
    let facts = postgres_facts();
    let slow = report(&pg, Preset::ExpJitter, 0, 5, 987_000);
    let fast = report(&pg, Preset::Contention, 0, 0, 3_000);
    let hints = hints(&pg, &[slow, fast], &facts);
    let text = hints.join("\n");
    assert!(text.contains("exp-jitter: p50 987 ms"), "{text}");
    assert!(text.contains("deadlock_timeout (1000 ms)"), "{text}");
    assert!(text.contains("--policy contention"), "{text}");
    assert!(!text.contains("contention: p50"), "{text}");
}

/// Several processes (the bench): per-key admission keeps each apart only from its own
/// workers, so the hint for it names the database locks, not itself.
#[test]
fn a_policy_with_admission_is_pointed_further_not_at_itself() {
    let pg = setup("postgres", None);
    let facts = postgres_facts();
    let slow = |preset| report(&pg, preset, 0, 5, 2_013_000);
    let text = hints(&pg, &[slow(Preset::Contention)], &facts).join("\n");
    assert!(text.contains("contention: p50 2"), "{text}");
    assert!(text.contains("--policy database"), "{text}");
    assert!(!text.contains("--policy contention"), "{text}");
    for preset in [Preset::Database, Preset::Adaptive] {
        let text = hints(&pg, &[slow(preset)], &facts).join("\n");
        assert!(!text.contains("deadlock_timeout"), "{text}");
    }
}

/// The CI run that taught us this: p50 65 ms, p95 6067 ms, 8 tx/s, deadlocks retried.
#[test]
fn a_p95_near_deadlock_timeout_is_explained_when_deadlocks_were_met() {
    let pg = setup("postgres", None);
    let facts = postgres_facts();
    let with_tail = |retries| {
        let mut r = report(&pg, Preset::Default, 0, retries, 65_000);
        r.p95_ms = Some(6067.0);
        r
    };
    let text = hints(&pg, &[with_tail(10)], &facts).join("\n");
    assert!(text.contains("default: p95 6067 ms"), "{text}");
    assert!(text.contains("--policy contention"), "{text}");
    // A slow tail with no deadlock in it is some other wait: no deadlock_timeout hint.
    let text = hints(&pg, &[with_tail(0)], &facts).join("\n");
    assert!(!text.contains("deadlock_timeout"), "{text}");
}

#[test]
fn the_point_of_the_comparison_is_said() {
    let sqlite = setup("sqlite", Some("deferred"));
    let runs = [
        report(&sqlite, Preset::None, 30, 0, 500),
        report(&sqlite, Preset::Default, 2, 4, 500),
        report(&sqlite, Preset::ExpJitter, 0, 9, 500),
    ];
    let text = hints(&sqlite, &runs, &Facts::default()).join("\n");
    assert!(
        text.contains("without retries 30 of 40 transactions failed"),
        "{text}"
    );
    assert!(text.contains("exp-jitter retried and lost none"), "{text}");
    assert!(
        text.contains("default still lost 2: 2 attempts ran out"),
        "{text}"
    );
}

#[test]
fn nothing_retried_says_why() {
    let sqlite = setup("sqlite", Some("immediate"));
    let runs = [report(&sqlite, Preset::Default, 0, 0, 500)];
    let text = hints(&sqlite, &runs, &Facts::default()).join("\n");
    assert!(text.contains("BEGIN IMMEDIATE"), "{text}");
}

/// `sqlite::memory:`: every preset loses the same transactions to SQLITE_LOCKED, which
/// no preset retries; the hint says why.
#[test]
fn shared_cache_locks_are_explained() {
    let sqlite = setup("sqlite", None);
    let mut run = report(&sqlite, Preset::ExpJitter, 0, 0, 500);
    let text = hints(&sqlite, std::slice::from_ref(&run), &Facts::default()).join("\n");
    assert!(!text.contains("SQLITE_LOCKED"), "{text}");
    run.failed_by_kind.insert("locked".into(), 3);
    run.failed = 3;
    let text = hints(&sqlite, &[run], &Facts::default()).join("\n");
    assert!(text.contains("SQLITE_LOCKED (code 6)"), "{text}");
    assert!(text.contains("retry_on"), "{text}");
}
