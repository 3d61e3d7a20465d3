//! `max_delay` is a cap that jitter never exceeds, whatever the policy: random extreme
//! policies (caps up to about 1e12 s, where the f64 arithmetic of jitter loses precision).

use std::time::Duration;

use proptest::prelude::*;
use txretry_core::{Backoff, Decision, Jitter, RetryPolicy, TransientKind, Verdict};

fn backoff() -> impl Strategy<Value = Backoff> {
    prop_oneof![
        (0_u64..1_000_000_000_000).prop_map(|ms| Backoff::Constant(Duration::from_millis(ms))),
        (0_u64..1_000_000_000_000).prop_map(|ms| Backoff::Linear(Duration::from_millis(ms))),
        (0_u64..1_000_000_000_000, 1.0_f64..1000.0).prop_map(|(ms, factor)| {
            Backoff::Exponential {
                initial: Duration::from_millis(ms),
                factor,
            }
        }),
    ]
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        (0.0_f64..=1.0).prop_map(Jitter::Proportional),
    ]
}

proptest! {
    #[test]
    fn no_wait_exceeds_max_delay(
        backoff in backoff(),
        jitter in jitter(),
        extra_ns in 0_u64..u64::MAX,
        attempt in 1_u32..200,
        unit in 0.0_f64..=1.0,
    ) {
        let max_delay = backoff.delay(1).saturating_add(Duration::from_nanos(extra_ns));
        let policy = RetryPolicy::builder()
            .max_attempts(u32::MAX)
            .backoff(backoff)
            .jitter(jitter)
            .max_delay(max_delay)
            .build()
            .unwrap();
        let deadlock = Verdict::Transient(TransientKind::Deadlock);
        if let Decision::RetryAfter(delay) = policy.decide(deadlock, false, attempt, Duration::ZERO, unit) {
            prop_assert!(delay <= max_delay, "{delay:?} > {max_delay:?}");
        }
    }
}

/// The case that used to come back above the cap: a wait at a cap of about 1e7 s with
/// nanoseconds f64 cannot hold, proportional jitter drawn at the top of its range.
#[test]
fn a_wait_at_a_huge_cap_stays_within_it() {
    for cap in [
        Duration::new(10_000_000, 123_456_789),
        Duration::new(123_456_789_012, 999_999_999),
    ] {
        let policy = RetryPolicy::builder()
            .backoff(Backoff::Constant(cap))
            .jitter(Jitter::Proportional(0.5))
            .max_delay(cap)
            .build()
            .unwrap();
        let deadlock = Verdict::Transient(TransientKind::Deadlock);
        for unit in [0.999_999_999, 1.0] {
            match policy.decide(deadlock, false, 1, Duration::ZERO, unit) {
                Decision::RetryAfter(delay) => assert!(delay <= cap, "{delay:?} > {cap:?}"),
                other => panic!("{other:?}"),
            }
        }
    }
}
