//! The scenarios of `tests/shared/`, through sqlx: the transfers under SERIALIZABLE
//! (serialization failures and deadlocks, each retried; every transfer commits exactly
//! once), and the deadlock and the lock timeout of `locks.rs`.

use crate::common::setup;
use crate::transfers::{Dialect, Run, transfers};

crate::bank::sqlx_bank!(sqlx::PgPool, Dialect::Postgres);
crate::bank::sqlx_sessions!(sqlx::Postgres);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some((_, pool)) = setup("sqlx-postgres contention", 8).await else {
        return;
    };
    let run = Run::postgres_serializable("sqlx, postgres SERIALIZABLE");
    transfers(SqlxBank(pool), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_victim_is_retried() {
    let Some((_, pool)) = setup("sqlx-postgres deadlock", 4).await else {
        return;
    };
    crate::locks::deadlock(SqlxBank(pool)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_timeout_is_retried() {
    let Some((_, pool)) = setup("sqlx-postgres lock_timeout", 4).await else {
        return;
    };
    crate::locks::lock_timeout(SqlxBank(pool)).await;
}
