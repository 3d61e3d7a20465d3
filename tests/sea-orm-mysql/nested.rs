//! A deadlock inside a nested transaction on MySQL/MariaDB. InnoDB rolls the whole
//! transaction back on 1213, savepoint included. Nested with `tx.begin()` and `?`, the
//! 1213 reaches the runner, which runs the whole transaction again; nested with SeaORM's
//! `tx.transaction(…)`, SeaORM returns its failed `ROLLBACK TO SAVEPOINT` (1305) in its
//! place, which is permanent: what the runner's docs and the troubleshooting guide say.
//! The victim is made the runner's transaction (A): the other session (B) changes rows
//! 2..=20 first, and InnoDB rolls back the lighter transaction.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, TransactionTrait};
use tokio::sync::oneshot;
use txretry::{Code, TransientKind, TxError, Verdict};

use crate::common::{Seen, drop_table, exec, policy, scalar, setup, table};

/// How A nests its work.
#[derive(Clone, Copy)]
enum Nesting {
    /// `tx.begin()`, statements with `?`, then `commit()`.
    Begin,
    /// `tx.transaction(|t| …)`.
    Callback,
}

/// A's transaction, nested as `nesting`, on rows 1 then 2, against B on rows 2..=20 then
/// 1; the runner's result, its attempts, and the retries it saw.
async fn deadlock_in_nested(
    db: &DatabaseConnection,
    t: &str,
    nesting: Nesting,
) -> (Result<(), TxError<DbErr>>, u32, Seen) {
    exec(
        db,
        format!("CREATE TABLE {t} (id BIGINT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB"),
    )
    .await;
    let rows: Vec<String> = (1..=20).map(|id| format!("({id}, 0)")).collect();
    exec(db, format!("INSERT INTO {t} VALUES {}", rows.join(", "))).await;

    let b = db.begin().await.unwrap();
    exec(
        &b,
        format!("UPDATE {t} SET v = v + 1 WHERE id BETWEEN 2 AND 20"),
    )
    .await;
    let (a_holds_row_1, go) = oneshot::channel::<()>();
    let other = {
        let t = t.to_owned();
        tokio::spawn(async move {
            go.await.expect("A locked row 1");
            // Waits for A's row 1: the cycle InnoDB breaks by rolling A back.
            exec(&b, format!("UPDATE {t} SET v = v + 1 WHERE id = 1")).await;
            b.commit().await.unwrap();
        })
    };

    let seen = Seen::default();
    let attempts = Arc::new(AtomicU32::new(0));
    let signal = Arc::new(std::sync::Mutex::new(Some(a_holds_row_1)));
    let result = {
        let (t, attempts) = (t.to_owned(), attempts.clone());
        txretry::sea_orm::transaction(db, &policy(3, &seen), async move |tx| {
            attempts.fetch_add(1, Ordering::SeqCst);
            let (row_1, row_2) = (
                format!("UPDATE {t} SET v = v + 1 WHERE id = 1"),
                format!("UPDATE {t} SET v = v + 1 WHERE id = 2"),
            );
            let signal = signal.clone();
            let both = async move |nested: &sea_orm::DatabaseTransaction| {
                nested.execute_unprepared(&row_1).await?;
                if let Some(a_holds_row_1) = signal.lock().unwrap().take() {
                    let _ = a_holds_row_1.send(());
                }
                nested.execute_unprepared(&row_2).await?;
                Ok::<(), DbErr>(())
            };
            match nesting {
                Nesting::Begin => {
                    let nested = tx.begin().await?;
                    both(&nested).await?;
                    nested.commit().await
                }
                Nesting::Callback => tx
                    .transaction::<_, (), DbErr>(move |nested| {
                        Box::pin(async move { both(nested).await })
                    })
                    .await
                    .map_err(|e| match e {
                        sea_orm::TransactionError::Connection(e) => e,
                        sea_orm::TransactionError::Transaction(e) => e,
                    }),
            }
        })
        .await
    };
    other.await.unwrap();
    (result, attempts.load(Ordering::SeqCst), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_in_a_nested_begin_is_retried_whole() {
    let Some((_, db)) = setup("sea-orm-mysql nested begin", 4).await else {
        return;
    };
    let t = table("seaorm_nested_begin");
    let (result, attempts, seen) = deadlock_in_nested(&db, &t, Nesting::Begin).await;
    result.expect("the second attempt commits");
    assert_eq!(attempts, 2);
    let retried = seen.retried();
    assert_eq!(retried.len(), 1, "{retried:?}");
    assert_eq!(
        retried[0].verdict,
        Verdict::Transient(TransientKind::Deadlock)
    );
    // A's two updates and B's: each landed once.
    let v = |id| scalar::<i64>(&db, format!("SELECT v FROM {t} WHERE id = {id}"));
    assert_eq!((v(1).await, v(2).await, v(3).await), (2, 2, 1));
    drop_table(&db, &t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_in_a_nested_callback_comes_back_as_1305() {
    let Some((_, db)) = setup("sea-orm-mysql nested callback", 4).await else {
        return;
    };
    let t = table("seaorm_nested_callback");
    let (result, attempts, _) = deadlock_in_nested(&db, &t, Nesting::Callback).await;
    let err = result.expect_err("SeaORM's failed ROLLBACK TO SAVEPOINT is permanent");
    assert_eq!(err.outcome().code(), Some(Code::MySql(1305)), "{err:?}");
    assert_eq!(err.outcome().verdict(), Verdict::Permanent);
    assert_eq!(attempts, 1);
    // A rolled back whole; B's updates landed.
    let v = |id| scalar::<i64>(&db, format!("SELECT v FROM {t} WHERE id = {id}"));
    assert_eq!((v(1).await, v(2).await), (1, 1));
    drop_table(&db, &t).await;
}
