//! Running one attempt: in place (async) or on tokio's blocking pool, with the per-attempt
//! timeout, a panic caught, and the attempt marked cancelled when it is cut short.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use super::{Panicked, TimedOut};
use crate::tool::{Attempt, AttemptError, AttemptResult};

/// How an attempt ended: the handler returned (`Ok` or `Err`), ran out of time, or panicked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AttemptEnd {
    Returned,
    TimedOut,
    Panicked,
}

/// Runs one attempt: polls an async one in place (catching a panic), or hands a blocking
/// one to tokio's blocking pool; enforces the per-attempt timeout. Returns only once the
/// attempt is over: an async attempt's future is dropped, a blocking attempt's thread has
/// returned.
pub(super) async fn run_attempt(
    attempt: Attempt,
    timeout: Option<Duration>,
    cancelled: &AtomicBool,
) -> (AttemptEnd, AttemptResult) {
    // Marks the attempt cancelled when the invocation is dropped mid-attempt.
    let guard = CancelOnDrop(Some(cancelled));
    let ended = match attempt {
        Attempt::Async(future) => {
            let attempt = CatchUnwind(future);
            match timeout {
                None => attempt.await,
                Some(limit) => {
                    // `attempt` is moved into the timeout, which is dropped at the end of
                    // this statement: a timed-out attempt is gone before anything else.
                    let result = tokio::time::timeout(limit, attempt).await;
                    match result {
                        Ok(ended) => ended,
                        Err(_) => {
                            cancelled.store(true, Ordering::Release);
                            timed_out(limit)
                        }
                    }
                }
            }
        }
        Attempt::Blocking(job) => {
            let mut handle = tokio::task::spawn_blocking(job);
            let joined = match timeout {
                None => (&mut handle).await,
                Some(limit) => match tokio::time::timeout(limit, &mut handle).await {
                    Ok(joined) => joined,
                    Err(_) => {
                        cancelled.store(true, Ordering::Release);
                        // The thread cannot be stopped: wait for it, so that two attempts
                        // never run at once. Its result no longer counts.
                        drop(handle.await);
                        guard.disarm();
                        return timed_out(limit);
                    }
                },
            };
            match joined {
                Ok(result) => (AttemptEnd::Returned, result),
                Err(error) if error.is_panic() => panicked(&*error.into_panic()),
                Err(error) => (
                    AttemptEnd::Returned,
                    Err(AttemptError::Handler(Box::new(error))),
                ),
            }
        }
    };
    guard.disarm();
    ended
}

struct CancelOnDrop<'a>(Option<&'a AtomicBool>);

impl CancelOnDrop<'_> {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(flag) = self.0 {
            flag.store(true, Ordering::Release);
        }
    }
}

/// Polls the handler's future, turning a panic into an [`AttemptEnd::Panicked`] attempt. The future is
/// never polled again after it panicked.
struct CatchUnwind(Pin<Box<dyn Future<Output = AttemptResult> + Send>>);

impl Future for CatchUnwind {
    type Output = (AttemptEnd, AttemptResult);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(result)) => Poll::Ready((AttemptEnd::Returned, result)),
            Err(payload) => Poll::Ready(panicked(&*payload)),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

/// An attempt that ran out of time after `limit`: its error is a [`TimedOut`].
fn timed_out(limit: Duration) -> (AttemptEnd, AttemptResult) {
    let error = AttemptError::Handler(Box::new(TimedOut::new(limit)));
    (AttemptEnd::TimedOut, Err(error))
}

/// An attempt whose handler panicked: its error is a [`Panicked`] with the panic's message.
fn panicked(payload: &(dyn std::any::Any + Send)) -> (AttemptEnd, AttemptResult) {
    let error = AttemptError::Handler(Box::new(Panicked::new(panic_message(payload))));
    (AttemptEnd::Panicked, Err(error))
}
