//! The transfers of `tests/shared/transfers.rs` at the server's default isolation
//! (REPEATABLE READ), reading with `SELECT … FOR UPDATE`: deadlocks (1213), each retried;
//! every transfer commits exactly once.

use crate::common::setup;
use crate::transfers::{Dialect, Run, transfers};

crate::bank::sqlx_bank!(sqlx::MySqlPool, Dialect::MySql);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_default_isolation() {
    let Some((_, pool)) = setup("sqlx-mysql contention", 8).await else {
        return;
    };
    let run = Run::mysql_default("sqlx, mysql default isolation");
    transfers(SqlxBank(pool), run).await;
}
