#![doc = r#"
txretry's adapter for [SeaORM](https://docs.rs/sea-orm) 2 on its sqlx drivers: it teaches
the default classifier `DbErr`, and runs transactions that are retried, whole, when the
database says the failure was transient. Use it through the facade: `txretry::sea_orm` with
the features `sea-orm-postgres`, `sea-orm-mysql`, `sea-orm-sqlite` (here, in the crate
itself: `postgres`, `mysql`, `sqlite`, which turn on SeaORM's `sqlx-postgres`,
`sqlx-mysql`, `sqlx-sqlite`).

# Error codes
A `DbErr` from SeaORM's sqlx drivers holds the `sqlx::Error` it came from
(`DbErr::Exec(RuntimeErr::SqlxError(..))`, also `Query` and `Conn`); with a feature on,
`txretry::classify` and `RetryPolicy::default()` read that error's typed code exactly as
txretry's sqlx adapter does: `40P01`, `40001`, `55P03` on Postgres, errno `1213`, `1205` on
MySQL / MariaDB, extended codes `5`, `517` on SQLite, and the failures sqlx detects itself
(broken I/O, a pool timeout, which SeaORM reports as `DbErr::ConnectionAcquire`). SeaORM's
own outcomes (`RecordNotFound`, `Custom`, …) have no code: permanent. See [`error_code`].

# Transactions
[`transaction`] and [`transaction_with`] take a `DatabaseConnection`, a [`RetryPolicy`],
and an async closure that gets `&DatabaseTransaction` for each attempt — use it as any
SeaORM connection. They commit on `Ok`, roll back on `Err`, and run the closure again, in
a fresh transaction, when the failure is transient. They return `Result<T, TxError<E>>`:
the closure's own error comes back unchanged inside a [`TxError`] (after one attempt unless
it is transient), with the [`Outcome`] of the call. In a function that returns `DbErr`,
write `.map_err(TxError::into_error)?`; `?` into `anyhow::Error` or
`Box<dyn Error + Send + Sync>` works as it is.

SeaORM's own `TransactionTrait::transaction` commits and rolls back in one call, so its
caller cannot tell a failed COMMIT from a failed statement; the runner drives `begin`, the
closure and `commit` itself, so it knows which it was: a failure at COMMIT is retried only
when the server said "not committed", and a lost answer to COMMIT is
[`Ambiguous`](txretry_core::Verdict::Ambiguous).

```
# #[cfg(feature = "sqlite")]
# #[tokio::main(flavor = "current_thread")]
# async fn main() -> Result<(), sea_orm::DbErr> {
use sea_orm::{ConnectionTrait, Database, DbErr, Statement};
use txretry_core::{Code, Phase, RetryPolicy, StopReason, Verdict};

let db = Database::connect("sqlite::memory:").await?;
db.execute_unprepared("CREATE TABLE item (id INTEGER PRIMARY KEY)").await?;
let policy = RetryPolicy::default();

// Committed: the row is there.
txretry_sea_orm::transaction(&db, &policy, async |tx| {
    tx.execute_unprepared("INSERT INTO item (id) VALUES (1)").await?;
    Ok::<_, DbErr>(())
})
.await
.map_err(txretry_core::TxError::into_error)?;

// A constraint is permanent: one attempt, nothing committed, SeaORM's error unchanged.
let err = txretry_sea_orm::transaction(&db, &policy, async |tx| {
    tx.execute_unprepared("INSERT INTO item (id) VALUES (2), (1)").await?;
    Ok::<_, DbErr>(())
})
.await
.unwrap_err();
assert!(matches!(err.error(), DbErr::Exec(_)));
let outcome = err.outcome();
assert_eq!(outcome.verdict(), Verdict::Permanent);
assert_eq!(outcome.code(), Some(Code::Sqlite(1555))); // SQLITE_CONSTRAINT_PRIMARYKEY
assert_eq!(outcome.phase(), Phase::Body);
assert_eq!(outcome.attempts(), 1);
assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);

let count = Statement::from_string(db.get_database_backend(), "SELECT count(*) FROM item");
let rows: i64 = db.query_one_raw(count).await?.expect("one row").try_get_by_index(0)?;
assert_eq!(rows, 1);
# Ok(()) }
# #[cfg(not(feature = "sqlite"))]
# fn main() {}
```

When [`Outcome::may_have_committed`] is true (the answer to COMMIT was lost: the
transaction may be in the database), do not simply run the work again: check first, or
declare the call idempotent with [`TxOptions::idempotent`] so the runner retries it itself.

# What differs from txretry's sqlx runner
SeaORM keeps its pooled connections to itself, so the runner cannot close one:

- A connection the sqlx runner would close after a lost session goes back to SeaORM's
  pool, where sqlx pings it and closes it if the ping fails (a broken one never comes
  back).
- On MySQL / MariaDB, SeaORM sends `SET TRANSACTION …` before `START TRANSACTION`: should
  `START TRANSACTION` fail on a connection that still works, the level stays pending for
  that connection's next transaction (the sqlx runner closes it).
- Database-backed admission ([`Admission::in_database`](txretry_core::Admission::in_database))
  is not taken; in-process admission is (see [`transaction_with`]).
- A read-only SQLite transaction is refused (see [`transaction_with`]).
- Postgres' isolation level and read-only mode cost one more round trip than with the sqlx
  runner (SeaORM sends `SET TRANSACTION` after `BEGIN`).

[`RetryPolicy`]: txretry_core::RetryPolicy
[`TxError`]: txretry_core::TxError
[`Outcome`]: txretry_core::Outcome
[`Outcome::may_have_committed`]: txretry_core::Outcome::may_have_committed
[`TxOptions::idempotent`]: txretry_core::TxOptions::idempotent
"#]

mod begin;
mod codes;
mod runner;

pub use codes::{error_code, extract, sqlx_error};
pub use runner::{transaction, transaction_with};
