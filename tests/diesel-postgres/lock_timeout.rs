//! 55P03: the runner's session waits at most 100 ms (`lock_timeout`) for a row another
//! session holds. The first attempt times out; the closure lets the other session commit
//! before returning the error, the runner rolls back and retries, and the update lands
//! once on top of the other session's.

use std::sync::mpsc;
use std::thread;

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use txretry::{TransientKind, Verdict};

use crate::common::*;

#[test]
fn a_lock_timeout_is_retried_after_the_holder_commits() {
    let Some(url) = url("diesel_postgres::lock_timeout") else {
        return;
    };
    let mut observer = connect(&url);
    let t = table("dpg_lock_timeout");
    create_rows(&mut observer, &t, 1);

    // B holds row 1 until told to commit.
    let mut b = connect(&url);
    let (locked_tx, locked) = mpsc::channel::<()>();
    let (release_tx, release) = mpsc::channel::<()>();
    let (released_tx, released) = mpsc::channel::<()>();
    let b_sql = format!("BEGIN; UPDATE {t} SET v = v + 10 WHERE id = 1;");
    let session_b = thread::spawn(move || {
        b.batch_execute(&b_sql).unwrap();
        locked_tx.send(()).unwrap();
        release.recv().unwrap();
        b.batch_execute("COMMIT").unwrap();
        released_tx.send(()).unwrap();
    });
    locked.recv().unwrap();

    let mut a = connect(&url);
    exec(&mut a, "SET lock_timeout = '100ms'");
    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let mut attempts = 0;
    let mut states = Vec::new();
    txretry::diesel::transaction(&mut a, &policy, |conn| {
        attempts += 1;
        let updated =
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1")).execute(conn);
        if let Err(e) = &updated {
            states.push(diesel_sqlstate(e));
            release_tx.send(()).unwrap();
            released.recv().unwrap();
        }
        updated
    })
    .expect("the retry commits");

    session_b.join().unwrap();
    assert_eq!(attempts, 2);
    assert_eq!(states, [Some("55P03".to_owned())]);
    let retried = seen.retried();
    assert_eq!(retried.len(), 1, "{retried:?}");
    assert_eq!(
        retried[0].verdict,
        Verdict::Transient(TransientKind::LockTimeout)
    );
    assert_eq!(retried[0].code, Some(sqlstate("55P03")));
    assert_eq!(value(&mut observer, &t, 1), 11);
    drop_tables(&mut observer, &[&t]);
}
