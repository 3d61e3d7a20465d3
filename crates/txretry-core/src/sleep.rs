//! The wait between async attempts: tokio's timer inside a tokio runtime (so tests can
//! pause time), a timer thread anywhere else, so the loop never panics for want of a
//! runtime (`futures::executor::block_on`, async-std, smol).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Waits for `delay`. Inside a tokio runtime a wait longer than zero needs the runtime's
/// time driver (`enable_time`, which `#[tokio::main]` and `#[tokio::test]` turn on).
pub async fn sleep(delay: Duration) {
    let in_tokio = tokio::runtime::Handle::try_current().is_ok();
    if delay.is_zero() {
        // No timer for no wait (tokio's panics in a runtime without its time driver), but
        // a turn for the runtime's other tasks before the next attempt.
        if in_tokio {
            tokio::task::yield_now().await;
        }
        return;
    }
    if in_tokio {
        tokio::time::sleep(delay).await;
    } else {
        ThreadSleep::new(delay).await;
    }
}

/// A sleep that a short-lived thread ends: there is no timer to register with outside a
/// runtime, and retries are rare enough that a thread per wait costs nothing that matters.
struct ThreadSleep {
    delay: Duration,
    shared: Option<Arc<Mutex<Shared>>>,
}

#[derive(Default)]
struct Shared {
    done: bool,
    waker: Option<Waker>,
}

impl ThreadSleep {
    fn new(delay: Duration) -> Self {
        ThreadSleep {
            delay,
            shared: None,
        }
    }
}

impl Future for ThreadSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.delay.is_zero() {
            return Poll::Ready(());
        }
        let delay = self.delay;
        let shared = self.shared.get_or_insert_with(|| {
            let shared = Arc::new(Mutex::new(Shared::default()));
            let timer = Arc::clone(&shared);
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let mut state = timer.lock().unwrap_or_else(PoisonError::into_inner);
                state.done = true;
                if let Some(waker) = state.waker.take() {
                    waker.wake();
                }
            });
            shared
        });
        let mut state = shared.lock().unwrap_or_else(PoisonError::into_inner);
        if state.done {
            Poll::Ready(())
        } else {
            state.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal executor with no tokio runtime: polls on this thread, parks until woken.
    fn block_on<F: Future>(future: F) -> F::Output {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            std::thread::park();
        }
    }

    #[test]
    fn sleeps_outside_a_tokio_runtime() {
        assert!(tokio::runtime::Handle::try_current().is_err());
        let start = std::time::Instant::now();
        block_on(sleep(Duration::from_millis(20)));
        assert!(start.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn the_retry_loop_runs_outside_a_tokio_runtime() {
        let policy = crate::RetryPolicy::builder()
            .backoff(crate::Backoff::Constant(Duration::from_millis(1)))
            .build()
            .unwrap();
        let mut calls = 0;
        let result: Result<u32, std::io::Error> = block_on(policy.run(async || {
            calls += 1;
            if calls == 1 {
                Err(std::io::Error::other("deadlock detected"))
            } else {
                Ok(7)
            }
        }));
        assert_eq!(result.unwrap(), 7);
        assert_eq!(calls, 2);
    }
}
