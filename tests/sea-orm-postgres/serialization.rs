//! Serialization failure (40001): write skew under SERIALIZABLE. Each transaction counts
//! the rows the other one inserts, then inserts its own; run side by side, no serial order
//! explains both counts, so Postgres fails one (at a statement or at COMMIT). The runner
//! runs it again, and the counts come out as in a serial order.

use std::sync::Arc;

use sea_orm::{ConnectionTrait, DbErr, Statement};
use tokio::sync::Barrier;
use txretry::{Isolation, TransientKind, TxOptions, Verdict};

use crate::common::{Seen, column, drop_table, exec, policy, setup, table, within};
use crate::dialect::sqlstate;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_skew_under_serializable_is_retried_until_serial() {
    let Some((_, db)) = setup("sea-orm-postgres serialization", 4).await else {
        return;
    };
    let t = table("write_skew");
    exec(
        &db,
        format!("CREATE TABLE {t} (kind int NOT NULL, saw bigint NOT NULL)"),
    )
    .await;

    let seen = Seen::default();
    let policy = policy(10, &seen);
    let options = TxOptions::new().isolation(Isolation::Serializable);
    let barrier = Arc::new(Barrier::new(2));
    let side = |mine: i32, theirs: i32| {
        let (t, barrier) = (t.clone(), barrier.clone());
        let mut attempt = 0;
        tokio::spawn(txretry::sea_orm::transaction_with(
            &db,
            &policy,
            &options,
            async move |tx| {
                attempt += 1;
                // Under SERIALIZABLE a read can fail with 40001 too: it fails the attempt.
                let count = format!("SELECT count(*) FROM {t} WHERE kind = {theirs}");
                let count = Statement::from_string(tx.get_database_backend(), count);
                let saw: i64 = tx
                    .query_one_raw(count)
                    .await?
                    .expect("one row")
                    .try_get_by_index(0)?;
                if attempt == 1 {
                    // Both have read before either writes.
                    barrier.wait().await;
                }
                tx.execute_unprepared(&format!("INSERT INTO {t} VALUES ({mine}, {saw})"))
                    .await?;
                Ok::<_, DbErr>(attempt)
            },
        ))
    };
    let (a, b) = (side(1, 2), side(2, 1));
    let (a, b) = within(async { (a.await.unwrap().unwrap(), b.await.unwrap().unwrap()) }).await;

    let retried = seen.all();
    assert!(a + b > 2, "someone was retried: {a}, {b}");
    assert_eq!(retried.len() as u32, a + b - 2, "{retried:?}");
    for (_, c) in &retried {
        assert_eq!(
            c.verdict,
            Verdict::Transient(TransientKind::SerializationFailure)
        );
        assert_eq!(c.code, sqlstate("40001"));
    }
    // Each committed once; the later one saw the earlier one's row, as in a serial order.
    let mut saw: Vec<i64> = column(&db, format!("SELECT saw FROM {t}")).await;
    saw.sort();
    assert_eq!(saw, [0, 1], "one row each, counts of a serial order");
    drop_table(&db, &t).await;
}
