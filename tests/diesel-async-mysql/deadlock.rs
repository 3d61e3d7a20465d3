//! 1213: two sessions update two rows in opposite order. InnoDB rolls back the lighter
//! transaction (fewer rows changed), whichever request closed the cycle; the other session
//! changes many rows first, so the runner is the victim, rolls back and retries to
//! completion. diesel-async keeps SQLSTATE 40001 and the text; the adapter recovers 1213.

use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use tokio::sync::oneshot;
use txretry::{Code, Phase, TransientKind, Verdict};

use crate::calls::block_on;
use crate::db::*;

#[test]
fn a_deadlock_is_recognised_as_1213_and_retried() {
    let Some(url) = url("diesel_async_mysql::deadlock") else {
        return;
    };
    block_on(async {
        let mut observer = connect(&url).await;
        let t = table("damy_deadlock");
        create_rows(&mut observer, &t, 20).await;

        // B, in its own task: once A holds row 1, changes rows 3..=20 and row 2, then
        // waits for row 1; commits once A was rolled back.
        let mut b = connect(&url).await;
        let b_id = connection_id(&mut b).await;
        let b_waits = format!("UPDATE {t} SET v = v + 10 WHERE id = 1");
        let b_statements = [
            "START TRANSACTION".to_owned(),
            format!("UPDATE {t} SET v = v + 10 WHERE id >= 3"),
            format!("UPDATE {t} SET v = v + 10 WHERE id = 2"),
            b_waits.clone(),
            "COMMIT".to_owned(),
        ];
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let session_b = tokio::spawn(async move {
            go_rx.await.unwrap();
            for statement in &b_statements {
                b.batch_execute(statement).await?;
            }
            Ok::<_, diesel::result::Error>(())
        });

        let mut a = connect(&url).await;
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
                go.send(()).unwrap();
                wait_for_statement(&mut observer, b_id, &b_waits).await;
            }
            let updated = diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 2"))
                .execute(conn)
                .await;
            if let Err(e) = &updated {
                errors_in_closure.push((kept(e), txretry::classify(e)));
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
        let (kept, classification) = &errors_in_closure[0];
        let (state, message) = kept.as_ref().expect("a database error");
        assert_eq!(
            state, "40001",
            "diesel-async keeps the SQLSTATE, not the errno"
        );
        assert!(
            message.starts_with("Deadlock found when trying to get lock"),
            "{message}"
        );
        assert_eq!(
            classification.verdict,
            Verdict::Transient(TransientKind::Deadlock)
        );
        assert_eq!(classification.code, Some(Code::MySql(1213)));
        let judged = seen.judged();
        assert_eq!(judged.len(), 1, "{judged:?}");
        assert_eq!(judged[0].code, Some(Code::MySql(1213)));
        assert_eq!(judged[0].phase, Phase::Body);

        // A's first attempt left nothing behind: each session added exactly once.
        assert_eq!(value(&mut observer, &t, 1).await, 11);
        assert_eq!(value(&mut observer, &t, 2).await, 11);
        drop_tables(&mut observer, &[&t]).await;
    });
}
