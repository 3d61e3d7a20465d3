//! The transfers of `tests/shared/transfers.rs` under SERIALIZABLE: serialization failures
//! and deadlocks, each retried; every transfer commits exactly once.

use crate::common::setup;
use crate::transfers::{Dialect, Run, transfers};

crate::bank::sqlx_bank!(sqlx::PgPool, Dialect::Postgres);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some((_, pool)) = setup("sqlx-postgres contention", 8).await else {
        return;
    };
    let run = Run::postgres_serializable("sqlx, postgres SERIALIZABLE");
    transfers(SqlxBank(pool), run).await;
}
