//! One run of the handler that failed, as a failed call reports it.

use std::error::Error;

use txretry_core::{AttemptFailure, Code, Outcome, Phase, TransientKind, Verdict};

use super::run::AttemptEnd;
#[cfg(doc)]
use super::{Panicked, TimedOut};
#[cfg(doc)]
use crate::ToolContext;
use crate::tool::BoxError;

/// One run of the handler that failed: its error, unchanged, and how it was judged.
#[derive(Debug)]
pub struct ToolAttempt {
    pub(super) error: BoxError,
    pub(super) failure: AttemptFailure,
    pub(super) end: AttemptEnd,
    pub(super) committed: bool,
    pub(super) runner_outcome: Option<Outcome>,
}

impl ToolAttempt {
    /// The handler's error, as it returned it (downcast it to your own type, or to a
    /// runner's `TxError<E>`); for a timeout a [`TimedOut`], for a panic a [`Panicked`].
    pub fn error(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }

    /// The error, owned.
    pub fn into_error(self) -> BoxError {
        self.error
    }

    /// How the attempt was judged: verdict, code, phase. When a runner under
    /// [`ToolContext::policy`] gave up in this attempt, its verdict on its last
    /// transaction attempt.
    pub fn failure(&self) -> AttemptFailure {
        self.failure
    }

    /// The verdict.
    pub fn verdict(&self) -> Verdict {
        self.failure.verdict
    }

    /// The transient kind, if the verdict is transient.
    pub fn kind(&self) -> Option<TransientKind> {
        self.failure.kind()
    }

    /// The code that decided the verdict, if any.
    pub fn code(&self) -> Option<Code> {
        self.failure.code
    }

    /// Where the failing transaction was (body or commit).
    pub fn phase(&self) -> Phase {
        self.failure.phase
    }

    /// Whether the attempt ran out of time (and was cancelled).
    pub fn timed_out(&self) -> bool {
        self.end == AttemptEnd::TimedOut
    }

    /// Whether the handler panicked.
    pub fn panicked(&self) -> bool {
        self.end == AttemptEnd::Panicked
    }

    /// Whether something committed during the attempt (a runner under
    /// [`ToolContext::policy`] succeeded).
    pub fn committed(&self) -> bool {
        self.committed
    }

    /// When a runner under [`ToolContext::policy`] gave up in this attempt: its outcome,
    /// with every transaction attempt's verdict.
    pub fn runner_outcome(&self) -> Option<&Outcome> {
        self.runner_outcome.as_ref()
    }
}
