//! The scenarios on PostgreSQL (TXRETRY_POSTGRES_URL), the commit-fault proxy answering a
//! COMMIT that landed with FATAL 08P01, and a backend terminated while it runs the COMMIT.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection};

pub struct Fx {
    pub pool: PgPool,
    pub url: String,
    /// The pool's sessions' `application_name`: how the test finds them in
    /// `pg_stat_activity`.
    pub app: String,
}

pub async fn fixture(test: &str) -> Option<Fx> {
    let url = txretry_testkit::postgres_url(test)?;
    let app = txretry_testkit::unique_name("once");
    let options = PgConnectOptions::from_str(&url)
        .unwrap()
        .application_name(&app);
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .connect_with(options)
        .await
        .unwrap();
    Some(Fx { pool, url, app })
}

/// This pool's sessions waiting on a lock in a statement that names the records' table.
pub async fn waiting(fx: &Fx, records: &str) -> Option<i64> {
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE $2",
    )
    .bind(&fx.app)
    .bind(format!("%{records}%"))
    .fetch_one(&fx.pool)
    .await
    .unwrap();
    Some(n)
}

pub fn age_record(records: &str, key: &str) -> String {
    format!("UPDATE {records} SET created_at = now() - interval '2 hours' WHERE call_key = '{key}'")
}

/// unique_violation.
pub const UNIQUE_KIND: &str = "SQLSTATE 23505";

/// A rolled-back claim hands the key to one waiter; the others queue behind it.
pub const HANDOFF_DEADLOCKS: bool = false;

once_suite!(sqlx::Postgres);
proxy_suite!(sqlx::Postgres, PgPoolOptions);

/// The COMMIT is made to wait on the server for real: a deferred constraint trigger on the
/// effects table runs at COMMIT and waits for an advisory lock the observer holds. The
/// observer sees the pool's session blocked with `COMMIT` as its query, terminates it, and
/// lets the lock go. The client gets 57P01 (or a closed connection) for its COMMIT: the
/// commit is ambiguous (it did not land: the trigger never got its lock), `once` retries it
/// on a new connection with the same key, the claim finds no record, and the work runs
/// again — one effect, one record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_terminated_during_commit_then_a_retry_with_the_same_key_gives_one_effect() {
    let Some(fx) = fixture("once commit terminated").await else {
        return;
    };
    let pool = &fx.pool;
    let t = effects_table(pool).await;
    let block = format!("{t}_block");
    let records = unique_name("once_calls");
    let once = records_for(&records);
    once.migrate(pool).await.unwrap();
    let mut observer = PgConnection::connect(&fx.url).await.unwrap();
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
        let (app, t) = (fx.app.clone(), t.clone());
        tokio::spawn(async move {
            let mut victim = None;
            for _ in 0..3000 {
                victim = sqlx::query_scalar::<_, i32>(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = $1 \
                     AND state = 'active' AND query ILIKE 'COMMIT%' AND wait_event_type = 'Lock'",
                )
                .bind(&app)
                .fetch_optional(&mut observer)
                .await
                .unwrap();
                if victim.is_some() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
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

    let runs = Counter::default();
    let retried = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let toolbox = {
        let retried = std::sync::Arc::clone(&retried);
        Toolbox::builder()
            .policy(fast(3))
            .on_retry(move |e| retried.lock().unwrap().push((e.verdict, e.phase)))
            .tool(place(pool, &t, &runs, &Gate::open()).once(once))
            .build()
            .unwrap()
    };
    let out = within(toolbox.invoke(&anyone(), "place", json!({"item": 11}), "call-k"))
        .await
        .unwrap();
    assert!(killer.await.unwrap(), "the backend was terminated");

    assert_eq!(
        *retried.lock().unwrap(),
        [(Verdict::Ambiguous, txretry_core::Phase::Commit)],
        "the ambiguous COMMIT was retried, under the same key"
    );
    assert_eq!(
        runs.get(),
        2,
        "the first COMMIT did not land, so the retry found no record and ran the work"
    );
    assert_eq!(out, json!({"item": 11, "effects": 1, "note": "placed"}));
    assert_eq!(count(pool, &t).await, 1, "one effect");
    assert_eq!(record(pool, &records, "call-k").await.0, "ok");

    let again = toolbox
        .invoke(&anyone(), "place", json!({"item": 11}), "call-k")
        .await
        .unwrap();
    assert_eq!(again, out);
    assert_eq!(runs.get(), 2);
    assert_eq!(count(pool, &t).await, 1);
    drop_tables(pool, &[&t, &records]).await;
    run(pool, format!("DROP FUNCTION IF EXISTS {block}()")).await;
}
