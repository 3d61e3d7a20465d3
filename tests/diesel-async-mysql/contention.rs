//! The transfers of `tests/shared/transfers.rs` through diesel-async at the server's
//! default isolation, reading with `SELECT … FOR UPDATE`, each worker on an
//! `AsyncMysqlConnection` of its own: deadlocks (1213, recovered from diesel-async's text
//! and SQLSTATE), each retried; every transfer commits exactly once.

use crate::bank::DieselAsyncBank;
use crate::server::url;
use crate::transfers::{Run, transfers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_default_isolation() {
    let Some(url) = url("diesel_async_mysql::contention") else {
        return;
    };
    let run = Run::mysql_default("diesel-async, mysql default isolation");
    transfers(DieselAsyncBank(url), run).await;
}
