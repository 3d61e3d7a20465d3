//! 1062 (duplicate entry) is permanent: it surfaces once, with its number.

use mysql_async::prelude::*;
use txretry::{Code, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_violation_is_permanent() {
    let Some(mut db) = Rows::start("mysql_async::unique_violation", "my_unique", 1).await else {
        return;
    };
    let t = &db.t;

    let (policy, seen) = recording(5);
    let policy = policy.build().unwrap();
    let mut attempts = 0;
    let err = txretry::mysql_async::transaction(&db.pool, &policy, async |tx| {
        attempts += 1;
        tx.query_drop(format!("INSERT INTO {t} (id, v) VALUES (2, 0)"))
            .await?;
        tx.query_drop(format!("INSERT INTO {t} (id, v) VALUES (1, 0)"))
            .await
    })
    .await
    .expect_err("duplicate key");

    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());
    assert_eq!(errno(err.error()), Some(1062));
    let classification = txretry::classify(err.error());
    assert_eq!(classification.verdict, Verdict::Permanent);
    assert_eq!(classification.code, Some(Code::MySql(1062)));
    assert_permanent_once(&err, Some(Code::MySql(1062)));
    assert_eq!(
        count(&mut db.observer, &db.t).await,
        1,
        "the first INSERT was rolled back"
    );
    db.finish().await;
}
