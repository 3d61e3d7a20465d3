//! 1205 with `innodb_lock_wait_timeout = 1` in the session: the runner's transaction
//! inserts a row, then waits for a row another session holds and times out. MariaDB rolls
//! back only the statement: the transaction stays open with the insert applied. The
//! runner rolls it back before retrying, so after the retry commits the row is there once.
//! diesel-async keeps only SQLSTATE HY000 (the catch-all) and the text; the adapter
//! recovers 1205 from both.

use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use tokio::sync::oneshot;
use txretry::{Code, TransientKind, Verdict};

use crate::calls::block_on;
use crate::db::*;

#[test]
fn a_lock_wait_timeout_is_rolled_back_and_retried() {
    let Some(url) = url("diesel_async_mysql::lock_wait_timeout") else {
        return;
    };
    block_on(async {
        let mut observer = connect(&url).await;
        let t = table("damy_lock_wait");
        let log = table("damy_lock_wait_log");
        create_rows(&mut observer, &t, 1).await;
        create_log(&mut observer, &log).await;

        // B holds row 1 until told to commit.
        let mut b = connect(&url).await;
        let (locked_tx, locked) = oneshot::channel::<()>();
        let (release_tx, release) = oneshot::channel::<()>();
        let (released_tx, released) = oneshot::channel::<()>();
        let b_sql = format!("UPDATE {t} SET v = v + 10 WHERE id = 1");
        let session_b = tokio::spawn(async move {
            b.batch_execute("START TRANSACTION").await.unwrap();
            b.batch_execute(&b_sql).await.unwrap();
            locked_tx.send(()).unwrap();
            release.await.unwrap();
            b.batch_execute("COMMIT").await.unwrap();
            released_tx.send(()).unwrap();
        });
        locked.await.unwrap();

        let mut a = connect(&url).await;
        exec(&mut a, "SET SESSION innodb_lock_wait_timeout = 1").await;
        let (policy, seen) = recording(3);
        let policy = policy.build().unwrap();
        let mut attempts = 0;
        let mut after_timeout = Vec::new();
        let mut release = Some((release_tx, released));
        txretry::diesel::async_transaction(&mut a, &policy, async |conn| {
            attempts += 1;
            diesel::sql_query(format!("INSERT INTO {log} (note) VALUES ('transfer 1')"))
                .execute(conn)
                .await?;
            let updated = diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
                .execute(conn)
                .await;
            if let Err(e) = &updated {
                // Still inside the transaction, the insert is still there: only the
                // runner's ROLLBACK keeps it from being applied twice.
                after_timeout.push((kept(e), count(conn, &log, "true").await));
                let (release_tx, released) = release.take().expect("one timeout");
                release_tx.send(()).unwrap();
                released.await.unwrap();
            }
            updated
        })
        .await
        .expect("the retry commits");

        session_b.await.unwrap();
        assert_eq!(attempts, 2);
        assert_eq!(after_timeout.len(), 1);
        let (kept, visible) = &after_timeout[0];
        let (state, message) = kept.as_ref().expect("a database error");
        assert_eq!(
            state, "HY000",
            "diesel-async keeps only MySQL's catch-all SQLSTATE"
        );
        assert!(
            message.starts_with("Lock wait timeout exceeded"),
            "{message}"
        );
        assert_eq!(*visible, 1, "the transaction stayed open after 1205");
        let retried = seen.retried();
        assert_eq!(retried.len(), 1, "{retried:?}");
        assert_eq!(
            retried[0].verdict,
            Verdict::Transient(TransientKind::LockTimeout)
        );
        assert_eq!(retried[0].code, Some(Code::MySql(1205)));

        assert_eq!(
            count(&mut observer, &log, "true").await,
            1,
            "the insert landed once"
        );
        assert_eq!(value(&mut observer, &t, 1).await, 11);
        drop_tables(&mut observer, &[&t, &log]).await;
    });
}
