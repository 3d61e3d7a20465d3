//! What kind of failure ended a tool call.

use std::fmt;

/// What kind of failure ended a tool call: what a model (or an MCP client) needs to decide
/// what to do next.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A real outcome ("order not found", a constraint): the handler's error, surfaced
    /// once. Trying again will fail again.
    Business,
    /// A transient failure (deadlock, lock timeout, serialization failure, busy) persisted
    /// until the budget or the time ran out. Nothing was committed; trying later may work.
    RetriesExhausted,
    /// A transient failure of a kind the policy does not retry (`retry_on`). Nothing was
    /// committed.
    NotRetried,
    /// The connection failed while committing: the change may or may not have been made,
    /// and the tool is not idempotent, so it was not run again.
    Ambiguous,
    /// The last attempt ran out of time and was cancelled; it may or may not have taken
    /// effect (retried only for idempotent tools).
    TimedOut,
    /// A transient failure that was not retried because the handler must not run again:
    /// part of its work had committed in that attempt, or the tool is not restart-safe.
    NotRestartable,
    /// The handler panicked. Never retried.
    Panicked,
}

impl FailureKind {
    /// A short stable name: `business`, `retries_exhausted`, `not_retried`, `ambiguous`,
    /// `timed_out`, `not_restartable`, `panicked`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Business => "business",
            FailureKind::RetriesExhausted => "retries_exhausted",
            FailureKind::NotRetried => "not_retried",
            FailureKind::Ambiguous => "ambiguous",
            FailureKind::TimedOut => "timed_out",
            FailureKind::NotRestartable => "not_restartable",
            FailureKind::Panicked => "panicked",
        }
    }

    /// Whether the call may have changed something despite failing (ambiguous, timed out,
    /// or stopped after a commit), so a caller must check before doing it again.
    pub fn may_have_taken_effect(self) -> bool {
        matches!(
            self,
            FailureKind::Ambiguous | FailureKind::TimedOut | FailureKind::NotRestartable
        )
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
