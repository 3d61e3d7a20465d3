//! The scenarios of `tests/shared/` through diesel-async, each worker on an
//! `AsyncMysqlConnection` of its own: the transfers at the server's default isolation,
//! reading with `SELECT … FOR UPDATE` (deadlocks, 1213, recovered from diesel-async's text
//! and SQLSTATE, each retried; every transfer commits exactly once), and the deadlock and
//! the lock-wait timeout of `locks.rs`.

use crate::bank::DieselAsyncBank;
use crate::server::url;
use crate::transfers::{Run, transfers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_default_isolation() {
    let Some(url) = url("diesel_async_mysql::contention") else {
        return;
    };
    let run = Run::mysql_default("diesel-async, mysql default isolation");
    transfers(DieselAsyncBank(url), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_is_recognised_as_1213_and_retried() {
    let Some(url) = url("diesel_async_mysql::deadlock") else {
        return;
    };
    crate::locks::deadlock(DieselAsyncBank(url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_timeout_is_rolled_back_and_retried() {
    let Some(url) = url("diesel_async_mysql::lock_timeout") else {
        return;
    };
    crate::locks::lock_timeout(DieselAsyncBank(url)).await;
}
