//! A unique violation (1062 ER_DUP_ENTRY) is permanent: it surfaces once.

use std::error::Error;

use txretry::{Code, Verdict};

use crate::common::{Seen, assert_permanent_once, drop_table, exec, policy, setup, sql, table};

#[tokio::test]
async fn unique_violation_is_permanent() {
    let Some((_, pool)) = setup("sqlx-mysql unique", 2).await else {
        return;
    };
    let t = table("users");
    exec(&pool, format!("CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(64) NOT NULL UNIQUE) ENGINE=InnoDB")).await;
    exec(
        &pool,
        format!("INSERT INTO {t} (email) VALUES ('a@example.com')"),
    )
    .await;

    let seen = Seen::default();
    let policy = policy(10, &seen);
    let mut calls = 0;
    // Box<dyn Error + Send + Sync> as the closure's error type.
    let err = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        calls += 1;
        sqlx::query(sql(format!(
            "INSERT INTO {t} (email) VALUES ('a@example.com')"
        )))
        .execute(&mut **tx)
        .await?;
        Ok::<_, Box<dyn Error + Send + Sync>>(())
    })
    .await
    .unwrap_err();

    assert_eq!(calls, 1);
    assert!(seen.all().is_empty());
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), Some(Code::MySql(1062)), "{err:?}");
    let err = err.into_error();
    let c = txretry::classify(&*err);
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(c.code, Some(Code::MySql(1062)), "{err}");
    let db = err
        .downcast_ref::<sqlx::Error>()
        .and_then(sqlx::Error::as_database_error)
        .expect("the sqlx error, unchanged");
    assert!(db.is_unique_violation());

    // Each link of the chain carries the code: the sqlx::Error, its source() (the boxed
    // database error) and the driver's error type on its own.
    let sqlx_err = err.downcast_ref::<sqlx::Error>().unwrap();
    assert_eq!(txretry::sqlx::extract(sqlx_err), Some(Code::MySql(1062)));
    let link = std::error::Error::source(sqlx_err).unwrap();
    assert_eq!(txretry::sqlx::extract(link), Some(Code::MySql(1062)));
    let bare = db
        .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .unwrap();
    assert_eq!(txretry::sqlx::extract(bare), Some(Code::MySql(1062)));
    // As the lab and PrimaryPool print it: MySQL's own number, not the SQLSTATE (23000).
    let described = txretry::sqlx::describe::describe(sqlx_err);
    assert!(described.ends_with("(code 1062)"), "{described}");
    drop_table(&pool, &t).await;
}
