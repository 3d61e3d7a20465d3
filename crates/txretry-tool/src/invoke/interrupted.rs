//! The errors recorded for attempts that did not return: one that ran out of time, one whose
//! handler panicked.

use std::time::Duration;

/// The error recorded for an attempt that ran out of time.
#[derive(Debug, thiserror::Error)]
#[error("the attempt did not finish within {0:?}")]
pub struct TimedOut(Duration);

impl TimedOut {
    pub(super) fn new(limit: Duration) -> Self {
        TimedOut(limit)
    }

    /// The per-attempt limit that was reached.
    pub fn limit(&self) -> Duration {
        self.0
    }
}

/// The error recorded for an attempt whose handler panicked, with the panic's message.
#[derive(Debug, thiserror::Error)]
#[error("the tool's handler panicked: {0}")]
pub struct Panicked(String);

impl Panicked {
    pub(super) fn new(message: String) -> Self {
        Panicked(message)
    }

    /// The panic's message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

/// What [`ToolFailure::last_error`](super::ToolFailure::last_error) returns for a failure
/// without attempts (which the invocation loop never makes).
pub(super) static NO_ERROR: Panicked = Panicked(String::new());
