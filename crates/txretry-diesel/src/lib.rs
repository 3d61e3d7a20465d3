#![doc = r#"
The [Diesel](https://diesel.rs) 2.4 adapter of txretry (blocking, and async on
diesel-async 0.10): it reads the codes out of
`diesel::result::Error` — including those Diesel drops, recovered from the drivers' exact
text — and runs a closure in a transaction that is rolled back and run again when the
database says the failure was transient: Postgres 40P01 deadlock, 40001 serialization
failure, 55P03 lock timeout; MySQL/MariaDB 1213 deadlock, 1205 lock-wait timeout; SQLite
`SQLITE_BUSY`.

Use it through the facade, `txretry` with the features `diesel-postgres`, `diesel-mysql`
and/or `diesel-sqlite`, as `txretry::diesel`. Each feature brings its backend's C library
(libpq, libmysqlclient or MariaDB's compatible libmariadb, libsqlite3) and nothing else: a
SQLite-only build does not need libpq. The diesel-async features (`diesel-async-postgres`,
`diesel-async-mysql`) need none. With a feature on, `RetryPolicy::default()`
recognises Diesel's errors with no further setup: [`extract`] is registered with the
default classifier.

```
use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use txretry::{RetryPolicy, TxError};

# fn main() -> Result<(), Box<dyn std::error::Error>> {
let mut conn = SqliteConnection::establish(":memory:")?;
conn.batch_execute(
    "CREATE TABLE account (id INTEGER PRIMARY KEY, balance BIGINT NOT NULL);
     INSERT INTO account VALUES (1, 100), (2, 0);",
)?;

let policy = RetryPolicy::default();
// Diesel's `conn.transaction(|conn| …)`, retried whole when the failure was transient.
let moved = txretry::diesel::transaction(&mut conn, &policy, |conn| {
    diesel::sql_query("UPDATE account SET balance = balance - 30 WHERE id = 1").execute(conn)?;
    diesel::sql_query("UPDATE account SET balance = balance + 30 WHERE id = 2").execute(conn)?;
    Ok::<_, diesel::result::Error>(30)
});
// The runner's error is a `TxError<diesel::result::Error>`: the error the closure
// returned, with the outcome (verdict, phase, attempts).
assert_eq!(moved.map_err(TxError::into_error)?, 30);
# Ok(())
# }
```

# diesel-async
With the features `async-postgres` / `async-mysql` (facade: `diesel-async-postgres`,
`diesel-async-mysql`), the same runner for diesel-async 0.10's `AsyncPgConnection` and
`AsyncMysqlConnection` (on tokio-postgres and mysql_async: no C library):
`async_transaction` / `async_transaction_with` (`txretry::diesel::async_transaction(&mut
conn, &policy, async |conn| …).await`), also a method of the connection through
`AsyncRetryConnection` (`conn.retry_transaction(&policy, async |conn| …).await`). It
waits with tokio's timer, applies the policy's in-process
[`Admission`](txretry_core::Admission) to the keys an attempt names with
[`TxOptions::contends_on`](txretry_core::TxOptions::contends_on), and follows the same
commit-boundary and connection rules as the blocking runner below.

The same runner is a method of the connection, [`RetryConnection::retry_transaction`]
(`conn.retry_transaction(&policy, |conn| …)`), and takes per-call options with
[`transaction_with`] / [`RetryConnection::retry_transaction_with`]: isolation level,
read-only, how SQLite begins, idempotent.

# What Diesel keeps, and what is recovered
| backend | what Diesel 2.4 keeps | how the adapter reads the failure |
|---|---|---|
| Postgres (`PgConnection`) | the SQLSTATE | typed: `Code::SqlState` (40P01, 40001, 55P03, …) |
| MySQL/MariaDB (`MysqlConnection`) | the SQLSTATE only; the errno is dropped | 1213 (`40001` and `Deadlock found when trying to get lock`) and 1205 (`HY000` and `Lock wait timeout exceeded`), 2006/2013, recovered from the server's or client library's exact text together with the SQLSTATE; other `HY000` errors have no code |
| SQLite (`SqliteConnection`) | the message (and a kind for constraint violations); the result code is dropped | `SQLITE_BUSY` (5) recovered from SQLite's own text `database is locked` (extended codes such as 517 print the same text, so they read as 5), `SQLITE_LOCKED` (6), constraints (19) |

| Postgres through diesel-async (`AsyncPgConnection`) | the SQLSTATE of a server error; a driver error without one only as its text, kind `UnableToSendCommand` | typed: `Code::SqlState`; a lost connection (`connection closed`, `error communicating with the server`, diesel-async's `channel closed`) recovered as `Code::Driver` |
| MySQL/MariaDB through diesel-async (`AsyncMysqlConnection`) | as `MysqlConnection`: the SQLSTATE and text, no errno; a driver error only as its text | as `MysqlConnection`; mysql_async's I/O and closed-connection texts recovered as `Code::Driver` |

The phrase is matched at the start of the message and only together with what Diesel did
keep, so a `diesel::result::Error` whose message merely quotes a driver's text (a
`RAISE` of your own) is not retried. See [`extract`]. An error of your own type with no
Diesel error behind it has no code at all, and goes to txretry's message fallback like
any such error: its text holding a driver's exact phrase (`Deadlock found when trying to
get lock`) is retried, unless the policy's classifier turns the fallback off
(`MessageFallback::Off`).

# Commit boundary and connection
The runner drives BEGIN and COMMIT itself through Diesel's transaction manager, so it
knows when COMMIT failed: a failure there is retried only when the server answered "not
committed"; a lost answer is [`Ambiguous`](txretry_core::Verdict::Ambiguous). A Diesel
connection cannot be reopened by the runner, so an attempt that broke the connection
ends the loop. See [`transaction_with`] (and `async_transaction_with`, which does the same
through diesel-async's transaction manager).
"#]

#[cfg(any(feature = "async-postgres", feature = "async-mysql"))]
mod async_backend;
#[cfg(any(feature = "async-postgres", feature = "async-mysql"))]
mod async_runner;
mod backend;
mod codes;
mod nested;
mod runner;

#[cfg(any(feature = "async-postgres", feature = "async-mysql"))]
pub use async_backend::AsyncRetryConnection;
#[cfg(any(feature = "async-postgres", feature = "async-mysql"))]
pub use async_runner::{async_transaction, async_transaction_with};
pub use backend::RetryConnection;
pub use codes::extract;
pub use nested::NestedTransactionLeftOpen;
pub use runner::{transaction, transaction_with};
