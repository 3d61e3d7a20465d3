//! Shared setup: the shop (three tools on an SQLite file in a temp directory), a writer that
//! holds SQLite's write lock so that the tools' transactions fail for real, the database's
//! state read back, a client that records the notifications it receives, and the server
//! served to it over an in-memory pipe or streamable HTTP.
//!
//! - `shop.rs`: the shop's tools and database, the lock holder, the state read back;
//! - `client.rs`: the recording client and the calls made through it;
//! - `serve.rs`: the server over an in-memory pipe or streamable HTTP;
//! - `cancels.rs`: concurrent `cancel_order` calls and the checks on their outcome.

mod cancels;
mod client;
mod serve;
mod shop;

use std::time::Duration;

use txretry_core::{Backoff, Jitter, RetryPolicy};

pub use cancels::{assert_each_cancelled_once, assert_retried, cancel_concurrently};
pub use client::{
    Client, INVALID_PARAMS, Recorder, args, assert_refused_alike, call, protocol_error, text,
    tool_names,
};
pub use serve::{HttpServer, connect};
pub use shop::{Shop, TOTAL_CENTS};

/// A guard against hangs (not a timing assertion).
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("hung: {what}"))
}

/// The toolbox's policy: up to `max_attempts` per call (shared by every loop in it),
/// exponential backoff from 2 ms, at most 50 ms, full jitter.
pub fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(max_attempts)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(2),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(50))
        .jitter(Jitter::Full)
        .build()
        .unwrap()
}
