//! The transfers of `tests/shared/transfers.rs` through Diesel (blocking) at the server's
//! default isolation, reading with `SELECT … FOR UPDATE`, each worker on a
//! `MysqlConnection` of its own: deadlocks (1213, recovered from Diesel's text), each
//! retried; every transfer commits exactly once.

use std::sync::Arc;

use crate::common::{connect, url};
use crate::transfers::{Dialect, Run, transfers};

crate::bank::diesel_bank!(diesel::MysqlConnection, Dialect::MySql);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_default_isolation() {
    let Some(url) = url("diesel_mysql::contention") else {
        return;
    };
    let run = Run::mysql_default("diesel, mysql default isolation");
    transfers(DieselBank(Arc::new(move || connect(&url))), run).await;
}
