//! 40P01: the runner's session A and a second session B update rows 1 and 2 in opposite
//! order. A checks for deadlocks after 100 ms, B only after 10 s, so A is the victim: its
//! runner rolls back and runs the closure again, and each session's update lands once.

use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use tokio::sync::oneshot;
use txretry::{Phase, TransientKind, Verdict};

use crate::calls::block_on;
use crate::db::*;

#[test]
fn a_deadlock_is_retried_and_each_update_lands_once() {
    let Some(url) = url("diesel_async_postgres::deadlock") else {
        return;
    };
    block_on(async {
        let mut observer = connect(&url).await;
        let t = table("dapg_deadlock");
        create_rows(&mut observer, &t, 2).await;

        let mut a = connect(&url).await;
        exec(&mut a, "SET deadlock_timeout = '100ms'").await;
        let mut b = connect(&url).await;
        exec(&mut b, "SET deadlock_timeout = '10s'").await;
        let b_pid = backend_pid(&mut b).await;
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let b_sql = format!(
            "BEGIN;
             UPDATE {t} SET v = v + 10 WHERE id = 2;
             UPDATE {t} SET v = v + 10 WHERE id = 1;
             COMMIT;"
        );
        let session_b = tokio::spawn(async move {
            go_rx.await.unwrap();
            b.batch_execute(&b_sql).await
        });

        let (policy, seen) = recording(3);
        let policy = policy.build().unwrap();
        let mut go = Some(go_tx);
        let mut attempts = 0;
        let mut errors_in_closure = Vec::new();
        txretry::diesel::async_transaction(&mut a, &policy, async |conn| {
            attempts += 1;
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
                .execute(conn)
                .await?;
            if let Some(go) = go.take() {
                // B takes row 2, then waits for row 1: A's next update closes the cycle.
                go.send(()).unwrap();
                wait_for_lock_wait(&mut observer, b_pid).await;
            }
            let updated = diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 2"))
                .execute(conn)
                .await;
            if let Err(e) = &updated {
                errors_in_closure.push((diesel_sqlstate(e), txretry::classify(e)));
            }
            updated
        })
        .await
        .expect("the retry commits");

        session_b
            .await
            .unwrap()
            .expect("B commits once A was rolled back");
        assert_eq!(attempts, 2);
        assert_eq!(errors_in_closure.len(), 1);
        let (state, classification) = &errors_in_closure[0];
        assert_eq!(
            state.as_deref(),
            Some("40P01"),
            "diesel-async keeps the SQLSTATE"
        );
        assert_eq!(
            classification.verdict,
            Verdict::Transient(TransientKind::Deadlock)
        );
        assert_eq!(classification.code, Some(sqlstate("40P01")));
        let judged = seen.judged();
        assert_eq!(judged.len(), 1, "{judged:?}");
        assert_eq!(
            judged[0].verdict,
            Verdict::Transient(TransientKind::Deadlock)
        );
        assert_eq!(judged[0].phase, Phase::Body);

        // A's first attempt left nothing behind: each session added exactly once.
        assert_eq!(value(&mut observer, &t, 1).await, 11);
        assert_eq!(value(&mut observer, &t, 2).await, 11);
        drop_tables(&mut observer, &[&t]).await;
    });
}
