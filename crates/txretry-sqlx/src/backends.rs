//! The per-database part of the runner: how each database begins a transaction with
//! [`TxOptions`], and takes the locks of database-backed admission. Every statement is
//! assembled from fixed strings and numbers only.

#[cfg(any(feature = "postgres", feature = "mysql"))]
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};
#[cfg(any(feature = "postgres", feature = "mysql"))]
use txretry_core::__private::DatabaseLocks;
#[cfg(any(feature = "postgres", feature = "mysql"))]
use txretry_core::TxOptions;

#[cfg(any(feature = "postgres", feature = "mysql"))]
use crate::runner::{Backend, Cleanup, LockStyle, sealed};

#[cfg(feature = "postgres")]
impl sealed::Sealed for sqlx::Postgres {}

/// `BEGIN [ISOLATION LEVEL …] [READ ONLY]`. Read-write is never spelled out, so the
/// server's `default_transaction_read_only` (and hot standbys) keep working.
///
/// Database-backed admission takes advisory locks in the same simple-query message: it
/// tries them inside the transaction without waiting (see
/// [`DatabaseLocks::postgres_try_begin`]). When one is held elsewhere (then in one more
/// round trip), or a key was found held or collided within the last second (then at
/// once), it waits at session level in a short transaction before BEGIN, then takes
/// transaction-level locks inside it (see [`DatabaseLocks::postgres_begin`]).
#[cfg(feature = "postgres")]
impl Backend for sqlx::Postgres {
    fn begin_statement(options: &TxOptions, locks: Option<&DatabaseLocks<'_>>) -> SqlStr {
        let begin = options.postgres_begin();
        let sql = match locks {
            Some(locks) if locks.try_first() => locks.postgres_try_begin(&begin),
            Some(locks) => locks.postgres_begin(&begin),
            None => begin,
        };
        AssertSqlSafe(sql).into_sql_str()
    }

    fn begin_after_busy(
        options: &TxOptions,
        locks: &DatabaseLocks<'_>,
        error: &sqlx::Error,
    ) -> Option<SqlStr> {
        let error = error.as_database_error()?;
        (locks.try_first()
            && DatabaseLocks::postgres_is_busy(error.code().as_deref(), error.message()))
        .then(|| {
            let sql = locks.postgres_begin_after_busy(&options.postgres_begin());
            AssertSqlSafe(sql).into_sql_str()
        })
    }

    const LOCKS: LockStyle = LockStyle::InBegin;

    const LOCK_CLEANUP: &'static str = DatabaseLocks::POSTGRES_CLEANUP;

    async fn take_locks(
        _: &mut sqlx::PgConnection,
        _: DatabaseLocks<'_>,
    ) -> Result<(), sqlx::Error> {
        Ok(())
    }

    fn after_begin(_: &TxOptions, _: Cleanup) -> Option<&'static str> {
        None
    }

    async fn session_cleanup<'c>(
        _: &'c mut sqlx::PgConnection,
        _: &'c TxOptions,
    ) -> Result<Cleanup, sqlx::Error> {
        Ok(Cleanup::Nothing)
    }

    fn abort_check() -> Option<&'static str> {
        Some("SELECT 1")
    }

    async fn run_statement(
        conn: &mut sqlx::PgConnection,
        sql: &'static str,
    ) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sql).execute(conn).await.map(drop)
    }
}

#[cfg(feature = "mysql")]
impl sealed::Sealed for sqlx::MySql {}

/// `[SET TRANSACTION ISOLATION LEVEL …;] START TRANSACTION [READ ONLY]`, sent as one
/// text-protocol query. `SET TRANSACTION` without `SESSION` applies to the next transaction
/// only; should `START TRANSACTION` then fail, the runner closes the connection rather than
/// pool it with that level pending.
///
/// Database-backed admission takes named locks, one `SELECT` of `GET_LOCK(…)` for all the
/// keys, before BEGIN, and releases them with `DO RELEASE_ALL_LOCKS()` after the transaction.
#[cfg(feature = "mysql")]
impl Backend for sqlx::MySql {
    fn begin_statement(options: &TxOptions, _: Option<&DatabaseLocks<'_>>) -> SqlStr {
        AssertSqlSafe(options.mysql_begin()).into_sql_str()
    }

