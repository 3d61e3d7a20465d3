//! [`PolicyError`]: a setting the builder rejected.

use std::time::Duration;

/// A setting [`RetryPolicyBuilder::build`](crate::RetryPolicyBuilder::build) rejected. The
/// message names the setting.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// `max_attempts` was 0.
    #[error("max_attempts must be at least 1 (got 0)")]
    ZeroAttempts,
    /// The exponential `factor` was below 1, infinite or NaN.
    #[error("backoff factor must be a finite number of at least 1 (got {0})")]
    Factor(f64),
    /// The proportional `jitter` was outside `0..=1` or NaN.
    #[error("jitter must be within 0..=1 (got {0})")]
    Jitter(f64),
    /// `max_delay` was below the first wait.
    #[error("max_delay ({max_delay:?}) must not be below the initial backoff delay ({initial:?})")]
    MaxDelayBelowInitial {
        /// The cap asked for.
        max_delay: Duration,
        /// The first wait of the backoff.
        initial: Duration,
    },
    /// The admission was [`only_for_contended_keys`](crate::Admission::only_for_contended_keys)
    /// without [`in_database`](crate::Admission::in_database): there are no database locks
    /// to take only for contended keys.
    #[error(
        "admission: only_for_contended_keys needs in_database (there are no database locks to limit)"
    )]
    ContendedKeysWithoutDatabase,
}
