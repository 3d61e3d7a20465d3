//! The transfers of `tests/shared/transfers.rs` through SeaORM under SERIALIZABLE:
//! serialization failures and deadlocks, each retried; every transfer commits exactly once.

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
