//! The scenarios of `tests/shared/` through SeaORM: the transfers at the server's default
//! isolation (REPEATABLE READ), reading with `SELECT … FOR UPDATE` (deadlocks, 1213, each
//! retried; every transfer commits exactly once), and the deadlock and the lock-wait
//! timeout of `locks.rs`.

use std::marker::PhantomData;

use crate::bank::{OfDialect, SeaOrmBank};
use crate::common::setup;
use crate::transfers::{Dialect, Run, transfers};

struct MySql;

impl OfDialect for MySql {
    const DIALECT: Dialect = Dialect::MySql;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_default_isolation() {
    let Some((_, db)) = setup("sea-orm-mysql contention", 8).await else {
        return;
    };
    let run = Run::mysql_default("sea-orm, mysql default isolation");
    transfers(SeaOrmBank::<MySql>(db, PhantomData), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opposite_order_updates_deadlock_and_the_victim_is_retried() {
    let Some((_, db)) = setup("sea-orm-mysql deadlock", 4).await else {
        return;
    };
    crate::locks::deadlock(SeaOrmBank::<MySql>(db, PhantomData)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_wait_timeout_rolls_back_and_is_retried_once() {
    let Some((_, db)) = setup("sea-orm-mysql lock timeout", 4).await else {
        return;
    };
    crate::locks::lock_timeout(SeaOrmBank::<MySql>(db, PhantomData)).await;
}
