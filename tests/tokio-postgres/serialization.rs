//! 40001: write skew under SERIALIZABLE. Two doctors are on call; each session takes itself
//! off call only if the other stays. Session B commits between the runner's read and its
//! write, so the runner's first attempt cannot be serialized; the retry sees B's commit and
//! keeps its doctor on call.

use tokio::sync::oneshot;
use txretry::{Isolation, TransientKind, TxOptions, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_skew_is_a_serialization_failure_and_is_retried() {
    let Some(url) = url("tokio_postgres::serialization") else {
        return;
    };
    let observer = connect(&url).await;
    let t = table("tp_oncall");
    observer
        .batch_execute(&format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, on_call bool NOT NULL);
             INSERT INTO {t} VALUES (1, true), (2, true);"
        ))
        .await
        .unwrap();

    let mut a = connect(&url).await;
    let b = connect(&url).await;
    let (a_read_tx, a_read) = oneshot::channel::<()>();
    let (b_done_tx, b_done) = oneshot::channel::<Result<(), tokio_postgres::Error>>();
    let b_table = t.clone();
    tokio::spawn(async move {
        a_read.await.unwrap();
        let result = b
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL SERIALIZABLE;
                 SELECT count(*) FROM {b_table} WHERE on_call;
                 UPDATE {b_table} SET on_call = false WHERE id = 2;
                 COMMIT;"
            ))
            .await;
        b_done_tx.send(result).unwrap();
    });

    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let options = TxOptions::new().isolation(Isolation::Serializable);
    let mut signal = Some((a_read_tx, b_done));
    let mut attempts = 0;
    let went_off_call =
        txretry::tokio_postgres::transaction_with(&mut a, &policy, &options, async |tx| {
            attempts += 1;
            let on_call: i64 = tx
                .query_one(&format!("SELECT count(*) FROM {t} WHERE on_call"), &[])
                .await?
                .get(0);
            if let Some((a_read_tx, b_done)) = signal.take() {
                a_read_tx.send(()).unwrap();
                b_done.await.unwrap().expect("session B commits first");
            }
            if on_call < 2 {
                return Ok(false);
            }
            tx.execute(&format!("UPDATE {t} SET on_call = false WHERE id = 1"), &[])
                .await?;
            Ok::<_, tokio_postgres::Error>(true)
        })
        .await
        .expect("the retry commits");

    assert_eq!(attempts, 2);
    assert!(
        !went_off_call,
        "the retry saw B's commit and kept doctor 1 on call"
    );
    // The real error (at the UPDATE or at COMMIT), as the runner's hook received it.
    let seen = seen.retried();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].verdict,
        Verdict::Transient(TransientKind::SerializationFailure)
    );
    assert_eq!(seen[0].code, Some(sqlstate("40001")));

    let on_call: i64 = observer
        .query_one(&format!("SELECT count(*) FROM {t} WHERE on_call"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(on_call, 1, "exactly one doctor stays on call");
    drop_tables(&observer, &[&t]).await;
}
