//! The transfers of `tests/shared/transfers.rs` through diesel-async under SERIALIZABLE,
//! each worker on an `AsyncPgConnection` of its own: serialization failures and deadlocks,
//! each retried; every transfer commits exactly once.

use txretry::{Isolation, TransientKind, TxOptions};

use crate::bank::DieselAsyncBank;
use crate::server::url;
use crate::transfers::{Run, transfers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some(url) = url("diesel_async_postgres::contention") else {
        return;
    };
    let run = Run {
        name: "diesel-async, postgres SERIALIZABLE",
        options: TxOptions::new().isolation(Isolation::Serializable),
        reader: TxOptions::new()
            .isolation(Isolation::RepeatableRead)
            .read_only(true),
        // Transfers lock their two rows in either order, so they also deadlock; detect
        // that in 20 ms rather than the default 1 s.
        prelude: Some("SET LOCAL deadlock_timeout = '20ms'"),
        retried: &[TransientKind::SerializationFailure, TransientKind::Deadlock],
    };
    transfers(DieselAsyncBank(url), run).await;
}
