//! 40P01: two sessions update two rows in opposite order. The runner's session is made the
//! victim (short `deadlock_timeout`), is rolled back, and retries to completion.

use txretry::{TransientKind, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_is_classified_and_retried() {
    let Some(url) = url("tokio_postgres::deadlock") else {
        return;
    };
    let observer = connect(&url).await;
    let t = table("tp_deadlock");
    create_rows(&observer, &t, 2).await;

    let (mut a, mut deadlock) = Deadlock::stage(&url, &t).await;

    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let mut attempts = 0;
    let mut errors_in_closure = Vec::new();
    let result = txretry::tokio_postgres::transaction(&mut a, &policy, async |tx| {
        attempts += 1;
        tx.execute(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"), &[])
            .await?;
        deadlock.a_holds_row_1(&observer).await;
        match tx
            .execute(&format!("UPDATE {t} SET v = v + 1 WHERE id = 2"), &[])
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                errors_in_closure.push((e.code().cloned(), txretry::classify(&e)));
                Err(e)
            }
        }
    })
    .await;

    result.expect("the retry commits");
    deadlock.b_commits().await;
    assert_eq!(attempts, 2);

    // The real error, as the closure saw it and as the runner judged it.
    assert_eq!(errors_in_closure.len(), 1);
    let (code, classification) = &errors_in_closure[0];
    assert_eq!(
        code.as_ref(),
        Some(&tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED)
    );
    assert_eq!(
        classification.verdict,
        Verdict::Transient(TransientKind::Deadlock)
    );
    assert_eq!(classification.code, Some(sqlstate("40P01")));
    assert_eq!(seen.retried(), vec![*classification]);

    // A's first attempt left nothing behind: each session added exactly once.
    assert_eq!(value(&observer, &t, 1).await, 11);
    assert_eq!(value(&observer, &t, 2).await, 11);
    drop_tables(&observer, &[&t]).await;
}
