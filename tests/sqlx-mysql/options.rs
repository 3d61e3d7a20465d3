//! `TxOptions` on MySQL / MariaDB: the isolation level and read-only mode are really in
//! force inside the closure (observed by behaviour, against a second session), and
//! `SET TRANSACTION` lasts for that one transaction only.

use sqlx::MySqlConnection;
use txretry::{Code, Isolation, RetryPolicy, TxOptions, Verdict};

use crate::common::{assert_permanent_once, connect, drop_table, errno, exec, setup, sql, table};

/// The isolation level in force in `tx`, told apart by what it sees and locks, and whether
/// it is read-only. `other` is a second session.
async fn observe(
    tx: &mut MySqlConnection,
    other: &mut MySqlConnection,
    t: &str,
) -> Result<(&'static str, bool), sqlx::Error> {
    let read = format!("SELECT v FROM {t} WHERE id = 1");
    let first: i32 = sqlx::query_scalar(sql(read.clone()))
        .fetch_one(&mut *tx)
        .await?;
    // SERIALIZABLE turns plain reads into locking reads.
    exec(&mut *other, "START TRANSACTION".into()).await;
    let locked = sqlx::raw_sql(sql(format!(
        "SELECT v FROM {t} WHERE id = 1 FOR UPDATE NOWAIT"
    )))
    .execute(&mut *other)
    .await
    .is_err();
    exec(&mut *other, "ROLLBACK".into()).await;
    let level = if locked {
        "SERIALIZABLE"
    } else {
        // A committed change after our first read: invisible to REPEATABLE READ.
        exec(
            &mut *other,
            format!("UPDATE {t} SET v = v + 1 WHERE id = 1"),
        )
        .await;
        let second: i32 = sqlx::query_scalar(sql(read.clone()))
            .fetch_one(&mut *tx)
            .await?;
        if second == first {
            "REPEATABLE READ"
        } else {
            // An uncommitted change: visible to READ UNCOMMITTED only.
            exec(
                &mut *other,
                format!("START TRANSACTION; UPDATE {t} SET v = v + 100 WHERE id = 1"),
            )
            .await;
            let third: i32 = sqlx::query_scalar(sql(read)).fetch_one(&mut *tx).await?;
            exec(&mut *other, "ROLLBACK".into()).await;
            if third == second + 100 {
                "READ UNCOMMITTED"
            } else {
                "READ COMMITTED"
            }
        }
    };
    let read_only = match sqlx::query(sql(format!("DELETE FROM {t} WHERE id = -1")))
        .execute(&mut *tx)
        .await
    {
        Ok(_) => false,
        Err(err) => {
            // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION, and permanent.
            let c = txretry::classify(&err);
            assert_eq!(
                (c.verdict, c.code),
                (Verdict::Permanent, Some(Code::MySql(1792))),
                "{err}"
            );
            true
        }
    };
    Ok((level, read_only))
}

#[tokio::test]
async fn isolation_and_read_only_are_applied() {
    // One connection: every transaction below runs on the same pooled session.
    let Some((url, pool)) = setup("sqlx-mysql options", 1).await else {
        return;
    };
    let t = table("opts");
    exec(
        &pool,
        format!("CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB"),
    )
    .await;
    exec(&pool, format!("INSERT INTO {t} VALUES (1, 0)")).await;
    let mut other = connect(&url).await;
    let policy = RetryPolicy::disabled();

    let mut run = async |options: Option<TxOptions>| {
        let body =
            async |tx: &mut sqlx::Transaction<'_, sqlx::MySql>| observe(tx, &mut other, &t).await;
        match options {
            None => txretry::sqlx::transaction(&pool, &policy, body)
                .await
                .unwrap(),
            Some(options) => txretry::sqlx::transaction_with(&pool, &policy, &options, body)
                .await
                .unwrap(),
        }
    };

    // The server's default; REPEATABLE READ unless configured otherwise.
    let (default, read_only) = run(None).await;
    assert!(!read_only);
    for (level, expected) in [
        (Isolation::ReadUncommitted, "READ UNCOMMITTED"),
        (Isolation::ReadCommitted, "READ COMMITTED"),
        (Isolation::RepeatableRead, "REPEATABLE READ"),
        (Isolation::Serializable, "SERIALIZABLE"),
    ] {
        assert_eq!(
            run(Some(TxOptions::new().isolation(level))).await,
            (expected, false),
            "{level:?}"
        );
        // SET TRANSACTION applied to that one transaction only.
        assert_eq!(run(None).await, (default, false), "after {level:?}");
    }
    let options = TxOptions::new()
        .isolation(Isolation::ReadCommitted)
        .read_only(true);
    assert_eq!(run(Some(options)).await, ("READ COMMITTED", true));
    assert_eq!(
        run(Some(TxOptions::new().read_only(true))).await,
        (default, true)
    );
    assert_eq!(run(None).await, (default, false));
    drop_table(&pool, &t).await;
}

#[tokio::test]
async fn write_in_read_only_transaction_is_permanent() {
    let Some((_, pool)) = setup("sqlx-mysql read_only", 1).await else {
        return;
    };
    let t = table("readonly");
    exec(
        &pool,
        format!("CREATE TABLE {t} (id INT PRIMARY KEY) ENGINE=InnoDB"),
    )
    .await;

    let mut calls = 0;
    let options = TxOptions::new().read_only(true);
    let err =
        txretry::sqlx::transaction_with(&pool, &RetryPolicy::default(), &options, async |tx| {
            calls += 1;
            sqlx::query(sql(format!("INSERT INTO {t} VALUES (1)")))
                .execute(&mut **tx)
                .await
                .map(drop)
        })
        .await
        .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(errno(err.error()), Some(1792), "{err:?}");
    let c = txretry::classify(err.error());
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(
        c.code,
        Some(Code::MySql(1792)),
        "ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION: {err}"
    );
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), Some(Code::MySql(1792)));
    drop_table(&pool, &t).await;
}
