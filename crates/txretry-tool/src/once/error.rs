//! Why `ToolContext::once` (any driver's) did not return the tool's output.

use txretry_core::{Outcome, TxError};

#[cfg(doc)]
use crate::ToolContext;
use crate::{BoxError, BusinessError, OnceRefused};

/// Why [`ToolContext::once`] (or another driver's `once_*`) did not return the tool's
/// output.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum OnceError<E> {
    /// The call's outcome is this business error: the closure returned an error the policy
    /// judged permanent, its work was rolled back and the error recorded; or an earlier
    /// call with the same key recorded it. The same value either way. Return it from the
    /// handler (`?`): the call fails with [`FailureKind::Business`](crate::FailureKind).
    #[error("{0}")]
    Business(BusinessError),
    /// The transaction did not commit (or may not have): transient failures outlasted the
    /// budget, a COMMIT stayed ambiguous, or a statement failed permanently outside the
    /// closure's work. Nothing was recorded; a later call with the same key runs the work.
    /// The runner's error, with its outcome.
    #[error(transparent)]
    Failed(TxError<E>),
    /// The call broke the rules of `once` (see [`OnceRefused`]); nothing ran.
    #[error("{0}")]
    Refused(OnceRefused),
    /// The records' table was missing and could not be created: the driver's error
    /// (`sqlx::Error`, `tokio_postgres::Error`, `mysql_async::Error`,
    /// `rusqlite::Error`), boxed.
    #[error("the table of recorded tool calls could not be created")]
    Table(#[source] BoxError),
}

impl<E> OnceError<E> {
    /// The business error, if that is the outcome.
    pub fn business(&self) -> Option<&BusinessError> {
        match self {
            OnceError::Business(business) => Some(business),
            _ => None,
        }
    }

    /// The runner's outcome, when the transaction failed.
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            OnceError::Failed(error) => Some(error.outcome()),
            _ => None,
        }
    }
}
