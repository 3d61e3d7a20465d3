//! Deadlock (40P01): two sessions update the same two rows in opposite order. Postgres
//! aborts one; the runner rolls it back and runs it again, after the other committed.

use std::sync::Arc;

use tokio::sync::{Barrier, Semaphore};
use txretry::{TransientKind, Verdict};

use crate::common::{Seen, drop_table, exec, policy, setup, sql, sqlstate, table, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opposite_order_updates_deadlock_and_the_victim_is_retried() {
    let Some((_, pool)) = setup("sqlx-postgres deadlock", 4).await else {
        return;
    };
    let t = table("deadlock");
    exec(&pool, format!("CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL); INSERT INTO {t} VALUES (1, 0), (2, 0)")).await;

    let seen = Seen::default();
    let policy = policy(5, &seen);
    let barrier = Arc::new(Barrier::new(2));
    // Set once the survivor holds both rows. The victim's retry waits for it: a retry that
    // ran at once could take its first row back while the survivor, whose lock wait the
    // victim's abort just ended, has not woken yet, and deadlock with it a second time.
    let survivor_holds_both = Arc::new(Semaphore::new(0));
    let side = |first: i32, second: i32, add: i32| {
        let (t, barrier, survivor_holds_both) =
            (t.clone(), barrier.clone(), survivor_holds_both.clone());
        let mut attempt = 0;
        tokio::spawn(txretry::sqlx::transaction(
            &pool,
            &policy,
            async move |tx| {
                attempt += 1;
                if attempt > 1 {
                    let _ = survivor_holds_both.acquire().await;
                }
                // Detect the deadlock after 100 ms instead of the default 1 s.
                sqlx::query("SET LOCAL deadlock_timeout = '100ms'")
                    .execute(&mut **tx)
                    .await?;
                let update = format!("UPDATE {t} SET v = v + $1 WHERE id = $2");
                sqlx::query(sql(update.clone()))
                    .bind(add)
                    .bind(first)
                    .execute(&mut **tx)
                    .await?;
                if attempt == 1 {
                    // Both sessions hold their first row before either asks for its second.
                    barrier.wait().await;
                }
                sqlx::query(sql(update))
                    .bind(add)
                    .bind(second)
                    .execute(&mut **tx)
                    .await?;
                if attempt == 1 {
                    survivor_holds_both.add_permits(1);
                }
                Ok::<_, sqlx::Error>(attempt)
            },
        ))
    };
    let (a, b) = (side(1, 2, 1), side(2, 1, 10));
    let (a, b) = within(async { (a.await.unwrap().unwrap(), b.await.unwrap().unwrap()) }).await;

    // Exactly one victim, retried once.
    let seen = seen.all();
    assert_eq!(a + b, 3, "attempts: {a} and {b}; retried: {seen:?}");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].1.verdict,
        Verdict::Transient(TransientKind::Deadlock)
    );
    assert_eq!(seen[0].1.code, sqlstate("40P01"));

    let rows: Vec<i32> = sqlx::query_scalar(sql(format!("SELECT v FROM {t} ORDER BY id")))
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(rows, [11, 11], "both transactions applied, each once");
    drop_table(&pool, &t).await;
}
