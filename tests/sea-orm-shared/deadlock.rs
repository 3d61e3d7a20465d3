//! Deadlock: two sessions update the same two rows in opposite order; the server aborts
//! one (Postgres 40P01, MySQL/MariaDB 1213), the runner rolls it back and runs it again,
//! after the other committed. For SeaORM on PostgreSQL and on MySQL.

use std::sync::Arc;

use sea_orm::{ConnectionTrait, DbErr};
use tokio::sync::{Barrier, Semaphore};
use txretry::{TransientKind, Verdict};

use crate::common::{Seen, column, drop_table, exec, policy, setup, table, within};
use crate::dialect::{DEADLOCK_SETUP, DRIVER, TABLE_OPTIONS, deadlock_code};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opposite_order_updates_deadlock_and_the_victim_is_retried() {
    let Some((_, db)) = setup(&format!("{DRIVER} deadlock"), 4).await else {
        return;
    };
    let t = table("deadlock");
    exec(
        &db,
        format!("CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL){TABLE_OPTIONS}"),
    )
    .await;
    exec(&db, format!("INSERT INTO {t} VALUES (1, 0), (2, 0)")).await;

    let seen = Seen::default();
    let policy = policy(5, &seen);
    let barrier = Arc::new(Barrier::new(2));
    // Set once the survivor holds both rows. The victim's retry waits for it: a retry that
    // ran at once could take its first row back before the survivor woke from its lock
    // wait, and deadlock with it a second time.
    let survivor_holds_both = Arc::new(Semaphore::new(0));
    let side = |first: i32, second: i32, add: i32| {
        let (t, barrier, survivor_holds_both) =
            (t.clone(), barrier.clone(), survivor_holds_both.clone());
        let mut attempt = 0;
        // Spawned: the runner's future is Send with an owning closure.
        tokio::spawn(txretry::sea_orm::transaction(
            &db,
            &policy,
            async move |tx| {
                attempt += 1;
                if attempt > 1 {
                    let _ = survivor_holds_both.acquire().await;
                }
                if let Some(setup) = DEADLOCK_SETUP {
                    tx.execute_unprepared(setup).await?;
                }
                let update = |id: i32| format!("UPDATE {t} SET v = v + {add} WHERE id = {id}");
                tx.execute_unprepared(&update(first)).await?;
                if attempt == 1 {
                    // Both sessions hold their first row before either asks for its second.
                    barrier.wait().await;
                }
                tx.execute_unprepared(&update(second)).await?;
                if attempt == 1 {
                    survivor_holds_both.add_permits(1);
                }
                Ok::<_, DbErr>(attempt)
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
    assert_eq!(seen[0].1.code, deadlock_code());

    let rows: Vec<i32> = column(&db, format!("SELECT v FROM {t} ORDER BY id")).await;
    assert_eq!(rows, [11, 11], "both transactions applied, each once");
    drop_table(&db, &t).await;
}
