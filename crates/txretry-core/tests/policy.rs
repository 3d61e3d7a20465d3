//! Building policies: defaults, rejected settings, and delays that stay in bounds.

use std::time::Duration;

use proptest::prelude::*;
use txretry_core::{Backoff, Decision, Jitter, PolicyError, RetryPolicy, TransientKind, Verdict};

const DEADLOCK: Verdict = Verdict::Transient(TransientKind::Deadlock);

#[test]
fn default_is_two_attempts_with_150ms_linear_backoff() {
    let p = RetryPolicy::default();
    assert_eq!(p.max_attempts(), 2);
    assert_eq!(
        p.decide(DEADLOCK, false, 1, Duration::ZERO, 0.9),
        Decision::RetryAfter(Duration::from_millis(150))
    );
}

#[test]
fn zero_attempts_is_rejected_naming_the_field() {
    let err = RetryPolicy::builder().max_attempts(0).build().unwrap_err();
    assert_eq!(err, PolicyError::ZeroAttempts);
    assert!(err.to_string().contains("max_attempts"));
}

#[test]
fn factor_below_one_or_nan_is_rejected_naming_the_field() {
    for factor in [0.5, f64::NAN, f64::INFINITY, -1.0] {
        let err = RetryPolicy::builder()
            .backoff(Backoff::Exponential {
                initial: Duration::from_millis(1),
                factor,
            })
            .build()
            .unwrap_err();
        assert!(matches!(err, PolicyError::Factor(_)), "{factor}");
        assert!(err.to_string().contains("factor"));
    }
}

#[test]
fn jitter_outside_0_to_1_is_rejected_naming_the_field() {
    for f in [-0.1, 1.5, f64::NAN] {
        let err = RetryPolicy::builder()
            .jitter(Jitter::Proportional(f))
            .build()
            .unwrap_err();
        assert!(matches!(err, PolicyError::Jitter(_)), "{f}");
        assert!(err.to_string().contains("jitter"));
    }
}

#[test]
fn max_delay_below_initial_is_rejected_naming_the_field() {
    let err = RetryPolicy::builder()
        .backoff(Backoff::Constant(Duration::from_millis(100)))
        .max_delay(Duration::from_millis(10))
        .build()
        .unwrap_err();
    assert!(matches!(err, PolicyError::MaxDelayBelowInitial { .. }));
    assert!(err.to_string().contains("max_delay"));
}

#[test]
fn ambiguous_is_retried_only_when_idempotent() {
    let p = RetryPolicy::default();
    assert!(matches!(
        p.decide(Verdict::Ambiguous, false, 1, Duration::ZERO, 0.0),
        Decision::Stop(_)
    ));
    assert!(matches!(
        p.decide(Verdict::Ambiguous, true, 1, Duration::ZERO, 0.0),
        Decision::RetryAfter(_)
    ));
}

#[test]
fn locked_and_connection_are_opt_in() {
    let p = RetryPolicy::default();
    for kind in [TransientKind::Locked, TransientKind::Connection] {
        assert!(matches!(
            p.decide(Verdict::Transient(kind), false, 1, Duration::ZERO, 0.0),
            Decision::Stop(_)
        ));
    }
    let opted = RetryPolicy::builder()
        .retry_on([TransientKind::Connection])
        .build()
        .unwrap();
    assert!(matches!(
        opted.decide(
            Verdict::Transient(TransientKind::Connection),
            false,
            1,
            Duration::ZERO,
            0.0
        ),
        Decision::RetryAfter(_)
    ));
}

