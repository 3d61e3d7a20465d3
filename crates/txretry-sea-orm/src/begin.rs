//! How an attempt begins: txretry's [`TxOptions`] as SeaORM's [`TransactionOptions`], per
//! database. SeaORM writes the statements itself from its enums (never from user text):
//!
//! | database | what SeaORM sends |
//! |---|---|
//! | Postgres | `BEGIN`, then `SET TRANSACTION [ISOLATION LEVEL …] [READ ONLY]` when either is asked |
//! | MySQL / MariaDB | `SET TRANSACTION [ISOLATION LEVEL …][, READ ONLY]` when either is asked, then `START TRANSACTION` |
//! | SQLite | `BEGIN DEFERRED` / `BEGIN IMMEDIATE` (txretry's default) / `BEGIN EXCLUSIVE` |

use sea_orm::{
    AccessMode, DbBackend, DbErr, IsolationLevel, SqliteTransactionMode, TransactionOptions,
};
use txretry_core::{Isolation, SqliteBegin, TxOptions};

/// SeaORM's options for a transaction that `options` describe on `backend`, or the error
/// that says why this runner cannot begin it.
///
/// Read-write is never spelled out (no `READ WRITE`), so a server's own default
/// (`default_transaction_read_only`, a hot standby) keeps working. SQLite ignores the
/// isolation level (its transactions are serializable), as txretry's sqlx runner does; it
/// is left out, so SeaORM does not warn about it.
pub(crate) fn transaction_options(
    backend: DbBackend,
    options: &TxOptions,
) -> Result<TransactionOptions, DbErr> {
    let mut begin = TransactionOptions::default();
    if backend == DbBackend::Sqlite {
        if options.is_read_only() {
            // txretry's sqlx runner turns `PRAGMA query_only` on for the transaction and
            // back off after it, on the same connection, and closes the connection if it
            // cannot. SeaORM hands the connection back to its pool at COMMIT, out of the
            // runner's reach: a switch left on (a dropped future) would make every later
            // write on that pooled connection fail. Refused rather than silently ignored.
            return Err(DbErr::BackendNotSupported {
                db: "SQLite",
                ctx: "read-only transactions in txretry's SeaORM runner",
            });
        }
        begin.sqlite_transaction_mode = Some(sqlite_mode(options.get_sqlite_begin()));
        return Ok(begin);
    }
    if let Some(level) = options.get_isolation() {
        begin.isolation_level = Some(isolation_level(level).ok_or(DbErr::BackendNotSupported {
            db: "SeaORM",
            ctx: "an isolation level SeaORM has no name for",
        })?);
    }
    if options.is_read_only() {
        begin.access_mode = Some(AccessMode::ReadOnly);
    }
    Ok(begin)
}

/// SeaORM's name for an isolation level (`Isolation` may grow; SeaORM names these four).
fn isolation_level(level: Isolation) -> Option<IsolationLevel> {
    Some(match level {
        Isolation::ReadUncommitted => IsolationLevel::ReadUncommitted,
        Isolation::ReadCommitted => IsolationLevel::ReadCommitted,
        Isolation::RepeatableRead => IsolationLevel::RepeatableRead,
        Isolation::Serializable => IsolationLevel::Serializable,
        _ => return None,
    })
}

fn sqlite_mode(begin: SqliteBegin) -> SqliteTransactionMode {
    match begin {
        SqliteBegin::Deferred => SqliteTransactionMode::Deferred,
        SqliteBegin::Immediate => SqliteTransactionMode::Immediate,
        SqliteBegin::Exclusive => SqliteTransactionMode::Exclusive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_get_isolation_and_read_only_and_never_read_write() {
        for backend in [DbBackend::Postgres, DbBackend::MySql] {
            let plain = transaction_options(backend, &TxOptions::new()).unwrap();
            assert_eq!(plain, TransactionOptions::default());
            let options = TxOptions::new()
                .isolation(Isolation::Serializable)
                .read_only(true);
            let begin = transaction_options(backend, &options).unwrap();
            assert_eq!(begin.isolation_level, Some(IsolationLevel::Serializable));
            assert_eq!(begin.access_mode, Some(AccessMode::ReadOnly));
            assert_eq!(begin.sqlite_transaction_mode, None);
        }
    }

    #[test]
    fn sqlite_begins_immediate_by_default_and_ignores_isolation() {
        let options = TxOptions::new().isolation(Isolation::ReadCommitted);
        let begin = transaction_options(DbBackend::Sqlite, &options).unwrap();
        assert_eq!(
            begin.sqlite_transaction_mode,
            Some(SqliteTransactionMode::Immediate)
        );
        assert_eq!(begin.isolation_level, None);
        let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
        let begin = transaction_options(DbBackend::Sqlite, &deferred).unwrap();
        assert_eq!(
            begin.sqlite_transaction_mode,
            Some(SqliteTransactionMode::Deferred)
        );
    }

    #[test]
    fn sqlite_read_only_is_refused() {
        let err =
            transaction_options(DbBackend::Sqlite, &TxOptions::new().read_only(true)).unwrap_err();
        assert!(matches!(
            err,
            DbErr::BackendNotSupported { db: "SQLite", .. }
        ));
    }
}
