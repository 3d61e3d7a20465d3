//! The transfers of `tests/shared/transfers.rs` through diesel-async under SERIALIZABLE,
//! each worker on an `AsyncPgConnection` of its own: serialization failures and deadlocks,
//! each retried; every transfer commits exactly once.

use crate::bank::DieselAsyncBank;
use crate::server::url;
use crate::transfers::{Run, transfers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some(url) = url("diesel_async_postgres::contention") else {
        return;
    };
    let run = Run::postgres_serializable("diesel-async, postgres SERIALIZABLE");
    transfers(DieselAsyncBank(url), run).await;
}
