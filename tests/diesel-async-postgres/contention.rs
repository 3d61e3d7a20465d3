//! The scenarios of `tests/shared/` through diesel-async, each worker on an
//! `AsyncPgConnection` of its own: the transfers under SERIALIZABLE (serialization failures
//! and deadlocks, each retried; every transfer commits exactly once), and the deadlock and
//! the lock timeout of `locks.rs`.

use crate::bank::DieselAsyncBank;
use crate::server::url;
use crate::transfers::{Run, transfers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some(url) = url("diesel_async_postgres::contention") else {
        return;
    };
    let run = Run::postgres_serializable("diesel-async, postgres SERIALIZABLE");
    transfers(DieselAsyncBank(url), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_is_retried_and_each_update_lands_once() {
    let Some(url) = url("diesel_async_postgres::deadlock") else {
        return;
    };
    crate::locks::deadlock(DieselAsyncBank(url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_timeout_is_retried_after_the_holder_commits() {
    let Some(url) = url("diesel_async_postgres::lock_timeout") else {
        return;
    };
    crate::locks::lock_timeout(DieselAsyncBank(url)).await;
}
