//! [`TxFailure`]: one failed attempt, judged by its phase.

use std::error::Error;

use crate::classifier::broken_connection;
use crate::{
    AsError, AttemptFailure, Classification, CodeExtractor, Phase, RetryPolicy, StopReason,
    TxOptions, Verdict,
};

/// `read_only_sql_transaction`.
const READ_ONLY_TRANSACTION: crate::SqlState = crate::SqlState::from_static("25006");

/// Whether a failure with `code` is the caller's own write in a transaction it asked to be
/// read-only (`read_only`): not a standby, so permanent. The one rule behind
/// [`TxFailure::under`] and the loop's check for runners that do not call it.
pub(super) fn own_read_only_write(read_only: bool, code: Option<crate::Code>) -> bool {
    read_only && code == Some(crate::Code::SqlState(READ_ONLY_TRANSACTION))
}

/// One failed attempt of a transaction runner: the caller's error, how it was judged, and
/// whether the connection it ran on can still be used. Built by adapter runners with
/// [`TxFailure::in_body`] and [`TxFailure::at_commit`].
#[doc(hidden)]
#[derive(Debug)]
pub struct TxFailure<E> {
    pub(super) error: E,
    pub(super) failure: AttemptFailure,
    pub(super) broken: bool,
    pub(super) stop: Option<StopReason>,
}

impl<E> TxFailure<E> {
    /// A failure before COMMIT was sent (BEGIN, the caller's closure, a statement):
    /// classified as it is. `driver` is the adapter's own code extractor: it is consulted
    /// first, so the runner knows its driver's codes even where no registry reached it.
    pub fn in_body<Via>(policy: &RetryPolicy, driver: CodeExtractor, error: E) -> Self
    where
        E: AsError<Via>,
    {
        Self::judged(policy, driver, error, Phase::Body)
    }

    /// A failure while committing. Only the server's own "not committed" answers keep
    /// their verdict: a transient kind other than `Connection`, or a permanent code the
    /// server sent (a constraint checked at COMMIT). Everything else — no code, a
    /// driver-detected failure, a connection-class code (a pooler sends `08P01` after a
    /// COMMIT that landed) — is [`Verdict::Ambiguous`]: the commit may have happened.
    pub fn at_commit<Via>(policy: &RetryPolicy, driver: CodeExtractor, error: E) -> Self
    where
        E: AsError<Via>,
    {
        let mut failure = Self::judged(policy, driver, error, Phase::Commit);
        let answer = failure.failure;
        let server_said_not_committed = answer.code.is_some_and(crate::Code::is_from_server)
            && match answer.verdict {
                Verdict::Transient(kind) => !kind.loses_session(),
                Verdict::Permanent => !failure.broken,
                _ => false,
            };
        if !server_said_not_committed {
            failure.failure.verdict = Verdict::Ambiguous;
        }
        failure
    }

    /// A failure already judged elsewhere (an outer layer reusing the verdict a runner gave
    /// up with, read from the [`RetryBudget`]); the connection is not this layer's to discard.
    pub fn judged_as(error: E, failure: AttemptFailure) -> Self {
        TxFailure {
            error,
            failure,
            broken: false,
            stop: None,
        }
    }

    fn judged<Via>(policy: &RetryPolicy, driver: CodeExtractor, error: E, phase: Phase) -> Self
    where
        E: AsError<Via>,
    {
        let err: &(dyn Error + 'static) = error.as_error();
        let Classification { verdict, code } = policy.classifier().classify_with(err, driver);
        let broken = broken_connection(err, driver);
        TxFailure {
            error,
            failure: AttemptFailure {
                verdict,
                code,
                phase,
            },
            broken,
            stop: None,
        }
    }

    /// Applies what the transaction's options say about the failure: a `25006`
    /// (`read_only_sql_transaction`) in a transaction the caller asked to be read-only is
    /// the caller's own write, not a standby: permanent, and the connection is fine.
    #[must_use]
    pub fn under(mut self, options: &TxOptions) -> Self {
        if own_read_only_write(options.is_read_only(), self.failure.code) {
            self.failure.verdict = Verdict::Permanent;
            self.broken = false;
        }
        self
    }

    /// Ends the loop with this failure whatever its verdict: for a runner that cannot make
    /// another attempt (its one connection is gone and it cannot get another).
    #[must_use]
    pub fn ends_retrying(self) -> Self {
        self.stops(StopReason::ConnectionUnusable)
    }

    /// Ends the loop with this failure, for `reason`, whatever its verdict.
    #[must_use]
    pub fn stops(mut self, reason: StopReason) -> Self {
        self.stop = Some(reason);
        self
    }

    /// Marks the failure ambiguous: the attempt may have taken effect (it timed out while
    /// running). Retried only for idempotent operations.
    #[must_use]
    pub fn into_ambiguous(mut self) -> Self {
        self.failure.verdict = Verdict::Ambiguous;
        self
    }

    /// How the failure was judged.
    pub fn classification(&self) -> Classification {
        Classification::new(self.failure.verdict, self.failure.code)
    }

    /// Where the attempt failed.
    pub fn phase(&self) -> Phase {
        self.failure.phase
    }

    /// Whether the runner must discard the connection instead of returning it to its pool.
    /// Judged from the driver's error alone with the default table (a connection-class
    /// code, or a failure the driver detected itself), never from the user's classifier:
    /// narrowing what is retried must not put a broken connection back in the pool.
    pub fn discards_connection(&self) -> bool {
        self.broken
    }

    /// The caller's error.
    pub fn into_error(self) -> E {
        self.error
    }
}
