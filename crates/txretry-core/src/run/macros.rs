//! The loop macros every runner expands: [`retry_async!`](crate::retry_async) and
//! [`retry_blocking!`](crate::retry_blocking).

/// The async retry loop, written once for every runner.
///
/// `$state` is a `mut` [`RetryState`] variable; `$attempt` an expression (usually an
/// `async { … }` block) evaluated afresh for each attempt, resolving to
/// `Result<T, TxFailure<E>>`. The loop resolves to `Result<T, TxError<E>>`. It is a macro
/// rather than a function taking a closure because rustc cannot yet prove `Send` for a
/// future that calls an async closure wrapping borrowed state (rust-lang/rust#100013);
/// expanded inline with concrete types, it can.
///
/// With `admission = $options`, each attempt first waits for the policy's
/// [`Admission`](crate::Admission) on the keys the options name, and releases them when
/// the attempt ends (before any backoff wait).
#[doc(hidden)]
#[macro_export]
macro_rules! retry_async {
    ($state:ident, $attempt:expr) => {{
        loop {
            let outcome = $attempt.await;
            $crate::__retry_async_step!($state, outcome)
        }
    }};
    ($state:ident, admission = $options:expr, $attempt:expr) => {{
        loop {
            let outcome = match $crate::__private::admission_for($state.policy(), $options) {
                ::core::option::Option::None => $attempt.await,
                ::core::option::Option::Some(admission) => {
                    let _permit = admission.await;
                    let outcome = $attempt.await;
                    // Before the permit goes: the next attempt on these keys in this
                    // process must already see a collision.
                    if let ::core::result::Result::Err(failure) = &outcome {
                        $crate::__private::note_failure(
                            $state.policy(),
                            $options,
                            failure.classification().verdict,
                        );
                    }
                    outcome
                }
            };
            $crate::__retry_async_step!($state, outcome)
        }
    }};
}

/// After one async attempt: return, or wait and go round again. Part of [`retry_async!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __retry_async_step {
    ($state:ident, $outcome:ident) => {
        match $outcome {
            ::core::result::Result::Ok(value) => {
                $state.succeeded();
                break ::core::result::Result::Ok(value);
            }
            ::core::result::Result::Err(failure) => match $state.after_failure(&failure) {
                $crate::Decision::RetryAfter(delay) => $crate::__private::sleep(delay).await,
                $crate::Decision::Stop(reason) => {
                    break ::core::result::Result::Err($state.give_up(failure, reason));
                }
            },
        }
    };
}

/// The blocking twin of [`retry_async!`]: the same state and decisions, waiting with
/// `std::thread::sleep`.
#[doc(hidden)]
#[macro_export]
macro_rules! retry_blocking {
    ($state:ident, $attempt:expr) => {{
        loop {
            match $attempt {
                ::core::result::Result::Ok(value) => {
                    $state.succeeded();
                    break ::core::result::Result::Ok(value);
                }
                ::core::result::Result::Err(failure) => match $state.after_failure(&failure) {
                    $crate::Decision::RetryAfter(delay) => ::std::thread::sleep(delay),
                    $crate::Decision::Stop(reason) => {
                        break ::core::result::Result::Err($state.give_up(failure, reason));
                    }
                },
            }
        }
    }};
}
