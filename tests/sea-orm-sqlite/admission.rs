//! In-process admission: DEFERRED transactions that read, pause and write the same row
//! collide at once without it (busy_timeout 0: see `busy`); naming the row's key under
//! `Admission::per_key()` makes them take turns, so none is ever retried.

use std::time::Duration;

use sea_orm::{ConnectionTrait, DbErr, Statement};
use txretry::{Admission, Backoff, RetryPolicy, SqliteBegin, TxOptions};

use crate::common::{Seen, exec, scalar, setup, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_on_one_key_take_turns_and_never_collide() {
    let (_dir, db) = setup(4).await;
    exec(
        &db,
        "CREATE TABLE counter (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)",
    )
    .await;
    exec(&db, "INSERT INTO counter VALUES (1, 0)").await;

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
                    let read = Statement::from_string(
                        tx.get_database_backend(),
                        "SELECT v FROM counter WHERE id = 1",
                    );
                    let v: i64 = tx
                        .query_one_raw(read)
                        .await?
                        .expect("one row")
                        .try_get_by_index(0)?;
                    // Long enough for every other task to read too, were it let in.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    tx.execute_unprepared(&format!(
                        "UPDATE counter SET v = {} WHERE id = 1",
                        v + 1
                    ))
                    .await?;
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
