//! In-process admission: DEFERRED transactions that read, pause and write the same row
//! collide at once without it (busy_timeout 0: see `busy`); naming the row's key under
//! `Admission::per_key()` makes them take turns, so none is ever retried.

use std::time::Duration;

use sea_orm::DbErr;
use txretry::{Admission, Backoff, RetryPolicy, SqliteBegin, TxOptions};

use crate::common::{Seen, counter, read_counter, scalar, setup, within, write_counter};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_on_one_key_take_turns_and_never_collide() {
    let (_dir, db) = setup(4).await;
    counter(&db).await;

    let seen = Seen::default();
    let policy = seen
        .retries(
            RetryPolicy::builder()
                .max_attempts(20)
                .backoff(Backoff::Constant(Duration::from_millis(1)))
                .admission(Admission::per_key()),
        )
        .build()
        .unwrap();
    let options = TxOptions::new()
        .sqlite_begin(SqliteBegin::Deferred)
        .contends_on(("counter", 1));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(txretry::sea_orm::transaction_with(
                &db,
                &policy,
                &options,
                async move |tx| {
                    let v = read_counter(tx).await?;
                    // Long enough for every other task to read too, were it let in.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    write_counter(tx, v + 1).await?;
                    Ok::<_, DbErr>(())
                },
            ))
        })
        .collect();
    within(async {
        for task in tasks {
            task.await.unwrap().unwrap();
        }
    })
    .await;

    assert!(seen.all().is_empty(), "no collision: {:?}", seen.all());
    let v: i64 = scalar(&db, "SELECT v FROM counter WHERE id = 1").await;
    assert_eq!(v, 4);
}
