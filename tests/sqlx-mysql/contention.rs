//! The scenarios of `tests/shared/`, through sqlx: the transfers at the server's default
//! isolation (REPEATABLE READ), reading with `SELECT … FOR UPDATE` (deadlocks, 1213, each
//! retried; every transfer commits exactly once), and the deadlock and the lock-wait
//! timeout of `locks.rs`.

use crate::common::setup;
use crate::transfers::{Dialect, Run, transfers};

crate::bank::sqlx_bank!(sqlx::MySqlPool, Dialect::MySql);
crate::bank::sqlx_sessions!(sqlx::MySql);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_default_isolation() {
    let Some((_, pool)) = setup("sqlx-mysql contention", 8).await else {
        return;
    };
    let run = Run::mysql_default("sqlx, mysql default isolation");
    transfers(SqlxBank(pool), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_victim_is_retried() {
    let Some((_, pool)) = setup("sqlx-mysql deadlock", 4).await else {
        return;
    };
    crate::locks::deadlock(SqlxBank(pool)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_wait_timeout_is_rolled_back_and_retried() {
    let Some((_, pool)) = setup("sqlx-mysql lock_wait_timeout", 4).await else {
        return;
    };
    crate::locks::lock_timeout(SqlxBank(pool)).await;
}
