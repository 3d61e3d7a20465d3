//! The transfers of `tests/shared/transfers.rs` through SeaORM under SERIALIZABLE:
//! serialization failures and deadlocks, each retried; every transfer commits exactly once.

use std::marker::PhantomData;

use txretry::{Isolation, TransientKind, TxOptions};

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
    let run = Run {
        name: "sea-orm, postgres SERIALIZABLE",
        options: TxOptions::new().isolation(Isolation::Serializable),
        reader: TxOptions::new()
            .isolation(Isolation::RepeatableRead)
            .read_only(true),
        // Transfers lock their two rows in either order, so they also deadlock; detect
        // that in 20 ms rather than the default 1 s.
        prelude: Some("SET LOCAL deadlock_timeout = '20ms'"),
        retried: &[TransientKind::SerializationFailure, TransientKind::Deadlock],
    };
    transfers(SeaOrmBank::<Postgres>(db, PhantomData), run).await;
}
