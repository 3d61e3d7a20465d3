//! Lock-wait timeout (1205) on MariaDB, every attempt of it: a row held by another
//! session, and `innodb_lock_wait_timeout = 1` in ours. (One timeout retried to a commit
//! is the shared scenario of `tests/shared/locks.rs`, in `contention`.)

use sea_orm::{ConnectionTrait, TransactionTrait};
use txretry::{TransientKind, Verdict};

use crate::common::{drop_table, exec, setup, table, within};
use crate::dialect::errno;

/// The error itself: SeaORM's `DbErr` around sqlx's, with MariaDB's errno.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_wait_timeout_error_keeps_the_servers_errno() {
    let Some((url, db)) = setup("sea-orm-mysql lock wait timeout error", 2).await else {
        return;
    };
    let t = table("lock_wait_err");
    exec(
        &db,
        format!("CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL) ENGINE=InnoDB"),
    )
    .await;
    exec(&db, format!("INSERT INTO {t} VALUES (1, 0)")).await;
    let other = crate::common::connect(&url, 1).await;
    let holder = other.begin().await.unwrap();
    exec(&holder, format!("UPDATE {t} SET v = 1 WHERE id = 1")).await;

    // The default policy: two attempts, both time out.
    let err = within(txretry::sea_orm::transaction(
        &db,
        &txretry::RetryPolicy::default(),
        async |tx| {
            tx.execute_unprepared("SET SESSION innodb_lock_wait_timeout = 1")
                .await?;
            tx.execute_unprepared(&format!("UPDATE {t} SET v = 2 WHERE id = 1"))
                .await
                .map(drop)
        },
    ))
    .await
    .expect_err("the row stays locked");
    holder.rollback().await.unwrap();

    assert_eq!(errno(err.error()), Some(1205), "{err:?}");
    let outcome = err.outcome();
    assert_eq!(
        outcome.verdict(),
        Verdict::Transient(TransientKind::LockTimeout)
    );
    assert_eq!(outcome.attempts(), 2);
    assert_eq!(
        outcome.stop_reason(),
        txretry::StopReason::AttemptsExhausted
    );
    drop_table(&db, &t).await;
}
