//! The transfers of `tests/shared/transfers.rs` through SeaORM at the server's default
//! isolation (REPEATABLE READ), reading with `SELECT … FOR UPDATE`: deadlocks (1213), each
//! retried; every transfer commits exactly once.

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
