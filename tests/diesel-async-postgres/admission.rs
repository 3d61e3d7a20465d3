//! In-process admission: REPEATABLE READ transactions that read, pause and write the same
//! row fail with serialization failures (40001) without it; naming the row's key under
//! `Admission::per_key()` makes them take turns, so none is ever retried. Each runs in a
//! `tokio::spawn`ed task on a connection of its own (the runner's future is `Send`),
//! called as the connection's method.

use std::time::Duration;

use diesel_async::RunQueryDsl;
use txretry::diesel::AsyncRetryConnection;
use txretry::{Admission, Backoff, Isolation, RetryPolicy, TxOptions};
use txretry_testkit::record::Seen;

use crate::calls::block_on;
use crate::db::*;

#[test]
fn writers_on_one_key_take_turns_and_never_collide() {
    let Some(url) = url("diesel_async_postgres::admission") else {
        return;
    };
    block_on(async {
        let mut observer = connect(&url).await;
        let t = table("dapg_admission");
        create_rows(&mut observer, &t, 1).await;

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
            .isolation(Isolation::RepeatableRead)
            .contends_on(("counter", 1));
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (url, policy, options, t) =
                (url.clone(), policy.clone(), options.clone(), t.clone());
            tasks.push(tokio::spawn(async move {
                let mut conn = connect(&url).await;
                // The method form (`AsyncRetryConnection`): its future is `Send` too.
                conn.retry_transaction_with(&policy, &options, async move |conn| {
                    let v = value(conn, &t, 1).await;
                    // Long enough for every other task to read too, were it let in.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    diesel::sql_query(format!("UPDATE {t} SET v = {} WHERE id = 1", v + 1))
                        .execute(conn)
                        .await
                })
                .await
            }));
        }
        for task in tasks {
            task.await
                .unwrap()
                .expect("each commits on its first attempt");
        }

        assert!(seen.all().is_empty(), "no collision: {:?}", seen.all());
        assert_eq!(value(&mut observer, &t, 1).await, 4);
        drop_tables(&mut observer, &[&t]).await;
    });
}
