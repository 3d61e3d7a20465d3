//! The scenarios of `tests/shared/` through Diesel (blocking), each worker on a
//! `MysqlConnection` of its own: the transfers at the server's default isolation, reading
//! with `SELECT … FOR UPDATE` (deadlocks, 1213, recovered from Diesel's text, each retried;
//! every transfer commits exactly once), and the deadlock and the lock-wait timeout of
//! `locks.rs`.

use std::sync::Arc;

use crate::common::{connect, url};
use crate::transfers::{Dialect, Run, transfers};

crate::bank::diesel_bank!(diesel::MysqlConnection, Dialect::MySql);
crate::bank::diesel_sessions!(diesel::MysqlConnection);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_default_isolation() {
    let Some(url) = url("diesel_mysql::contention") else {
        return;
    };
    let run = Run::mysql_default("diesel, mysql default isolation");
    transfers(DieselBank(Arc::new(move || connect(&url))), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_is_recognised_as_1213_and_retried() {
    let Some(url) = url("diesel_mysql::deadlock") else {
        return;
    };
    crate::locks::deadlock(DieselBank(Arc::new(move || connect(&url)))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_timeout_is_rolled_back_and_retried() {
    let Some(url) = url("diesel_mysql::lock_timeout") else {
        return;
    };
    crate::locks::lock_timeout(DieselBank(Arc::new(move || connect(&url)))).await;
}
