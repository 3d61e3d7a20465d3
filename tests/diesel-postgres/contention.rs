//! The transfers of `tests/shared/transfers.rs` through Diesel (blocking) under
//! SERIALIZABLE, each worker on a `PgConnection` of its own: serialization failures and
//! deadlocks, each retried; every transfer commits exactly once.

use std::sync::Arc;

use crate::common::{connect, url};
use crate::transfers::{Dialect, Run, transfers};

crate::bank::diesel_bank!(diesel::PgConnection, Dialect::Postgres);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some(url) = url("diesel_postgres::contention") else {
        return;
    };
    let run = Run::postgres_serializable("diesel, postgres SERIALIZABLE");
    transfers(DieselBank(Arc::new(move || connect(&url))), run).await;
}
