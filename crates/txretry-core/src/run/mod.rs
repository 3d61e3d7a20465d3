//! The retry loops. Both drive the same [`RetryState`], which asks the one pure
//! [`RetryPolicy::decide`]; the async and the blocking loop differ only in how they wait.
//!
//! `RetryState`, [`TxFailure`] and the loop macros are the adapter crates' machinery: they
//! are public so the adapters can use them, and hidden from the documentation. A file each:
//! `state.rs`, `failure.rs`, `macros.rs`; here, [`RetryPolicy::run`] and its blocking
//! twin, the loops for closures that are not database transactions.

mod failure;
mod macros;
mod state;

pub use failure::TxFailure;
pub use state::RetryState;

use crate::classifier::no_driver;
use crate::{AsError, RetryPolicy, TxError, TxOptions};

impl RetryPolicy {
    /// Runs `op` until it succeeds, fails with an error this policy does not retry, or the
    /// attempts or time run out; returns the last error unchanged.
    ///
    /// `op` is an async closure, called afresh for every attempt. Its errors are classified
    /// with the policy's classifier (no COMMIT phase: use a driver's runner for
    /// transactions). The waits use `tokio::time` inside a tokio runtime (so tests can
    /// pause time; the runtime needs its time driver, `enable_time`, for a wait longer than
    /// zero) and a timer thread outside one.
    ///
    /// ```
    /// use txretry_core::RetryPolicy;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let policy = RetryPolicy::default();
    /// let mut calls = 0;
    /// let result: Result<u32, std::io::Error> = policy
    ///     .run(async || {
    ///         calls += 1;
    ///         if calls == 1 {
    ///             Err(std::io::Error::other("Deadlock found when trying to get lock"))
    ///         } else {
    ///             Ok(42)
    ///         }
    ///     })
    ///     .await;
    /// assert_eq!(result.unwrap(), 42);
    /// assert_eq!(calls, 2);
    /// # }
    /// ```
    pub async fn run<T, E, Via, F>(&self, mut op: F) -> Result<T, E>
    where
        F: AsyncFnMut() -> Result<T, E>,
        E: AsError<Via>,
    {
        let mut state = RetryState::new(self, &TxOptions::DEFAULT);
        let result = crate::retry_async!(state, async {
            op().await
                .map_err(|e| TxFailure::in_body(self, no_driver, e))
        });
        result.map_err(TxError::into_error)
    }

    /// The blocking twin of [`run`](RetryPolicy::run): same decisions, waits with
    /// `std::thread::sleep`.
    ///
    /// ```
    /// use txretry_core::RetryPolicy;
    ///
    /// let mut calls = 0;
    /// let result: Result<(), std::io::Error> = RetryPolicy::disabled().run_blocking(|| {
    ///     calls += 1;
    ///     Err(std::io::Error::other("deadlock detected"))
    /// });
    /// assert!(result.is_err());
    /// assert_eq!(calls, 1);
    /// ```
    pub fn run_blocking<T, E, Via, F>(&self, mut op: F) -> Result<T, E>
    where
        F: FnMut() -> Result<T, E>,
        E: AsError<Via>,
    {
        let mut state = RetryState::new(self, &TxOptions::DEFAULT);
        let result = crate::retry_blocking!(
            state,
            op().map_err(|e| TxFailure::in_body(self, no_driver, e))
        );
        result.map_err(TxError::into_error)
    }
}
