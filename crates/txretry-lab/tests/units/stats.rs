//! `src/stats.rs`.

use std::collections::BTreeMap;
use txretry::{TransientKind, Verdict};
use txretry_lab::stats::*;

#[test]
fn nearest_rank() {
    let samples: Latencies = (1..=100).collect();
    assert_eq!(samples.percentile(50.0), Some(50));
    assert_eq!(samples.percentile(95.0), Some(95));
    assert_eq!(samples.percentile(99.0), Some(99));
    assert_eq!(samples.percentile(100.0), Some(100));
    assert_eq!(samples.percentile(0.0), Some(1));
}

#[test]
fn small_and_empty_samples() {
    assert_eq!(Latencies::default().percentile(50.0), None);
    let one: Latencies = [7].into_iter().collect();
    assert_eq!(one.percentile(99.0), Some(7));
    let two: Latencies = [1, 2].into_iter().collect();
    assert_eq!(two.percentile(50.0), Some(1));
    assert_eq!(two.percentile(51.0), Some(2));
    // 10 samples: p95 and p99 are both the largest.
    let ten: Latencies = (1..=10).collect();
    assert_eq!(ten.percentile(95.0), Some(10));
    assert_eq!(ten.percentile(90.0), Some(9));
}

#[test]
fn large_values_keep_three_significant_digits() {
    let samples: Latencies = [123_456_789, 1_000, 2_000_001].into_iter().collect();
    let max = samples.percentile(100.0).expect("samples");
    assert!(
        max <= 123_456_789 && max as f64 >= 123_456_789.0 * 0.999,
        "{max}"
    );
    let p50 = samples.percentile(50.0).expect("samples");
    assert!(
        p50 <= 2_000_001 && p50 as f64 >= 2_000_001.0 * 0.999,
        "{p50}"
    );
    assert_eq!(samples.percentile(1.0), Some(1_000));
}

#[test]
fn percentiles_convert_to_ms() {
    let samples: Latencies = [3000, 1000, 2000, 4000].into_iter().collect();
    let p = Percentiles::of(&samples);
    assert_eq!(p.p50, Some(2.0));
    assert_eq!(p.p99, Some(4.0));
    assert_eq!(p.max, Some(4.0));
    assert_eq!(
        Percentiles::of(&Latencies::default()),
        Percentiles::default()
    );
}

#[test]
fn retry_counter_names_every_kind() {
    let counter = RetryCounter::default();
    counter.clone().record(Some(TransientKind::Deadlock));
    counter.record(Some(TransientKind::Deadlock));
    counter.record(None);
    let by_kind = counter.by_kind();
    assert_eq!(by_kind["deadlock"], 2);
    assert_eq!(by_kind[AMBIGUOUS], 1);
    assert_eq!(by_kind["busy"], 0);
    assert_eq!(by_kind.len(), TransientKind::ALL.len() + 1);
    assert_eq!(counter.total(), 3);
    let sum = RetryCounter::default();
    sum.add_by_kind(&by_kind).expect("known names");
    sum.add_by_kind(&by_kind).expect("known names");
    assert_eq!(sum.by_kind()["deadlock"], 4);
    assert_eq!(sum.by_kind()[AMBIGUOUS], 2);
    assert_eq!(sum.total(), 6);
    let bogus: BTreeMap<String, u64> = [("bogus".to_owned(), 1)].into();
    assert!(sum.add_by_kind(&bogus).is_err());
}

#[test]
fn tallies_merge() {
    let mut a = Tally {
        committed: 1,
        attempts: 2,
        latencies: [5].into_iter().collect(),
        ..Tally::default()
    };
    a.record_failure(Verdict::Permanent, || "first".into());
    let mut b = Tally {
        committed: 2,
        attempts: 3,
        latencies: [6].into_iter().collect(),
        ..Tally::default()
    };
    b.record_failure(Verdict::Permanent, || "second".into());
    b.record_failure(Verdict::Transient(TransientKind::Busy), || "busy".into());
    b.record_failure(Verdict::Transient(TransientKind::Busy), || "later".into());
    a.merge(b);
    assert_eq!((a.committed, a.attempts, a.failed()), (3, 5, 4));
    assert_eq!(a.failed_by_kind["permanent"], 2);
    // The first message of each kind survives, in whichever tally it came first.
    assert_eq!(a.first_errors["permanent"], "first");
    assert_eq!(a.first_errors["busy"], "busy");
    assert_eq!(a.latencies, [5, 6].into_iter().collect());
    assert_eq!(ratio(1, 0), None);
    assert_eq!(ratio(3, 2), Some(1.5));
}
