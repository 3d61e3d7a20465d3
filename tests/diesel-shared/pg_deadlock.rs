//! 40P01: the runner's session A and a second session B update rows 1 and 2 in opposite
//! order. A checks for deadlocks after 100 ms, B only after 10 s, so A is the victim: its
//! runner rolls back and runs the closure again, and each session's update lands once.
//! Written once for Postgres through Diesel and diesel-async (a `#[path]` module, like
//! `business.rs`).

use std::sync::mpsc;
use std::thread;

use txretry::{Phase, TransientKind, TxOptions, Verdict};

use crate::calls::*;
use crate::common::*;

#[test]
fn a_deadlock_is_retried_and_each_update_lands_once() {
    let Some(url) = url(&format!("{BINARY}::deadlock")) else {
        return;
    };
    let mut observer = connect(&url);
    let t = table(&format!("{BINARY}_deadlock"));
    create_rows(&mut observer, &t, 2);

    let mut a = connect(&url);
    exec(&mut a, "SET deadlock_timeout = '100ms'");
    let mut b = connect(&url);
    exec(&mut b, "SET deadlock_timeout = '10s'");
    let b_pid = backend_pid(&mut b);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let b_sql = format!(
        "BEGIN;
         UPDATE {t} SET v = v + 10 WHERE id = 2;
         UPDATE {t} SET v = v + 10 WHERE id = 1;
         COMMIT;"
    );
    let session_b = thread::spawn(move || {
        go_rx.recv().unwrap();
        batch(&mut b, &b_sql)
    });

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
            // B takes row 2, then waits for row 1: A's next update closes the cycle.
            go.send(()).unwrap();
            wait_for_lock_wait(&mut observer, b_pid);
        }
        let updated = execute!(
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 2")),
            conn
        );
        if let Err(e) = &updated {
            errors_in_closure.push((diesel_sqlstate(e), txretry::classify(e)));
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
    let (state, classification) = &errors_in_closure[0];
    assert_eq!(
        state.as_deref(),
        Some("40P01"),
        "Diesel and diesel-async keep the SQLSTATE"
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
    assert_eq!(value(&mut observer, &t, 1), 11);
    assert_eq!(value(&mut observer, &t, 2), 11);
    drop_tables(&mut observer, &[&t]);
}
