//! [`RetryState`]: where a runner's loop stands, and what to do after a failure.

use std::time::Duration;

use super::failure::{TxFailure, own_read_only_write};
use crate::event::{GiveUpEvent, RetryEvent, emit_give_up, emit_retry};
use crate::{
    AsError, Decision, Outcome, RecordedAttempt, RetryBudget, RetryPolicy, StopReason, TxError,
    TxOptions, Verdict,
};

/// The loop state every runner shares: which attempt this is, when the first began, every
/// failure so far, and what to do after a failure. It owns (cheap clones of) what it needs,
/// so a runner's future holds no borrow of the caller's policy.
#[doc(hidden)]
#[derive(Debug)]
pub struct RetryState {
    policy: RetryPolicy,
    idempotent: bool,
    /// A 25006 (read-only transaction) in a transaction asked to be read-only is the
    /// caller's own write, not a standby: permanent.
    read_only: bool,
    attempt: u32,
    /// Read only when the policy has a `max_elapsed`: the happy path skips the clock.
    start: Option<tokio::time::Instant>,
    /// When the current outage (a run of failover or connection failures ridden out under
    /// the policy's failover budget) began, and how many of its attempts failed.
    outage: Option<(tokio::time::Instant, u32)>,
    /// Attempts spent inside outages: they count against no `max_attempts`.
    outage_attempts: u32,
    /// Every failed attempt, with its error's text; allocated on the first failure only.
    attempts: Vec<RecordedAttempt>,
    /// The scope's outer loop: it records its attempts itself, not in the scope.
    outer: bool,
}

impl RetryState {
    /// A loop about to make its first attempt. Time is read from `tokio::time`, which is
    /// the plain monotonic clock outside a runtime and honours paused time inside one.
    #[inline]
    pub fn new(policy: &RetryPolicy, options: &TxOptions) -> Self {
        let start = policy.max_elapsed().map(|_| tokio::time::Instant::now());
        RetryState {
            policy: policy.clone(),
            idempotent: options.is_idempotent(),
            read_only: options.is_read_only(),
            attempt: 1,
            start,
            outage: None,
            outage_attempts: 0,
            attempts: Vec::new(),
            outer: false,
        }
    }

    /// Makes this the outer loop of its policy's [`RetryBudget`]: a loop each of whose attempts
    /// runs the scope's other loops (a tool call's invocation, whose attempt is one run of
    /// the handler and its runners). It records its own failed attempts here, not in the
    /// scope, and its outcome and give-up event list the inner loops' attempts handed to it
    /// with [`inner_attempts`](RetryState::inner_attempts), so they cover every attempt
    /// made under the scope's budget.
    #[must_use]
    pub fn outer(mut self) -> Self {
        self.outer = true;
        self
    }

    /// The attempts the scope's inner loops made during the attempt about to be judged
    /// (taken with [`RetryBudget::take_attempts`]): listed before it in the outcome and the
    /// give-up event. Leave out an inner attempt that *is* this attempt's failure (a
    /// runner's give-up judged again here), or it is listed twice.
    pub fn inner_attempts(&mut self, attempts: impl IntoIterator<Item = RecordedAttempt>) {
        self.attempts.extend(attempts);
    }

    /// The policy the loop runs under.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The attempt about to run (or running), 1-based.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Records that the loop succeeded (for a runner: committed), for the scope's count.
    #[inline]
    pub fn succeeded(&self) {
        if let Some(scope) = self.policy.budget() {
            scope.succeeded();
        }
    }

