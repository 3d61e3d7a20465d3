//! Constraint failures are permanent: a typed SQLite code that is not in the table.

use txretry::{Code, Verdict};

use crate::common::{Db, assert_permanent_once, eager_policy, run_counting, sqlite_code};

/// SQLITE_CONSTRAINT_UNIQUE / _PRIMARYKEY, SQLITE_CONSTRAINT_TRIGGER.
const UNIQUE: i32 = 2067;
const TRIGGER: i32 = 1811;

fn setup(db: &Db) -> rusqlite::Connection {
    let conn = db.open();
    conn.execute_batch(
        "CREATE TABLE user (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE);
         INSERT INTO user VALUES (1, 'ada@example.com');",
    )
    .unwrap();
    conn
}

#[test]
fn a_unique_violation_is_2067_and_permanent() {
    let db = Db::wal();
    let conn = setup(&db);
    let err = conn
        .execute("INSERT INTO user (email) VALUES ('ada@example.com')", [])
        .expect_err("duplicate");
    assert_eq!(sqlite_code(&err), Some(UNIQUE), "{err:?}");
    let found = txretry::classify(&err);
    assert_eq!(found.verdict, Verdict::Permanent);
    assert_eq!(found.code, Some(Code::Sqlite(UNIQUE)));
}

#[test]
fn the_runner_returns_a_unique_violation_once_and_rolls_back() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let (result, calls) = run_counting(&mut conn, &eager_policy(), |tx| {
        tx.execute("INSERT INTO user (email) VALUES ('grace@example.com')", [])?;
        tx.execute("INSERT INTO user (email) VALUES ('ada@example.com')", [])?;
        Ok::<_, rusqlite::Error>(())
    });
    let err = result.expect_err("duplicate email");
    assert_eq!(sqlite_code(err.error()), Some(UNIQUE));
    assert_permanent_once(&err, Some(Code::Sqlite(UNIQUE)));
    assert_eq!(calls, 1);
    let n: i64 = conn
        .query_row("SELECT count(*) FROM user", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1, "the first insert was rolled back too");
    assert!(conn.is_autocommit());
}

/// The SQLite twin of Postgres' `RAISE EXCEPTION 'deadlock …'`: a trigger aborts with a
/// message that says "deadlock". The typed code (1811) is authoritative, so the message
/// fallback is never consulted and the error is permanent.
#[test]
fn a_trigger_raising_deadlock_is_permanent() {
    let db = Db::wal();
    let mut conn = setup(&db);
    conn.execute_batch(
        "CREATE TRIGGER no_bots BEFORE INSERT ON user WHEN NEW.email LIKE 'bot%'
         BEGIN SELECT RAISE(ABORT, 'deadlock detected in signup flow'); END;",
    )
    .unwrap();

    let err = conn
        .execute("INSERT INTO user (email) VALUES ('bot@example.com')", [])
        .expect_err("trigger");
    assert_eq!(sqlite_code(&err), Some(TRIGGER), "{err:?}");
    assert!(err.to_string().contains("deadlock"), "{err}");
    let found = txretry::classify(&err);
    assert_eq!(found.verdict, Verdict::Permanent);
    assert_eq!(found.code, Some(Code::Sqlite(TRIGGER)));

    let (result, calls) = run_counting(&mut conn, &eager_policy(), |tx| {
        tx.execute("INSERT INTO user (email) VALUES ('bot2@example.com')", [])?;
        Ok::<_, rusqlite::Error>(())
    });
    let err = result.expect_err("the trigger aborts");
    assert_eq!(sqlite_code(err.error()), Some(TRIGGER));
    assert!(err.to_string().contains("deadlock"), "{err}");
    assert_permanent_once(&err, Some(Code::Sqlite(TRIGGER)));
    assert_eq!(calls, 1);
}
