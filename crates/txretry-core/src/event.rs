//! The event fired before every wait: to the `on_retry` hook and to `tracing`.

use std::error::Error;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use crate::{Code, RetryPolicy, TransientKind, Verdict};

pub(crate) type Hook = Arc<dyn Fn(&RetryEvent<'_>) + Send + Sync>;

/// A failed attempt that is about to be retried.
#[non_exhaustive]
#[derive(Clone, Copy)]
pub struct RetryEvent<'a> {
    /// The attempt that failed, 1-based.
    pub attempt: u32,
    /// Attempts allowed in total.
    pub max_attempts: u32,
    /// The wait before the next attempt.
    pub delay: Duration,
    /// What the failure was judged to be (transient, or ambiguous on an idempotent operation).
    pub verdict: Verdict,
    /// The code that matched, if any.
    pub code: Option<Code>,
    /// The error, as returned by the attempt.
    pub error: &'a (dyn Error + 'static),
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
            .field("error", &format_args!("{}", self.error))
            .finish()
    }
}

/// Sends the event to `tracing` and to the policy's hook. A panicking hook is contained.
pub(crate) fn emit(policy: &RetryPolicy, event: &RetryEvent<'_>) {
    tracing::warn!(
        target: "txretry",
        attempt = event.attempt,
        max_attempts = event.max_attempts,
        delay_ms = u64::try_from(event.delay.as_millis()).unwrap_or(u64::MAX),
        kind = event.kind().map(TransientKind::as_str).unwrap_or("ambiguous"),
        code = event.code.map(tracing::field::display),
        error = %event.error,
        "transaction attempt failed transiently; retrying",
    );
    if let Some(hook) = policy.on_retry_hook()
        && catch_unwind(AssertUnwindSafe(|| hook(event))).is_err()
    {
        tracing::error!(target: "txretry", "the on_retry hook panicked; retrying anyway");
    }
}
