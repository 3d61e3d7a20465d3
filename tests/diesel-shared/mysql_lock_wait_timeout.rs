//! 1205 with `innodb_lock_wait_timeout = 1` in the session: the runner's transaction
//! inserts a row, then waits for a row another session holds and times out. MariaDB rolls
//! back only the statement: the transaction stays open with the insert applied. The
//! runner rolls it back before retrying, so after the retry commits the row is there once.
//! Diesel (and diesel-async) keep only SQLSTATE HY000 (the catch-all) and the text; the
//! adapter recovers 1205 from both. Written once for MySQL/MariaDB through Diesel and
//! diesel-async (a `#[path]` module, like `business.rs`).

use std::sync::mpsc;
use std::thread;

use txretry::{Code, TransientKind, TxOptions, Verdict};

use crate::calls::*;
use crate::common::*;

#[test]
fn a_lock_wait_timeout_is_rolled_back_and_retried() {
    let Some(url) = url(&format!("{BINARY}::lock_wait_timeout")) else {
        return;
    };
    let mut observer = connect(&url);
    let t = table(&format!("{BINARY}_lock_wait"));
    let log = table(&format!("{BINARY}_lock_wait_log"));
    create_rows(&mut observer, &t, 1);
    create_log(&mut observer, &log);

    // B holds row 1 until told to commit.
    let mut b = connect(&url);
    let (locked_tx, locked) = mpsc::channel::<()>();
    let (release_tx, release) = mpsc::channel::<()>();
    let (released_tx, released) = mpsc::channel::<()>();
    let b_sql = format!("UPDATE {t} SET v = v + 10 WHERE id = 1");
    let session_b = thread::spawn(move || {
        batch(&mut b, "START TRANSACTION").unwrap();
        batch(&mut b, &b_sql).unwrap();
        locked_tx.send(()).unwrap();
        release.recv().unwrap();
        batch(&mut b, "COMMIT").unwrap();
        released_tx.send(()).unwrap();
    });
    locked.recv().unwrap();

    let mut a = connect(&url);
    exec(&mut a, "SET SESSION innodb_lock_wait_timeout = 1");
    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let mut attempts = 0;
    let mut after_timeout = Vec::new();
    transaction_with!(&mut a, &policy, &TxOptions::default(), |conn| {
        attempts += 1;
        execute!(
            diesel::sql_query(format!("INSERT INTO {log} (note) VALUES ('transfer 1')")),
            conn
        )?;
        let updated = execute!(
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1")),
            conn
        );
        if let Err(e) = &updated {
            // Still inside the transaction, the insert is still there: only the runner's
            // ROLLBACK keeps it from being applied twice.
            after_timeout.push((kept(e), count(conn, &log, "true")));
            release_tx.send(()).unwrap();
            released.recv().unwrap();
        }
        updated
    })
    .expect("the retry commits");

    session_b.join().unwrap();
    assert_eq!(attempts, 2);
    assert_eq!(after_timeout.len(), 1);
    let (kept, visible) = &after_timeout[0];
    let (state, message) = kept.as_ref().expect("a database error");
    assert_eq!(
        state, "HY000",
        "Diesel (and diesel-async) keep only MySQL's catch-all SQLSTATE"
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
        count(&mut observer, &log, "true"),
        1,
        "the insert landed once"
    );
    assert_eq!(value(&mut observer, &t, 1), 11);
    drop_tables(&mut observer, &[&t, &log]);
}
