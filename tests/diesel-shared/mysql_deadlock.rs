//! 1213: two sessions update two rows in opposite order. InnoDB rolls back the lighter
//! transaction (fewer rows changed), whichever request closed the cycle; the other session
//! changes many rows first, so the runner is the victim, rolls back and retries to
//! completion. Diesel (and diesel-async) keep SQLSTATE 40001 and the text; the adapter
//! recovers 1213. Written once for MySQL/MariaDB through Diesel and diesel-async (a
//! `#[path]` module, like `business.rs`).

use std::sync::mpsc;
use std::thread;

use txretry::{Code, Phase, TransientKind, TxOptions, Verdict};

use crate::calls::*;
use crate::common::*;

#[test]
fn a_deadlock_is_recognised_as_1213_and_retried() {
    let Some(url) = url(&format!("{BINARY}::deadlock")) else {
        return;
    };
    let mut observer = connect(&url);
    let t = table(&format!("{BINARY}_deadlock"));
    create_rows(&mut observer, &t, 20);

    // B, in its own thread: once A holds row 1, changes rows 3..=20 and row 2, then waits
    // for row 1; commits once A was rolled back.
    let mut b = connect(&url);
    let b_id = connection_id(&mut b);
    let b_waits = format!("UPDATE {t} SET v = v + 10 WHERE id = 1");
    let b_statements = [
        "START TRANSACTION".to_owned(),
        format!("UPDATE {t} SET v = v + 10 WHERE id >= 3"),
        format!("UPDATE {t} SET v = v + 10 WHERE id = 2"),
        b_waits.clone(),
        "COMMIT".to_owned(),
    ];
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let session_b = thread::spawn(move || {
        go_rx.recv().unwrap();
        b_statements
            .iter()
            .try_for_each(|statement| batch(&mut b, statement))
    });

    let mut a = connect(&url);
    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let mut go = Some(go_tx);
    let mut attempts = 0;
    let mut errors_in_closure = Vec::new();
    transaction_with!(&mut a, &policy, &TxOptions::default(), |conn| {
        attempts += 1;
        execute!(
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1")),
            conn
        )?;
        if let Some(go) = go.take() {
            go.send(()).unwrap();
            wait_for_statement(&mut observer, b_id, &b_waits);
        }
        let updated = execute!(
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 2")),
            conn
        );
        if let Err(e) = &updated {
            errors_in_closure.push((kept(e), txretry::classify(e)));
        }
        updated
    })
    .expect("the retry commits");

    session_b
        .join()
        .unwrap()
        .expect("B commits once A was rolled back");
    assert_eq!(attempts, 2);
    assert_eq!(errors_in_closure.len(), 1);
    let (kept, classification) = &errors_in_closure[0];
    let (state, message) = kept.as_ref().expect("a database error");
    assert_eq!(
        state, "40001",
        "Diesel keeps the SQLSTATE, not the errno (so does diesel-async)"
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
    assert_eq!(value(&mut observer, &t, 1), 11);
    assert_eq!(value(&mut observer, &t, 2), 11);
    drop_tables(&mut observer, &[&t]);
}
