//! Lock-wait timeout (1205, SQLSTATE HY000) with `innodb_lock_wait_timeout = 1`. InnoDB
//! rolls back only the statement: the transaction stays open with the row it inserted
//! before the timeout. The runner rolls back before retrying, so after the retry commits
//! that row exists exactly once.

use txretry::{Code, TransientKind, Verdict};

use crate::common::{Seen, connect, drop_table, exec, policy, setup, sql, table, within};

#[tokio::test]
async fn lock_wait_timeout_is_rolled_back_and_retried() {
    let Some((url, pool)) = setup("sqlx-mysql lock_wait_timeout", 2).await else {
        return;
    };
    let (t, log) = (table("locked"), table("log"));
    exec(
        &pool,
        format!("CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB"),
    )
    .await;
    exec(&pool, format!("INSERT INTO {t} VALUES (1, 0)")).await;
    exec(&pool, format!("CREATE TABLE {log} (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(20) NOT NULL) ENGINE=InnoDB")).await;

    let mut holder = connect(&url).await;
    exec(
        &mut holder,
        format!("START TRANSACTION; UPDATE {t} SET v = v + 1 WHERE id = 1"),
    )
    .await;

    let seen = Seen::default();
    let policy = policy(3, &seen);
    let mut attempts = 0;
    let mut in_closure = None;
    let mut still_open = None;
    within(txretry::sqlx::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        sqlx::query("SET SESSION innodb_lock_wait_timeout = 1")
            .execute(&mut **tx)
            .await?;
        sqlx::query(sql(format!("INSERT INTO {log} (note) VALUES ('transfer')")))
            .execute(&mut **tx)
            .await?;
        let r = sqlx::query(sql(format!("UPDATE {t} SET v = v * 10 WHERE id = 1")))
            .execute(&mut **tx)
            .await;
        if attempts == 1 {
            let err = r.as_ref().expect_err("the row is locked by the holder");
            in_closure = Some(txretry::classify(err));
            // Only the UPDATE was rolled back: the transaction still sees its insert.
            let n: i64 = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {log}")))
                .fetch_one(&mut **tx)
                .await?;
            still_open = Some(n);
            exec(&mut holder, "COMMIT".to_string()).await;
        }
        r.map(drop)
    }))
    .await
    .unwrap();

    assert_eq!(attempts, 2);
    let c = in_closure.unwrap();
    assert_eq!(c.verdict, Verdict::Transient(TransientKind::LockTimeout));
    assert_eq!(c.code, Some(Code::MySql(1205)));
    assert_eq!(
        still_open,
        Some(1),
        "after 1205 the insert was still in the open transaction"
    );
    assert_eq!(seen.all().len(), 1);

    let notes: i64 = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {log}")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        notes, 1,
        "the row inserted before the timeout exists exactly once"
    );
    let v: i32 = sqlx::query_scalar(sql(format!("SELECT v FROM {t}")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        v, 10,
        "(0 + 1) * 10: the holder's update, then the runner's, once"
    );
    drop_table(&pool, &t).await;
    drop_table(&pool, &log).await;
}
