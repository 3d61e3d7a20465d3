//! A fresh SQLite database file per test, and small helpers.

use std::path::Path;
use std::sync::{Arc, Mutex};

use diesel::connection::{InstrumentationEvent, SimpleConnection};
use diesel::prelude::*;
use txretry::{Code, RetryPolicy, TxError, TxOptions};

use crate::sqlite::Sqlite;

/// A database file of its own per test (`tests/shared/sqlite/`), opened with Diesel.
pub type Db = crate::sqlite::Db<Diesel>;

/// Diesel for the shared SQLite scenarios (`tests/shared/sqlite/`).
pub struct Diesel;

impl Sqlite for Diesel {
    type Conn = SqliteConnection;
    type Error = diesel::result::Error;
    /// SQLITE_CONSTRAINT (19): Diesel keeps only the kind (`ForeignKeyViolation`), which
    /// the adapter reads as the primary code.
    const FOREIGN_KEY: Code = Code::Sqlite(19);

    fn open(path: &Path) -> SqliteConnection {
        let mut conn =
            SqliteConnection::establish(path.to_str().expect("UTF-8 path")).expect("open");
        // `synchronous` reads the schema: set it while a busy timeout still applies, or a
        // connection opened while another one rebuilds the WAL index fails here with
        // SQLITE_BUSY_RECOVERY (261), as rusqlite's `open` notes. Then 0, for the tests.
        conn.batch_execute(
            "PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 0;",
        )
        .expect("pragmas");
        conn
    }

    fn batch(conn: &mut SqliteConnection, sql: &str) -> Result<(), diesel::result::Error> {
        conn.batch_execute(sql)
    }

    fn scalar(conn: &mut SqliteConnection, sql: &str) -> i64 {
        scalar(conn, sql)
    }

    fn text(conn: &mut SqliteConnection, sql: &str) -> String {
        diesel::select(diesel::dsl::sql::<diesel::sql_types::Text>(&format!(
            "({sql})"
        )))
        .get_result(conn)
        .expect(sql)
    }

    fn transaction(
        conn: &mut SqliteConnection,
        policy: &RetryPolicy,
        options: Option<&TxOptions>,
        calls: &mut u32,
        writes: &[&str],
        read: &str,
    ) -> Result<i64, TxError<diesel::result::Error>> {
        let body = |conn: &mut SqliteConnection| -> Result<i64, diesel::result::Error> {
            *calls += 1;
            for write in writes {
                diesel::sql_query(*write).execute(conn)?;
            }
            Ok(scalar(conn, read))
        };
        match options {
            None => txretry::diesel::transaction(conn, policy, body),
            Some(options) => txretry::diesel::transaction_with(conn, policy, options, body),
        }
    }

    /// Diesel's next transaction is a transaction (depth 1), not a savepoint in one it
    /// still counts open.
    fn assert_no_transaction(conn: &mut SqliteConnection) {
        let depths = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&depths);
        conn.set_instrumentation(move |event: InstrumentationEvent<'_>| {
            if let InstrumentationEvent::BeginTransaction { depth, .. } = event {
                log.lock().unwrap().push(depth.get());
            }
        });
        conn.transaction(|_| Ok::<_, diesel::result::Error>(()))
            .expect("a fresh transaction");
        conn.set_instrumentation(|_: InstrumentationEvent<'_>| {});
        assert_eq!(
            *depths.lock().unwrap(),
            [1],
            "Diesel counts a transaction open"
        );
    }

    fn assert_busy(err: &diesel::result::Error) {
        // What Diesel keeps of SQLITE_BUSY: SQLite's text, no code.
        assert_eq!(message(err), Some("database is locked"), "{err:?}");
    }

    fn assert_foreign_key(err: &diesel::result::Error) {
        assert!(
            matches!(
                err,
                diesel::result::Error::DatabaseError(
                    diesel::result::DatabaseErrorKind::ForeignKeyViolation,
                    _
                )
            ),
            "{err:?}"
        );
    }
}

/// The single integer a query returns.
pub fn scalar(conn: &mut SqliteConnection, query: &str) -> i64 {
    diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(&format!(
        "({query})"
    )))
    .get_result(conn)
    .expect(query)
}

/// The message of a Diesel database error (all SQLite leaves in it).
pub fn message(err: &diesel::result::Error) -> Option<&str> {
    match err {
        diesel::result::Error::DatabaseError(_, info) => Some(info.message()),
        _ => None,
    }
}

pub use crate::sqlite::{events, recording_policy};

pub use txretry_testkit::outcome::assert_outcome;
