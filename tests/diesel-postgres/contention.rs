//! The scenarios of `tests/shared/` through Diesel (blocking), each worker on a
//! `PgConnection` of its own: the transfers under SERIALIZABLE (serialization failures and
//! deadlocks, each retried; every transfer commits exactly once), and the deadlock and the
//! lock timeout of `locks.rs`.

use std::sync::Arc;

use crate::common::{connect, url};
use crate::transfers::{Dialect, Run, transfers};

crate::bank::diesel_bank!(diesel::PgConnection, Dialect::Postgres);
crate::bank::diesel_sessions!(diesel::PgConnection);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some(url) = url("diesel_postgres::contention") else {
        return;
    };
    let run = Run::postgres_serializable("diesel, postgres SERIALIZABLE");
    transfers(DieselBank(Arc::new(move || connect(&url))), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_is_retried_and_each_update_lands_once() {
    let Some(url) = url("diesel_postgres::deadlock") else {
        return;
    };
    crate::locks::deadlock(DieselBank(Arc::new(move || connect(&url)))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_timeout_is_retried_after_the_holder_commits() {
    let Some(url) = url("diesel_postgres::lock_timeout") else {
        return;
    };
    crate::locks::lock_timeout(DieselBank(Arc::new(move || connect(&url)))).await;
}
