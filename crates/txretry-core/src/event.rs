//! The events a retry loop fires: before every wait, and once when it gives up. Both go to
//! the policy's hooks and to `tracing` (target `txretry`).

use std::error::Error;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use crate::{Code, Outcome, Phase, RecordedAttempt, RetryPolicy, TransientKind, Verdict};

pub(crate) type RetryHook = Arc<dyn Fn(&RetryEvent<'_>) + Send + Sync>;
pub(crate) type GiveUpHook = Arc<dyn Fn(&GiveUpEvent<'_>) + Send + Sync>;

/// A failed attempt that is about to be retried.
#[non_exhaustive]
#[derive(Clone, Copy)]
pub struct RetryEvent<'a> {
    /// The attempt that failed, 1-based. Under a failover budget the attempts made during
    /// an outage count here too, so it can pass `max_attempts`.
    pub attempt: u32,
    /// Attempts allowed in total outside an outage (an outage's retries draw on the
    /// failover budget instead).
    pub max_attempts: u32,
    /// The wait before the next attempt.
    pub delay: Duration,
    /// What the failure was judged to be (transient, or ambiguous on an idempotent operation).
    pub verdict: Verdict,
    /// The code that matched, if any.
    pub code: Option<Code>,
    /// Where the attempt failed.
    pub phase: Phase,
    /// The error, as returned by the attempt.
    pub error: &'a (dyn Error + 'static),
    /// The tool this loop runs for, when the policy has a labelled [`RetryBudget`](crate::RetryBudget).
    pub tool: Option<&'a str>,
    /// The tool call's id, likewise.
    pub call_id: Option<&'a str>,
    /// Where the policy came from (`"tool"`, `"toolbox"`, `"default"`), likewise.
    pub policy_level: Option<&'a str>,
}

impl RetryEvent<'_> {
    /// The transient kind, or `None` for an ambiguous failure retried because the operation
    /// was declared idempotent.
    pub fn kind(&self) -> Option<TransientKind> {
        self.verdict.kind()
    }
}

impl fmt::Debug for RetryEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryEvent")
            .field("attempt", &self.attempt)
            .field("max_attempts", &self.max_attempts)
            .field("delay", &self.delay)
            .field("verdict", &self.verdict)
            .field("code", &self.code)
            .field("phase", &self.phase)
            .field("error", &format_args!("{}", self.error))
            .field("tool", &self.tool)
            .field("call_id", &self.call_id)
            .field("policy_level", &self.policy_level)
            .finish()
    }
}

/// The loop stopped on a failure that was not a plain permanent one: retries ran out, the
/// time did, the kind is not retried, or the commit was ambiguous. A permanent failure (the
/// closure's own error, a constraint) fires nothing: it is an ordinary outcome.
#[non_exhaustive]
#[derive(Clone, Copy)]
pub struct GiveUpEvent<'a> {
    /// Every attempt's failure and why the loop stopped.
    pub outcome: &'a Outcome,
    /// Every attempt's failure with its error's text, first to last: the entries of
    /// `outcome.history()`, in the same order. For a tool call (the toolbox's `on_give_up`
    /// hook), every attempt made under the call's budget: the runners' transaction
    /// attempts inside each run of the handler, and each run that failed outside a runner.
    pub attempts: &'a [RecordedAttempt],
    /// Attempts allowed in total.
    pub max_attempts: u32,
    /// The last attempt's error, the one returned to the caller.
    pub error: &'a (dyn Error + 'static),
    /// The tool this loop runs for, when the policy has a labelled [`RetryBudget`](crate::RetryBudget).
    pub tool: Option<&'a str>,
    /// The tool call's id, likewise.
    pub call_id: Option<&'a str>,
    /// Where the policy came from, likewise.
    pub policy_level: Option<&'a str>,
}

impl fmt::Debug for GiveUpEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GiveUpEvent")
            .field("outcome", &self.outcome)
            .field("attempts", &self.attempts)
            .field("max_attempts", &self.max_attempts)
            .field("error", &format_args!("{}", self.error))
            .field("tool", &self.tool)
            .field("call_id", &self.call_id)
            .field("policy_level", &self.policy_level)
            .finish()
    }
}

fn kind_name(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Transient(kind) => kind.as_str(),
        Verdict::Ambiguous => "ambiguous",
        _ => "permanent",
    }
}

/// Sends a retry to `tracing` at debug level (a contended service retries often; one line
/// each at warn would flood its logs) and to the policy's hook. A panicking hook is contained.
pub(crate) fn emit_retry(policy: &RetryPolicy, event: &RetryEvent<'_>) {
    tracing::debug!(
        target: "txretry",
        attempt = event.attempt,
        max_attempts = event.max_attempts,
        delay_ms = u64::try_from(event.delay.as_millis()).unwrap_or(u64::MAX),
        kind = kind_name(event.verdict),
        phase = %event.phase,
        code = event.code.map(tracing::field::display),
        error = %event.error,
        tool = event.tool,
        call_id = event.call_id,
        policy_level = event.policy_level,
        "transaction attempt failed transiently; retrying",
    );
    if let Some(hook) = policy.on_retry_hook() {
        contain(|| hook(event), "on_retry");
    }
}

/// Sends a give-up to `tracing` at warn level and to the policy's hook.
pub(crate) fn emit_give_up(policy: &RetryPolicy, event: &GiveUpEvent<'_>) {
    tracing::warn!(
        target: "txretry",
        attempts = event.outcome.attempts(),
        max_attempts = event.max_attempts,
        kind = kind_name(event.outcome.verdict()),
        phase = %event.outcome.phase(),
        code = event.outcome.code().map(tracing::field::display),
        reason = ?event.outcome.stop_reason(),
        error = %event.error,
        tool = event.tool,
        call_id = event.call_id,
        policy_level = event.policy_level,
        "transaction failed; not retrying",
    );
    if let Some(hook) = policy.on_give_up_hook() {
        contain(|| hook(event), "on_give_up");
    }
}

fn contain(call: impl FnOnce(), hook: &str) {
    if catch_unwind(AssertUnwindSafe(call)).is_err() {
        tracing::error!(target: "txretry", hook, "a retry hook panicked; the loop goes on");
    }
}
