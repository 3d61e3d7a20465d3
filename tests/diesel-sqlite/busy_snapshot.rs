//! SQLITE_BUSY_SNAPSHOT (517), WAL: the runner's DEFERRED transaction reads (taking a
//! snapshot), another connection commits a write, then the runner writes: its snapshot is
//! stale, and no busy timeout helps. SQLite prints the same "database is locked" for 517
//! as for 5, and that text is all Diesel keeps: the adapter reads it as 5 (busy), and the
//! runner rolls back and retries on a fresh snapshot.

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use txretry::{Code, Phase, SqliteBegin, TransientKind, TxOptions, Verdict};

use crate::common::{Db, events, message, recording_policy, scalar};

#[test]
fn a_stale_snapshot_is_retried_on_a_fresh_one() {
    let db = Db::wal();
    db.open()
        .batch_execute("CREATE TABLE counter (n INTEGER NOT NULL); INSERT INTO counter VALUES (0);")
        .unwrap();
    let mut other = db.open();
    let (policy, seen) = recording_policy(3, || {});

    let mut a = db.open();
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    let mut attempts = 0;
    let mut errors = Vec::new();
    let n = txretry::diesel::transaction_with(&mut a, &policy, &deferred, |conn| {
        attempts += 1;
        let n = scalar(conn, "SELECT n FROM counter");
        if attempts == 1 {
            // Another connection commits in between: the snapshot just taken is stale.
            other
                .batch_execute("UPDATE counter SET n = n + 10")
                .unwrap();
        }
        let updated = diesel::sql_query(format!("UPDATE counter SET n = {}", n + 1)).execute(conn);
        if let Err(e) = &updated {
            errors.push(message(e).map(str::to_owned));
        }
        updated.map(|_| n + 1)
    })
    .expect("the retry commits");

    assert_eq!(attempts, 2);
    assert_eq!(errors, [Some("database is locked".to_owned())]);
    assert_eq!(
        events(&seen),
        vec![(
            1,
            Some(Code::Sqlite(5)),
            Verdict::Transient(TransientKind::Busy),
            Phase::Body
        )]
    );
    assert_eq!(n, 11, "the retry read the other connection's write");
    assert_eq!(scalar(&mut a, "SELECT n FROM counter"), 11);
}
