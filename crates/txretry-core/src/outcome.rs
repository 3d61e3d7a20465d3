//! What a runner returns when it gives up: the caller's own error, and how the attempts went.

use std::error::Error;
use std::fmt;

use crate::{Code, StopReason, TransientKind, Verdict};

/// Where in a transaction attempt the failure happened.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Before COMMIT was sent: acquiring the connection, BEGIN, the closure, a statement.
    /// Nothing of the attempt was committed — unless the verdict is
    /// [`Verdict::Ambiguous`]: a tool call's attempt that timed out (txretry-tool) is judged
    /// in this phase whatever its handler was doing, a COMMIT included, so its work may
    /// have landed.
    Body,
    /// While committing. Whether the transaction committed is known only when the server
    /// answered with a verdict that says "not committed" (a deadlock, a serialization
    /// failure, `SQLITE_BUSY`, a constraint checked at commit); anything else there is
    /// [`Verdict::Ambiguous`].
    Commit,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Body => "body",
            Phase::Commit => "commit",
        })
    }
}

/// One failed attempt, as the runner judged it.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttemptFailure {
    /// What the failure meant.
    pub verdict: Verdict,
    /// The code that decided it, if any.
    pub code: Option<Code>,
    /// Where it happened.
    pub phase: Phase,
}

impl AttemptFailure {
    /// A failure with this verdict, code and phase.
    pub const fn new(verdict: Verdict, code: Option<Code>, phase: Phase) -> Self {
        AttemptFailure {
            verdict,
            code,
            phase,
        }
    }

    /// The transient kind, if the failure was transient.
    pub fn kind(&self) -> Option<TransientKind> {
        self.verdict.kind()
    }
}

/// A failed attempt with its error's text, as a [`GiveUpEvent`](crate::GiveUpEvent) lists it
/// and a [`RetryBudget`](crate::RetryBudget) records it.
///
/// The error itself is the caller's type: a loop returns the last attempt's and drops the
/// others when it retries, so what is kept of each is its text (its `Display`, its first
/// 4 KiB: a loop keeps one per attempt).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RecordedAttempt {
    /// How the attempt was judged: verdict, code, phase.
    pub failure: AttemptFailure,
    /// The attempt's error, as its `Display` shows it: at most 4096 bytes, then `…`.
    pub error: String,
}

impl RecordedAttempt {
    /// An attempt judged `failure` that failed with an error reading `error`.
    pub fn new(failure: AttemptFailure, error: impl Into<String>) -> Self {
        RecordedAttempt {
            failure,
            error: error.into(),
        }
    }
}

/// How a call that failed went: every attempt's verdict and phase, and why the loop stopped.
/// The last entry of [`history`](Outcome::history) is the failure whose error was returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    history: Vec<AttemptFailure>,
    stop: StopReason,
}

impl Outcome {
    pub(crate) fn new(history: Vec<AttemptFailure>, stop: StopReason) -> Self {
        debug_assert!(
            !history.is_empty(),
            "an outcome records at least one failure"
        );
        Outcome { history, stop }
    }

    fn last(&self) -> AttemptFailure {
        // `new` is only ever called with the failure being returned pushed last.
        self.history.last().copied().unwrap_or(AttemptFailure {
            verdict: Verdict::Permanent,
            code: None,
            phase: Phase::Body,
        })
    }

    /// The verdict on the last attempt: [`Verdict::Permanent`] for a real outcome (the
    /// closure's own error, a constraint), [`Verdict::Transient`] when retries ran out or
    /// the kind is not retried, [`Verdict::Ambiguous`] when the last COMMIT may have landed.
    pub fn verdict(&self) -> Verdict {
        self.last().verdict
    }

    /// The code that decided the last verdict, if any.
    pub fn code(&self) -> Option<Code> {
        self.last().code
    }

    /// Where the last attempt failed.
    pub fn phase(&self) -> Phase {
        self.last().phase
    }

    /// Attempts made, the first included.
    pub fn attempts(&self) -> u32 {
        u32::try_from(self.history.len()).unwrap_or(u32::MAX)
    }

    /// Every attempt's failure, first to last.
    pub fn history(&self) -> &[AttemptFailure] {
        &self.history
    }

    /// Why the loop stopped.
    pub fn stop_reason(&self) -> StopReason {
        self.stop
    }

    /// Whether a COMMIT of the call may have landed: an attempt's verdict is ambiguous, the
    /// last one's or an earlier one's (an idempotent call retries an ambiguous COMMIT, and
    /// that retry may then fail another way, before its own COMMIT). Check before doing
    /// the work again by other means: the first effect may be in the database.
    pub fn may_have_committed(&self) -> bool {
        self.history.iter().any(|a| a.verdict == Verdict::Ambiguous)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.last();
        write!(f, "{} at {}", last.verdict, last.phase)?;
        if let Some(code) = last.code {
            write!(f, " ({code})")?;
        }
        let attempts = self.attempts();
        write!(
            f,
            " after {attempts} attempt{}",
            if attempts == 1 { "" } else { "s" }
        )
    }
}

/// The error a transaction runner returns: the caller's own error `E`, unchanged, with the
/// [`Outcome`] of the call.
///
/// It is transparent: its `Display` and `source()` are those of `E`, so logging it or
/// returning it with `?` into `anyhow::Error` or `Box<dyn Error>` shows exactly what `E`
/// shows. Take `E` back with [`into_error`](TxError::into_error) (for example
/// `.map_err(TxError::into_error)?` in a function that returns `sqlx::Error`), or match on
/// it through [`error`](TxError::error).
///
/// Because it already carries its verdict ([`outcome`](TxError::outcome)), classifying a
/// `TxError` again is neither needed nor reliable; read the outcome instead.
///
/// ```
/// use txretry_core::{Phase, RetryPolicy, TxError, Verdict};
///
/// fn report(err: &TxError<std::io::Error>) -> String {
///     let outcome = err.outcome();
///     if outcome.may_have_committed() {
///         return format!("unknown: {err} (check before doing it again)");
///     }
///     match (outcome.verdict(), outcome.phase()) {
///         (Verdict::Permanent, _) => format!("refused: {err}"),
///         (_, Phase::Commit) => format!("not committed: {err}"),
///         _ => format!("gave up after {} attempts: {err}", outcome.attempts()),
///     }
/// }
/// # let _ = report;
/// ```
pub struct TxError<E> {
    error: E,
    outcome: Outcome,
    as_error: fn(&E) -> &(dyn Error + 'static),
}

impl<E> TxError<E> {
    pub(crate) fn new(
        error: E,
        outcome: Outcome,
        as_error: fn(&E) -> &(dyn Error + 'static),
    ) -> Self {
        TxError {
            error,
            outcome,
            as_error,
        }
    }

    /// How the call went: verdict, phase, attempts.
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// The caller's error, as the last attempt returned it.
    pub fn error(&self) -> &E {
        &self.error
    }

    /// The caller's error, unchanged.
    pub fn into_error(self) -> E {
        self.error
    }

    /// The caller's error and the outcome.
    pub fn into_parts(self) -> (E, Outcome) {
        (self.error, self.outcome)
    }
}

impl<E: fmt::Debug> fmt::Debug for TxError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxError")
            .field("error", &self.error)
            .field("outcome", &self.outcome)
            .finish()
    }
}

impl<E: fmt::Display> fmt::Display for TxError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<E: fmt::Debug + fmt::Display> Error for TxError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        (self.as_error)(&self.error).source()
    }
}