    /// Records a failed attempt and decides: wait and retry (the [`RetryEvent`] has fired),
    /// or stop (call [`give_up`](RetryState::give_up) with the same failure).
    pub fn after_failure<E, Via>(&mut self, failure: &TxFailure<E>) -> Decision
    where
        E: AsError<Via>,
    {
        let mut judged = failure.failure;
        if own_read_only_write(self.read_only, judged.code) {
            // The caller's own write in a transaction it asked to be read-only.
            judged.verdict = Verdict::Permanent;
        }
        // The text is read only by a give-up hook and the scope: a loop with neither
        // formats nothing.
        let text = if self.policy.budget().is_some() || self.policy.on_give_up_hook().is_some() {
            bounded_text(failure.error.as_error())
        } else {
            String::new()
        };
        let recorded = RecordedAttempt::new(judged, text);
        if let Some(scope) = self.policy.budget()
            && !self.outer
        {
            scope.record(recorded.clone());
        }
        self.attempts.push(recorded);
        if let Some(reason) = failure.stop {
            return Decision::Stop(reason);
        }
        let elapsed = self.start.map_or(Duration::ZERO, |start| start.elapsed());
        let unit = fastrand::f64();
        let decision = match self.outage_decision(judged.verdict, unit) {
            Some(decision) => {
                // Within the outage budget: no attempt budget is drawn on, but the
                // loop's own time limit still holds.
                match (decision, self.policy.max_elapsed()) {
                    (Decision::RetryAfter(delay), Some(max)) if elapsed + delay > max => {
                        Decision::Stop(StopReason::ElapsedExceeded)
                    }
                    _ => decision,
                }
            }
            None => {
                self.outage = None;
                let decision = self.policy.decide(
                    judged.verdict,
                    self.idempotent,
                    self.attempt - self.outage_attempts,
                    elapsed,
                    unit,
                );
                match (decision, self.policy.budget()) {
                    // The operation this loop is part of has spent its retries elsewhere.
                    (Decision::RetryAfter(_), Some(scope)) if !scope.take_retry() => {
                        Decision::Stop(StopReason::AttemptsExhausted)
                    }
                    _ => decision,
                }
            }
        };
        if self.outage.is_some() && matches!(decision, Decision::RetryAfter(_)) {
            self.outage_attempts += 1;
        }
        if let Decision::RetryAfter(delay) = decision {
            let event = RetryEvent {
                attempt: self.attempt,
                max_attempts: self.policy.max_attempts(),
                delay,
                verdict: judged.verdict,
                code: judged.code,
                phase: judged.phase,
                error: failure.error.as_error(),
                tool: self.policy.budget().and_then(RetryBudget::tool),
                call_id: self.policy.budget().and_then(RetryBudget::call_id),
                policy_level: self.policy.budget().and_then(RetryBudget::level),
            };
            emit_retry(&self.policy, &event);
            self.attempt += 1;
        }
        decision
    }

    /// The decision under the policy's failover budget when `verdict` is part of an
    /// outage (starting or continuing one); `None` otherwise.
    fn outage_decision(&mut self, verdict: Verdict, unit: f64) -> Option<Decision> {
        if self.policy.failover().is_none() || !crate::failover::is_outage(verdict) {
            return None;
        }
        let now = tokio::time::Instant::now();
        let (began, failures) = self.outage.get_or_insert((now, 0));
        *failures += 1;
        let (began, failures) = (*began, *failures);
        let decision = self.policy.decide_in_outage(
            verdict,
            now.saturating_duration_since(began),
            failures,
            unit,
        );
        if decision.is_none() {
            self.outage = None;
        }
        decision
    }

    /// Ends the loop with `failure` (the one [`after_failure`](RetryState::after_failure)
    /// just stopped on): fires the give-up event when the failure was not a plain
    /// permanent one, and returns the caller's error with the outcome.
    pub fn give_up<E, Via>(&mut self, failure: TxFailure<E>, reason: StopReason) -> TxError<E>
    where
        E: AsError<Via>,
    {
        let attempts = std::mem::take(&mut self.attempts);
        let history = attempts.iter().map(|a| a.failure).collect();
        let outcome = Outcome::new(history, reason);
        if let Some(scope) = self.policy.budget() {
            scope.gave_up(&outcome);
        }
        if outcome.verdict() != Verdict::Permanent {
            emit_give_up(
                &self.policy,
                &GiveUpEvent {
                    outcome: &outcome,
                    attempts: &attempts,
                    max_attempts: self.policy.max_attempts(),
                    error: failure.error.as_error(),
                    tool: self.policy.budget().and_then(RetryBudget::tool),
                    call_id: self.policy.budget().and_then(RetryBudget::call_id),
                    policy_level: self.policy.budget().and_then(RetryBudget::level),
                },
            );
        }
        TxError::new(failure.error, outcome, <E as AsError<Via>>::as_error)
    }
}

/// The most of an error's text each recorded attempt keeps: a loop keeps one per attempt
/// (and a budget one more), so a 1 MB message over hundreds of attempts would hold
/// hundreds of MB. What drivers say comes first, well within this.
pub(crate) const MAX_RECORDED_TEXT: usize = 4096;

/// `error`'s `Display`, cut after [`MAX_RECORDED_TEXT`] bytes (at a character, then `…`).
/// Rendering stops there: a longer message is never formatted whole.
fn bounded_text(error: &(dyn std::error::Error + 'static)) -> String {
    use std::fmt::Write;
    #[derive(Default)]
    struct Bounded {
        text: String,
        cut: bool,
    }
    impl Write for Bounded {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let room = MAX_RECORDED_TEXT - self.text.len();
            if s.len() <= room {
                self.text.push_str(s);
                return Ok(());
            }
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.text.push_str(&s[..end]);
            self.cut = true;
            // Stops the rendering.
            Err(std::fmt::Error)
        }
    }
    let mut bounded = Bounded::default();
    let _ = write!(bounded, "{error}");
    if bounded.cut {
        bounded.text.push('…');
    }
    bounded.text
}
