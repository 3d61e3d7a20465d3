//! A backend terminated while it runs the COMMIT, on the Postgres pairs.
//!
//! The COMMIT is made to wait on the server for real: a deferred constraint trigger on the
//! effects table runs at COMMIT and waits for an advisory lock an observer session holds.
//! The observer finds the session its lock blocks in a COMMIT (`COMMIT`, or tokio-postgres'
//! runner's `SELECT 1; COMMIT`; `pg_blocking_pids`: no other test's session can match),
//! terminates it, and lets the lock go. The client gets 57P01 (or a closed connection) for its COMMIT: ambiguous. It
//! did not land (the trigger never got its lock), so the call retried under the same key
//! — by the runner on a new pooled connection, or by the invocation on a new
//! tokio-postgres client — finds no record and runs the work again: one effect, one
//! record.
//!
//! MariaDB has no deferred trigger to hold a COMMIT on the server; its lost COMMIT answer
//! is the commit-fault proxy's (`scenarios.rs`), and SQLite has no server.

use std::time::Duration;

use serde_json::json;
use sqlx::{Connection, PgConnection};
use txretry_core::{Phase, Verdict};
use txretry_tool::Once;

use crate::common::*;
use crate::driver::OnceDriver;
use crate::scenarios::{Setup, recording};

macro_rules! terminated_scenarios {
    ($driver:ty) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_backend_terminated_during_commit_then_a_retry_with_the_same_key_gives_one_effect()
         {
            crate::terminated::terminated_during_commit::<$driver>("once commit terminated").await;
        }
    };
}

pub(crate) use terminated_scenarios;

pub async fn terminated_during_commit<D: OnceDriver>(test: &str) {
    let Some(Setup { fx, t, records }) = Setup::<D>::new(test).await else {
        return;
    };
    let url = fx.server_url().expect("a Postgres server").to_owned();
    let block = format!("{t}_block");
    let once = Once::new().table(&records).unwrap();
    fx.migrate(&once).await;
    let mut observer = PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE FUNCTION {block}() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             PERFORM pg_advisory_xact_lock(hashtext('{t}'));
             RETURN NULL;
         END $$;
         CREATE CONSTRAINT TRIGGER {t}_at_commit AFTER INSERT ON {t}
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {block}();
         SELECT pg_advisory_lock(hashtext('{t}'));"
    )))
    .execute(&mut observer)
    .await
    .unwrap();

    let killer = {
        let t = t.clone();
        tokio::spawn(async move {
            let mut victim = None;
            for _ in 0..3000 {
                victim = sqlx::query_scalar::<_, i32>(
                    "SELECT pid FROM pg_stat_activity \
                     WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid)) \
                     AND query ILIKE '%COMMIT%'",
                )
                .fetch_optional(&mut observer)
                .await
                .unwrap();
                if victim.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let pid = victim.expect("the COMMIT never blocked");
            let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
                .bind(pid)
                .fetch_one(&mut observer)
                .await
                .unwrap();
            // The retry's COMMIT may now pass.
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "SELECT pg_advisory_unlock(hashtext('{t}'))"
            )))
            .execute(&mut observer)
            .await
            .unwrap();
            killed
        })
    };

    let work = Work::new(&t, Step::Place);
    let (toolbox, retried) = recording(D::tool(&fx.handle(), "place", &work).once(once));
    let out = within(toolbox.invoke(&anyone(), "place", json!({"item": 11}), "call-k"))
        .await
        .unwrap();
    assert!(killer.await.unwrap(), "the backend was terminated");

    assert_eq!(
        *retried.lock().unwrap(),
        [(Verdict::Ambiguous, Phase::Commit, 1)],
        "the ambiguous COMMIT was retried, under the same key"
    );
    assert_eq!(
        work.runs.get(),
        2,
        "the first COMMIT did not land, so the retry found no record and ran the work"
    );
    assert_eq!(out, json!({"item": 11, "effects": 1, "note": "placed"}));
    assert_eq!(
        fx.scalar(format!("SELECT count(*) FROM {t}")).await,
        1,
        "one effect"
    );
    assert_eq!(fx.record(&records, "call-k").await.0, "ok");

    let again = toolbox
        .invoke(&anyone(), "place", json!({"item": 11}), "call-k")
        .await
        .unwrap();
    assert_eq!(again, out);
    assert_eq!(work.runs.get(), 2);
    assert_eq!(fx.scalar(format!("SELECT count(*) FROM {t}")).await, 1);
    for table in [&t, &records] {
        fx.exec(format!("DROP TABLE IF EXISTS {table}")).await;
    }
    fx.exec(format!("DROP FUNCTION IF EXISTS {block}()")).await;
}