proptest! {
    #[test]
    fn exponential_delay_with_full_jitter_stays_within_0_and_the_cap(
        initial_ms in 1u64..1_000,
        factor in 1.0f64..8.0,
        cap_factor in 1u64..100,
        attempt in 1u32..64,
        unit in 0.0f64..1.0,
    ) {
        let initial = Duration::from_millis(initial_ms);
        let cap = initial * u32::try_from(cap_factor).unwrap();
        let p = RetryPolicy::builder()
            .max_attempts(u32::MAX)
            .backoff(Backoff::Exponential { initial, factor })
            .max_delay(cap)
            .jitter(Jitter::Full)
            .build()
            .unwrap();
        let Decision::RetryAfter(d) = p.decide(DEADLOCK, false, attempt, Duration::ZERO, unit) else {
            panic!("expected a retry");
        };
        let base = Backoff::Exponential { initial, factor }.delay(attempt).min(cap);
        prop_assert!(d <= base, "{d:?} > {base:?}");
        prop_assert!(d <= cap);
    }

    #[test]
    fn exponential_delay_with_proportional_jitter_stays_within_plus_minus_f(
        initial_ms in 1u64..1_000,
        factor in 1.0f64..4.0,
        attempt in 1u32..20,
        f in 0.0f64..=1.0,
        unit in 0.0f64..1.0,
    ) {
        let initial = Duration::from_millis(initial_ms);
        let backoff = Backoff::Exponential { initial, factor };
        let p = RetryPolicy::builder()
            .max_attempts(u32::MAX)
            .backoff(backoff)
            .jitter(Jitter::Proportional(f))
            .build()
            .unwrap();
        let Decision::RetryAfter(d) = p.decide(DEADLOCK, false, attempt, Duration::ZERO, unit) else {
            panic!("expected a retry");
        };
        // No max_delay: exponential backoff is capped at 10 s (or the first wait).
        let cap = Duration::from_secs(10).max(initial);
        let base = backoff.delay(attempt).min(cap).as_secs_f64();
        let (lo, hi) = (base * (1.0 - f), (base * (1.0 + f)).min(cap.as_secs_f64()));
        // One nanosecond of slack for the float-to-Duration rounding.
        prop_assert!(d.as_secs_f64() >= lo - 1e-9 && d.as_secs_f64() <= hi + 1e-9, "{d:?} not in {lo}..={hi}");
    }
}

#[test]
fn exponential_backoff_has_a_default_cap_of_ten_seconds() {
    let p = RetryPolicy::builder()
        .max_attempts(100)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(100),
            factor: 2.0,
        })
        .build()
        .unwrap();
    assert_eq!(
        p.decide(DEADLOCK, false, 30, Duration::ZERO, 0.5),
        Decision::RetryAfter(Duration::from_secs(10))
    );
}

/// Jitter is applied after the cap: late retries, whose base wait is far above
/// `max_delay`, must still spread over the jitter range instead of all landing on the cap.
#[test]
fn jitter_at_late_attempts_spreads_below_the_cap() {
    let cap = Duration::from_millis(500);
    for jitter in [Jitter::Full, Jitter::Proportional(0.5)] {
        let p = RetryPolicy::builder()
            .max_attempts(u32::MAX)
            .backoff(Backoff::Exponential {
                initial: Duration::from_millis(10),
                factor: 2.0,
            })
            .max_delay(cap)
            .jitter(jitter)
            .build()
            .unwrap();
        let delays: Vec<Duration> = (0..1000)
            .map(|i| {
                let unit = f64::from(i) / 1000.0;
                match p.decide(DEADLOCK, false, 20, Duration::ZERO, unit) {
                    Decision::RetryAfter(d) => d,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        assert!(
            delays.iter().all(|d| *d <= cap),
            "{jitter:?}: above the cap"
        );
        let at_cap = delays.iter().filter(|d| **d == cap).count();
        assert!(
            at_cap <= 1,
            "{jitter:?}: {at_cap} of 1000 waits collapsed onto the cap"
        );
        let mut distinct = delays.clone();
        distinct.sort();
        distinct.dedup();
        assert!(
            distinct.len() > 900,
            "{jitter:?}: only {} distinct waits",
            distinct.len()
        );
        let spread = delays
            .iter()
            .max()
            .unwrap()
            .saturating_sub(*delays.iter().min().unwrap());
        assert!(
            spread >= cap / 3,
            "{jitter:?}: waits spread over only {spread:?}"
        );
    }
}

#[test]
fn a_nan_unit_draws_the_middle_of_the_jitter_never_a_zero_wait() {
    let p = RetryPolicy::builder()
        .jitter(Jitter::Proportional(0.5))
        .build()
        .unwrap();
    assert_eq!(
        p.decide(DEADLOCK, false, 1, Duration::ZERO, f64::NAN),
        p.decide(DEADLOCK, false, 1, Duration::ZERO, 0.5)
    );
    let ha = RetryPolicy::high_availability();
    let failover = Verdict::Transient(TransientKind::Failover);
    assert_eq!(
        ha.decide_in_outage(failover, Duration::ZERO, 1, f64::NAN),
        ha.decide_in_outage(failover, Duration::ZERO, 1, 0.5)
    );
}

#[test]
fn a_max_delay_equal_to_a_large_exponential_initial_is_accepted() {
    // Through f64 seconds this initial came back 2 ns longer than itself.
    let initial = Duration::new(40_000_000, 123_456_789);
    let backoff = Backoff::Exponential {
        initial,
        factor: 2.0,
    };
    assert_eq!(backoff.delay(1), initial);
    let built = RetryPolicy::builder()
        .backoff(backoff)
        .max_delay(initial)
        .build();
    assert!(built.is_ok(), "{built:?}");
}
