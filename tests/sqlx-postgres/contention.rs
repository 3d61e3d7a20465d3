//! The transfers of `tests/shared/transfers.rs` under SERIALIZABLE: serialization failures
//! and deadlocks, each retried; every transfer commits exactly once.

use txretry::{Isolation, TransientKind, TxOptions};

use crate::common::setup;
use crate::transfers::{Dialect, Run, transfers};

crate::bank::sqlx_bank!(sqlx::PgPool, Dialect::Postgres);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some((_, pool)) = setup("sqlx-postgres contention", 8).await else {
        return;
    };
    let run = Run {
        name: "sqlx, postgres SERIALIZABLE",
        options: TxOptions::new().isolation(Isolation::Serializable),
        reader: TxOptions::new()
            .isolation(Isolation::RepeatableRead)
            .read_only(true),
        // Transfers lock their two rows in either order, so they also deadlock; detect
        // that in 20 ms rather than the default 1 s.
        prelude: Some("SET LOCAL deadlock_timeout = '20ms'"),
        retried: &[TransientKind::SerializationFailure, TransientKind::Deadlock],
    };
    transfers(SqlxBank(pool), run).await;
}
