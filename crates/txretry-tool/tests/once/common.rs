//! What every scenario shares: arguments and output of the test tools, counters, a gate
//! that holds the first run inside its transaction, fast policies.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use txretry_core::{Backoff, RetryPolicy};
use txretry_tool::{Caller, InvokeError};

/// The arguments of the test tools.
#[derive(Clone, Copy, Debug, Deserialize, schemars::JsonSchema)]
pub struct Args {
    /// Which item; a negative one is refused (a business error).
    pub item: i64,
}

/// What the `place` tool answers: the item, and how many effect rows existed right after
/// its own insert (a second run would say 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    pub item: i64,
    pub effects: i64,
    pub note: String,
}

/// `attempts` attempts, 1 ms constant backoff.
pub fn fast(attempts: u32) -> RetryPolicy {
    fast_builder(attempts).build().unwrap()
}

/// [`fast`], counting its retries in `retries`.
pub fn fast_counting(attempts: u32, retries: &Counter) -> RetryPolicy {
    let retries = retries.clone();
    fast_builder(attempts)
        .on_retry(move |_| {
            retries.bump();
        })
        .build()
        .unwrap()
}

fn fast_builder(attempts: u32) -> txretry_core::RetryPolicyBuilder {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
}

/// A counter shared with handlers.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicU32>);

impl Counter {
    pub fn bump(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Holds every run of the work inside its transaction until opened.
#[derive(Clone)]
pub struct Gate(Arc<tokio::sync::Semaphore>);

impl Gate {
    pub fn closed() -> Gate {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }

    pub fn open() -> Gate {
        let gate = Gate::closed();
        gate.release();
        gate
    }

    pub async fn pass(&self) {
        self.0.acquire().await.unwrap().forget();
    }

    pub fn release(&self) {
        self.0.add_permits(10_000);
    }
}

pub fn anyone() -> Caller {
    Caller::new(["user"])
}

/// A call's answer as text, for comparing answers: the output's JSON, or the failure's
/// kind, text and attempts.
pub fn answer(result: &Result<serde_json::Value, InvokeError>) -> String {
    match result {
        Ok(output) => format!("ok {output}"),
        Err(InvokeError::Failed(failure)) => format!(
            "failed {} {:?} after {} attempt(s), committed {}",
            failure.kind(),
            failure.to_string(),
            failure.attempts().len(),
            failure.committed()
        ),
        Err(other) => format!("other {other}"),
    }
}

pub use txretry_testkit::unique_name;
pub use txretry_testkit::wait::{poll_until, within};
