//! Lock-wait timeout (1205) on MariaDB: a row held by another session, and
//! `innodb_lock_wait_timeout = 1` in ours. Only the timed-out statement is rolled back: the
//! transaction stays open with its earlier insert applied, so the runner must roll back
//! before it retries, or the insert would be there twice.

use sea_orm::{ConnectionTrait, DbErr, TransactionTrait};
use txretry::{Phase, TransientKind, Verdict};

use crate::common::{Seen, column, drop_table, exec, policy, scalar, setup, table, within};
use crate::dialect::errno;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_wait_timeout_rolls_back_and_is_retried_once() {
    let Some((url, db)) = setup("sea-orm-mysql lock wait timeout", 2).await else {
        return;
    };
    let t = table("lock_wait");
    let audit = table("lock_wait_audit");
    exec(
        &db,
        format!("CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL) ENGINE=InnoDB"),
    )
    .await;
    exec(&db, format!("INSERT INTO {t} VALUES (1, 0)")).await;
    exec(
        &db,
        format!("CREATE TABLE {audit} (what VARCHAR(20) NOT NULL) ENGINE=InnoDB"),
    )
    .await;

    // Another session holds row 1.
    let other = crate::common::connect(&url, 1).await;
    let holder = other.begin().await.unwrap();
    exec(&holder, format!("UPDATE {t} SET v = v + 100 WHERE id = 1")).await;

    let seen = Seen::default();
    let policy = policy(3, &seen);
    let mut attempt = 0;
    let run = tokio::spawn(txretry::sea_orm::transaction(&db, &policy, {
        let (t, audit) = (t.clone(), audit.clone());
        async move |tx| {
            attempt += 1;
            // Session-level, so set on every attempt (the pool may hand out another
            // connection).
            tx.execute_unprepared("SET SESSION innodb_lock_wait_timeout = 1")
                .await?;
            tx.execute_unprepared(&format!("INSERT INTO {audit} VALUES ('restock')"))
                .await?;
            tx.execute_unprepared(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
                .await?;
            Ok::<_, DbErr>(attempt)
        }
    }));
    // The first attempt timed out; let the second one through.
    seen.first_retry().await;
    holder.commit().await.unwrap();
    let attempts = within(run)
        .await
        .unwrap()
        .expect("retried after the lock-wait timeout and committed");

    assert_eq!(attempts, 2);
    let judged = seen.judged();
    assert_eq!(judged.len(), 1, "{judged:?}");
    assert_eq!(
        judged[0].verdict,
        Verdict::Transient(TransientKind::LockTimeout)
    );
    assert_eq!(judged[0].code, Some(txretry::Code::MySql(1205)));
    assert_eq!(judged[0].phase, Phase::Body);
    let (_, classified) = seen.all()[0];
    assert_eq!(classified.code, Some(txretry::Code::MySql(1205)));

    let audited: i64 = scalar(&db, format!("SELECT count(*) FROM {audit}")).await;
    assert_eq!(audited, 1, "the first attempt's insert was rolled back");
    let v: Vec<i32> = column(&db, format!("SELECT v FROM {t}")).await;
    assert_eq!(v, [101], "the holder's update and ours, once each");
    drop_table(&db, &t).await;
    drop_table(&db, &audit).await;
}

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
