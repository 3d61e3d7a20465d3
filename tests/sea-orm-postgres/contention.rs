//! The scenarios of `tests/shared/` through SeaORM: the transfers under SERIALIZABLE
//! (serialization failures and deadlocks, each retried; every transfer commits exactly
//! once), and the deadlock and the lock timeout of `locks.rs`.

use std::marker::PhantomData;

use crate::bank::{OfDialect, SeaOrmBank};
use crate::common::setup;
use crate::transfers::{Dialect, Run, transfers};

struct Postgres;

impl OfDialect for Postgres {
    const DIALECT: Dialect = Dialect::Postgres;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some((_, db)) = setup("sea-orm-postgres contention", 8).await else {
        return;
    };
    let run = Run::postgres_serializable("sea-orm, postgres SERIALIZABLE");
    transfers(SeaOrmBank::<Postgres>(db, PhantomData), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opposite_order_updates_deadlock_and_the_victim_is_retried() {
    let Some((_, db)) = setup("sea-orm-postgres deadlock", 4).await else {
        return;
    };
    crate::locks::deadlock(SeaOrmBank::<Postgres>(db, PhantomData)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_timeout_is_retried() {
    let Some((_, db)) = setup("sea-orm-postgres lock timeout", 4).await else {
        return;
    };
    crate::locks::lock_timeout(SeaOrmBank::<Postgres>(db, PhantomData)).await;
}
