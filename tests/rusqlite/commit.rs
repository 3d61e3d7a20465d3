//! Failures at COMMIT. SQLite always answers a failed COMMIT with a result code, and
//! leaves the transaction open: the runner rolls back, then the code decides. BUSY and a
//! deferred constraint at COMMIT are the shared scenarios of `tests/shared/sqlite/commit.rs`;
//! here, what only rusqlite's closures can do: swallow the error of a statement after which
//! SQLite rolled the transaction back by itself.

use std::time::Duration;

use txretry::{Backoff, Code, Phase, RetryPolicy, StopReason, TxError, Verdict};

use crate::common::{Db, assert_outcome, sqlite_code};

crate::sqlite::commit_tests!(crate::common::Rusqlite);

/// SQLITE_ERROR: "cannot commit - no transaction is active".
const NO_TRANSACTION: i32 = 1;
/// SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_TRIGGER.
const PRIMARY_KEY: i32 = 1555;
const TRIGGER: i32 = 1811;

/// SQLite can end a transaction on its own in the middle of it: a constraint declared
/// `ON CONFLICT ROLLBACK`, or a trigger's `RAISE(ROLLBACK, …)`, fails the statement and rolls
/// back the whole transaction. A closure that swallows that error and returns `Ok` must not
/// be told its work committed: the runner's COMMIT finds no transaction and fails, the runner
/// returns that error (permanent, at commit, after one attempt), and nothing the closure
/// wrote is in the database.
#[test]
fn a_transaction_sqlite_rolled_back_is_not_reported_as_committed() {
    let cases = [
        (
            "ON CONFLICT ROLLBACK",
            "CREATE TABLE item (id INTEGER PRIMARY KEY ON CONFLICT ROLLBACK, note TEXT NOT NULL);
             INSERT INTO item VALUES (1, 'existing');",
            PRIMARY_KEY,
        ),
        (
            "RAISE(ROLLBACK)",
            "CREATE TABLE item (id INTEGER PRIMARY KEY, note TEXT NOT NULL);
             INSERT INTO item VALUES (1, 'existing');
             CREATE TRIGGER no_dupes BEFORE INSERT ON item
               WHEN EXISTS (SELECT 1 FROM item WHERE id = NEW.id)
               BEGIN SELECT RAISE(ROLLBACK, 'item already exists'); END;",
            TRIGGER,
        ),
    ];
    for (case, schema, swallowed_code) in cases {
        let db = Db::wal();
        let mut conn = db.open();
        conn.execute_batch(schema).unwrap();
        conn.execute_batch("CREATE TABLE audit (note TEXT NOT NULL)")
            .unwrap();
        let policy = RetryPolicy::builder()
            .max_attempts(5)
            .retry_on(txretry::KindSet::ALL)
            .backoff(Backoff::Constant(Duration::ZERO))
            .build()
            .unwrap();

        let mut calls = 0;
        let mut swallowed = Vec::new();
        let result: Result<(), TxError<rusqlite::Error>> =
            txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
                calls += 1;
                tx.execute("INSERT INTO audit VALUES ('importing item 1')", [])?;
                tx.execute("INSERT INTO item VALUES (2, 'new')", [])?;
                // The bug under test: the error is dropped and the closure carries on.
                if let Err(e) = tx.execute("INSERT INTO item VALUES (1, 'duplicate')", []) {
                    swallowed.push((sqlite_code(&e), tx.is_autocommit()));
                }
                Ok(())
            });

        assert_eq!(
            swallowed,
            [(Some(swallowed_code), true)],
            "{case}: SQLite rolled the transaction back by itself"
        );
        let err = result.expect_err(case);
        assert_eq!(
            sqlite_code(err.error()),
            Some(NO_TRANSACTION),
            "{case}: {err:?}"
        );
        assert!(
            err.to_string().contains("no transaction is active"),
            "{case}: {err}"
        );
        assert_outcome(
            &err,
            Verdict::Permanent,
            Phase::Commit,
            1,
            StopReason::NotRetryable,
        );
        assert_eq!(err.outcome().code(), Some(Code::Sqlite(NO_TRANSACTION)));
        assert_eq!(calls, 1, "{case}");
        assert!(conn.is_autocommit(), "{case}");
        let (items, audit): (i64, i64) = conn
            .query_row(
                "SELECT (SELECT count(*) FROM item), (SELECT count(*) FROM audit)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            (items, audit),
            (1, 0),
            "{case}: nothing the closure wrote committed"
        );
    }
}

/// The other half of the limitation: statements the closure runs after SQLite rolled the
/// transaction back run outside any transaction and are committed one by one, before the
/// runner's COMMIT fails. The runner still returns the error (so the call is never reported
/// as committed), but it cannot undo those writes: propagate errors with `?`.
#[test]
fn a_write_after_sqlite_rolled_back_is_committed_on_its_own() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.execute_batch(
        "CREATE TABLE item (id INTEGER PRIMARY KEY ON CONFLICT ROLLBACK, note TEXT NOT NULL);
         INSERT INTO item VALUES (1, 'existing');
         CREATE TABLE audit (note TEXT NOT NULL);",
    )
    .unwrap();
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::Constant(Duration::ZERO))
        .build()
        .unwrap();
    let mut calls = 0;
    let result: Result<(), TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
            calls += 1;
            tx.execute("INSERT INTO audit VALUES ('before')", [])?;
            let _ = tx.execute("INSERT INTO item VALUES (1, 'duplicate')", []);
            tx.execute("INSERT INTO audit VALUES ('after')", [])?;
            Ok(())
        });
    let err = result.expect_err("COMMIT finds no transaction");
    assert_eq!(sqlite_code(err.error()), Some(NO_TRANSACTION), "{err:?}");
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(calls, 1);
    let notes: Vec<String> = conn
        .prepare("SELECT note FROM audit")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        notes,
        ["after"],
        "the write after the rollback committed on its own"
    );
}
