//! Riding out a failover: retries measured in wall time, not attempts.
//!
//! A deadlock is over once the victim rolls back, so a few attempts are the right budget.
//! A switchover or a crash of the primary is an *outage*: for 1 to 45 seconds every attempt
//! fails at once (connection refused, "the database system is shutting down", "read-only
//! transaction") until a standby is promoted. The budget for that is time, and the wait
//! between attempts must stay short, so the first attempt after the promotion comes soon.

use std::time::Duration;

use crate::policy::unit_interval;
use crate::{Backoff, Decision, Jitter, RetryPolicy, StopReason, TransientKind, Verdict};

/// The first wait during an outage.
pub(crate) const OUTAGE_FIRST_WAIT: Duration = Duration::from_millis(50);
/// The longest wait during an outage: a new primary is found at most this long (plus one
/// connect) after it starts accepting writes.
pub(crate) const OUTAGE_MAX_WAIT: Duration = Duration::from_millis(500);
/// The waits double from the first to the longest, each jittered by ±20% (within the
/// cap) so the clients of a whole fleet do not reconnect in lockstep.
const OUTAGE_BACKOFF: Backoff = Backoff::Exponential {
    initial: OUTAGE_FIRST_WAIT,
    factor: 2.0,
};
const OUTAGE_JITTER: Jitter = Jitter::Proportional(0.2);

/// Whether a verdict is one an outage budget covers: the server went away or is not the
/// primary ([`TransientKind::Failover`]), or the connection failed or could not be had
/// ([`TransientKind::Connection`]: during a failover, connecting to the old primary is
/// refused).
pub(crate) fn is_outage(verdict: Verdict) -> bool {
    matches!(verdict, Verdict::Transient(kind) if kind.loses_session())
}

impl RetryPolicy {
    /// The policy for a database behind a failover manager (Patroni, a managed service's
    /// HA): [`RetryPolicy::default()`] that also rides out a switchover or a failover of
    /// up to 60 seconds ([`RetryPolicyBuilder::failover`](crate::RetryPolicyBuilder::failover)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use txretry_core::{RetryPolicy, TransientKind};
    ///
    /// let policy = RetryPolicy::high_availability();
    /// assert_eq!(policy.failover_budget(), Some(Duration::from_secs(60)));
    /// assert!(policy.retries(TransientKind::Failover));
    /// assert!(policy.retries(TransientKind::Deadlock));
    /// ```
    pub fn high_availability() -> RetryPolicy {
        RetryPolicy::builder()
            .failover(Duration::from_secs(60))
            .build()
            .unwrap_or_else(|_| unreachable!("valid"))
    }

    /// The wall-time budget for an outage, if the policy rides one out.
    pub fn failover_budget(&self) -> Option<Duration> {
        self.failover()
    }

    /// The decision after an attempt failed during an outage: `verdict` is a failover or
    /// connection failure, the outage (the run of such failures) began `outage` ago, and
    /// this is its `retry`-th failure (1-based). `None` when the policy has no failover
    /// budget or the verdict is not an outage's: then [`decide`](RetryPolicy::decide)
    /// applies, with its attempts.
    ///
    /// Within the budget the loop retries whatever `max_attempts` says; the waits start at
    /// 50 ms and double up to 500 ms, jittered by ±20% within that cap (`unit` in `0..1`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use txretry_core::{Decision, RetryPolicy, StopReason, TransientKind, Verdict};
    ///
    /// let p = RetryPolicy::high_availability();
    /// let failover = Verdict::Transient(TransientKind::Failover);
    /// let wait = |d| match d { Some(Decision::RetryAfter(d)) => d, other => panic!("{other:?}") };
    /// assert_eq!(wait(p.decide_in_outage(failover, Duration::ZERO, 1, 0.5)), Duration::from_millis(50));
    /// let late = wait(p.decide_in_outage(failover, Duration::from_secs(20), 30, 0.5));
    /// assert!(late >= Duration::from_millis(400) && late <= Duration::from_millis(500));
    /// assert_eq!(
    ///     p.decide_in_outage(failover, Duration::from_secs(60), 100, 0.5),
    ///     Some(Decision::Stop(StopReason::OutageExceeded)),
    /// );
    /// // Not an outage, or no budget: the ordinary decision applies.
    /// assert_eq!(p.decide_in_outage(Verdict::Transient(TransientKind::Deadlock), Duration::ZERO, 1, 0.5), None);
    /// assert_eq!(RetryPolicy::default().decide_in_outage(failover, Duration::ZERO, 1, 0.5), None);
    /// ```
    pub fn decide_in_outage(
        &self,
        verdict: Verdict,
        outage: Duration,
        retry: u32,
        unit: f64,
    ) -> Option<Decision> {
        let budget = self.failover()?;
        let Verdict::Transient(kind) = verdict else {
            return None;
        };
        if !kind.loses_session() || !self.retries(kind) {
            return None;
        }
        let base = OUTAGE_BACKOFF.delay(retry).min(OUTAGE_MAX_WAIT);
        let delay = OUTAGE_JITTER.apply(base, Some(OUTAGE_MAX_WAIT), unit_interval(unit));
        if outage.saturating_add(delay) > budget {
            return Some(Decision::Stop(StopReason::OutageExceeded));
        }
        Some(Decision::RetryAfter(delay))
    }

    /// Whether the policy retries `kind` at all.
    pub fn retries(&self, kind: TransientKind) -> bool {
        self.retry_on().contains(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_stay_within_the_cap_whatever_the_jitter() {
        let p = RetryPolicy::high_availability();
        let v = Verdict::Transient(TransientKind::Connection);
        for retry in 1..200 {
            for unit in [0.0, 0.3, 0.999, 1.0] {
                match p.decide_in_outage(v, Duration::from_secs(1), retry, unit) {
                    Some(Decision::RetryAfter(d)) => {
                        assert!(d <= OUTAGE_MAX_WAIT, "{d:?} at retry {retry}");
                        assert!(d >= OUTAGE_FIRST_WAIT.mul_f64(0.8), "{d:?}");
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    #[test]
    fn a_kind_taken_out_of_retry_on_is_not_ridden_out() {
        let p = RetryPolicy::builder()
            .failover(Duration::from_secs(30))
            .retry_on(crate::KindSet::DEFAULT.with(TransientKind::Failover))
            .build()
            .unwrap();
        let failover = Verdict::Transient(TransientKind::Failover);
        let connection = Verdict::Transient(TransientKind::Connection);
        assert!(
            p.decide_in_outage(failover, Duration::ZERO, 1, 0.5)
                .is_some()
        );
        assert_eq!(p.decide_in_outage(connection, Duration::ZERO, 1, 0.5), None);
    }

    #[test]
    fn ambiguous_and_permanent_are_never_an_outage() {
        let p = RetryPolicy::high_availability();
        for v in [Verdict::Ambiguous, Verdict::Permanent] {
            assert!(!is_outage(v));
            assert_eq!(p.decide_in_outage(v, Duration::ZERO, 1, 0.5), None);
        }
    }
}
