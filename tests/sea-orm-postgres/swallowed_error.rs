//! A closure that catches an error and returns `Ok`: Postgres has aborted the transaction,
//! and would answer COMMIT with a ROLLBACK tag and no error. The runner's check before
//! COMMIT turns that into the `25P02` error it is, so `Ok` only ever means committed.

use sea_orm::{ConnectionTrait, DbErr};
use txretry::{Phase, Verdict};

use crate::common::{Seen, drop_table, exec, policy, scalar, setup, table};
use crate::dialect::{code_of, sqlstate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swallowed_error_is_not_reported_as_committed() {
    let Some((_, db)) = setup("sea-orm-postgres swallowed error", 2).await else {
        return;
    };
    let t = table("swallowed");
    exec(&db, format!("CREATE TABLE {t} (id int PRIMARY KEY)")).await;
    let seen = Seen::default();
    let mut calls = 0;
    let err = txretry::sea_orm::transaction(&db, &policy(5, &seen), async |tx| {
        calls += 1;
        tx.execute_unprepared(&format!("INSERT INTO {t} VALUES (1)"))
            .await?;
        // Fails (division by zero) and aborts the transaction; the closure shrugs.
        let ignored = tx.execute_unprepared("SELECT 1 / 0").await;
        assert_eq!(code_of(&ignored.unwrap_err()).as_deref(), Some("22012"));
        Ok::<_, DbErr>(())
    })
    .await
    .expect_err("an aborted transaction did not commit");

    assert_eq!(calls, 1);
    assert_eq!(code_of(err.error()).as_deref(), Some("25P02"), "{err:?}");
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent);
    assert_eq!(outcome.code(), sqlstate("25P02"));
    assert_eq!(outcome.phase(), Phase::Body, "found before COMMIT was sent");
    assert!(!outcome.may_have_committed());
    assert!(seen.all().is_empty());
    let rows: i64 = scalar(&db, format!("SELECT count(*) FROM {t}")).await;
    assert_eq!(rows, 0, "nothing committed");
    drop_table(&db, &t).await;
}
