//! What a run notes with its time, for whoever lines it up with something else that
//! happened (the bench's `--fault` timelines): every failed attempt, and each commit of the
//! history workload with the node it landed on.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// A failed attempt, as the application saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// When (unix ms).
    pub at_ms: u64,
    /// The transient kind's name, `ambiguous` or `permanent`.
    pub kind: String,
    /// Whether the policy retried it (else the call failed with it).
    pub retried: bool,
}

/// An acknowledged commit, as the application saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    /// When the runner returned `Ok` (unix ms).
    pub at_ms: u64,
    /// The port of the server the transaction ran on (through a proxy: the node's).
    pub port: i64,
}

/// The failures of a run, shared by its workers and its policy's hook.
#[derive(Debug, Default)]
pub struct EventLog {
    failures: Mutex<Vec<Failure>>,
}

impl EventLog {
    /// Notes a failure of `kind` now.
    pub fn failure(&self, kind: &str, retried: bool) {
        let failure = Failure {
            at_ms: now_ms(),
            kind: kind.to_owned(),
            retried,
        };
        // A poisoned lock means a worker panicked (a bug); keep logging regardless.
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(failure);
    }

    /// Every failure so far.
    pub fn failures(&self) -> Vec<Failure> {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The current time in unix milliseconds.
pub fn now_ms() -> u64 {
    unix_ms(SystemTime::now())
}

/// `at` in unix milliseconds.
pub fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