    fn after_begin(_: &TxOptions, _: Cleanup) -> Option<&'static str> {
        None
    }

    async fn session_cleanup<'c>(
        _: &'c mut sqlx::MySqlConnection,
        options: &'c TxOptions,
    ) -> Result<Cleanup, sqlx::Error> {
        Ok(if options.get_isolation().is_some() {
            Cleanup::DiscardIfBeginFailed
        } else {
            Cleanup::Nothing
        })
    }

    /// A swallowed 1213 has already ended the transaction, and what ran after it committed
    /// on its own: nothing to check that could still help.
    fn abort_check() -> Option<&'static str> {
        None
    }

    const LOCKS: LockStyle = LockStyle::Session;

    const LOCK_CLEANUP: &'static str = DatabaseLocks::MYSQL_RELEASE;

    /// One `SELECT` that takes every key's `GET_LOCK` in order, over the text protocol (no
    /// prepared statement), stopping at the first lock not granted.
    async fn take_locks(
        conn: &mut sqlx::MySqlConnection,
        locks: DatabaseLocks<'_>,
    ) -> Result<(), sqlx::Error> {
        use sqlx::Row;
        let row = sqlx::raw_sql(AssertSqlSafe(locks.mysql_get_locks()))
            .fetch_one(&mut *conn)
            .await?;
        match locks.mysql_refused(row.try_get(0)?) {
            None => Ok(()),
            Some((key, granted)) => {
                let refused = crate::admission::LockNotGranted::new(&locks, key, granted);
                Err(sqlx::Error::Database(Box::new(refused)))
            }
        }
    }

    async fn run_statement(
        conn: &mut sqlx::MySqlConnection,
        sql: &'static str,
    ) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sql).execute(conn).await.map(drop)
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use sqlx::{SqlSafeStr, SqlStr};
    use sqlx_sqlite::{Sqlite, SqliteConnection};
    use txretry_core::__private::DatabaseLocks;
    use txretry_core::TxOptions;

    use crate::runner::{Backend, Cleanup, LockStyle, sealed};

    impl sealed::Sealed for Sqlite {}

    /// `BEGIN DEFERRED | IMMEDIATE | EXCLUSIVE` (IMMEDIATE by default). A read-only
    /// transaction begins `DEFERRED` (it never takes the write lock) and runs
    /// `PRAGMA query_only = ON` right after BEGIN; the pragma belongs to the connection, so
    /// the runner turns it off after the transaction — unless the connection already had
    /// it on, which the runner reads before BEGIN and then leaves alone.
    ///
    /// Database-backed admission takes no locks: SQLite runs one writer at a time.
    impl Backend for Sqlite {
        const CANCEL_SAFE: bool = true;

        fn begin_statement(options: &TxOptions, _: Option<&DatabaseLocks<'_>>) -> SqlStr {
            use txretry_core::SqliteBegin::*;
            let begin = if options.is_read_only() {
                Deferred
            } else {
                options.get_sqlite_begin()
            };
            begin.as_sql().into_sql_str()
        }

        fn after_begin(options: &TxOptions, cleanup: Cleanup) -> Option<&'static str> {
            (options.is_read_only() && cleanup == QUERY_ONLY_OFF)
                .then_some("PRAGMA query_only = ON")
        }

        async fn session_cleanup<'c>(
            conn: &'c mut SqliteConnection,
            options: &'c TxOptions,
        ) -> Result<Cleanup, sqlx::Error> {
            if !options.is_read_only() {
                return Ok(Cleanup::Nothing);
            }
            let already: bool = sqlx::query_scalar("PRAGMA query_only")
                .fetch_one(conn)
                .await?;
            Ok(if already {
                Cleanup::Nothing
            } else {
                QUERY_ONLY_OFF
            })
        }

        fn abort_check() -> Option<&'static str> {
            None
        }

        const LOCKS: LockStyle = LockStyle::None;

        const LOCK_CLEANUP: &'static str = "";

        async fn take_locks(
            _: &mut SqliteConnection,
            _: DatabaseLocks<'_>,
        ) -> Result<(), sqlx::Error> {
            Ok(())
        }

        async fn run_statement(
            conn: &mut SqliteConnection,
            sql: &'static str,
        ) -> Result<(), sqlx::Error> {
            sqlx::raw_sql(sql).execute(conn).await.map(drop)
        }
    }

    /// Turns the read-only switch back off after a read-only transaction.
    const QUERY_ONLY_OFF: Cleanup = Cleanup::Sql("PRAGMA query_only = OFF");
}
