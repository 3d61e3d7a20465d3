//! Lock timeout (55P03): `SET LOCAL lock_timeout` while another session holds the row. The
//! closure lets the other session commit after the first failure; the retry succeeds.

use txretry::{TransientKind, Verdict};

use crate::common::{Seen, connect, drop_table, exec, policy, setup, sql, sqlstate, table, within};

#[tokio::test]
async fn lock_timeout_is_retried() {
    let Some((url, pool)) = setup("sqlx-postgres lock_timeout", 2).await else {
        return;
    };
    let t = table("locktimeout");
    exec(
        &pool,
        format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL); INSERT INTO {t} VALUES (1, 0)"
        ),
    )
    .await;

    let mut holder = connect(&url).await;
    exec(
        &mut holder,
        format!("BEGIN; UPDATE {t} SET v = v + 1 WHERE id = 1"),
    )
    .await;

    let seen = Seen::default();
    let policy = policy(3, &seen);
    let mut attempts = 0;
    let mut in_closure = None;
    within(txretry::sqlx::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        sqlx::query("SET LOCAL lock_timeout = '100ms'")
            .execute(&mut **tx)
            .await?;
        let r = sqlx::query(sql(format!("UPDATE {t} SET v = v * 10 WHERE id = 1")))
            .execute(&mut **tx)
            .await;
        if attempts == 1 {
            let err = r.as_ref().expect_err("the row is locked by the holder");
            in_closure = Some(txretry::classify(err));
            exec(&mut holder, "COMMIT".to_string()).await;
        }
        r.map(drop)
    }))
    .await
    .unwrap();

    assert_eq!(attempts, 2);
    let c = in_closure.unwrap();
    assert_eq!(c.verdict, Verdict::Transient(TransientKind::LockTimeout));
    assert_eq!(c.code, sqlstate("55P03"));
    assert_eq!(seen.all().len(), 1);
    let v: i32 = sqlx::query_scalar(sql(format!("SELECT v FROM {t}")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        v, 10,
        "(0 + 1) * 10: the holder's update, then the runner's, once"
    );
    drop_table(&pool, &t).await;
}
