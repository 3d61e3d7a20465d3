//! The transfers of `tests/shared/transfers.rs` at the server's default isolation
//! (REPEATABLE READ), reading with `SELECT … FOR UPDATE`: deadlocks (1213), each retried;
//! every transfer commits exactly once.

use txretry::{TransientKind, TxOptions};

use crate::common::setup;
use crate::transfers::{Dialect, Run, transfers};

crate::bank::sqlx_bank!(sqlx::MySqlPool, Dialect::MySql);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_default_isolation() {
    let Some((_, pool)) = setup("sqlx-mysql contention", 8).await else {
        return;
    };
    let run = Run {
        name: "sqlx, mysql default isolation",
        options: TxOptions::new(),
        reader: TxOptions::new().read_only(true),
        prelude: None,
        retried: &[TransientKind::Deadlock],
    };
    transfers(SqlxBank(pool), run).await;
}
