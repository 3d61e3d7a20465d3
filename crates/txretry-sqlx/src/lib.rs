#![doc = r#"
txretry's adapter for [sqlx](https://docs.rs/sqlx) 0.9: it teaches the default classifier
sqlx's error codes, and runs transactions that are retried, whole, when the database says
the failure was transient. Use it through the facade: `txretry::sqlx` with the features
`sqlx-postgres`, `sqlx-mysql`, `sqlx-sqlite` (here, in the crate itself: `postgres`,
`mysql`, `sqlite`).

# Error codes
With a feature on, `txretry::classify` and `RetryPolicy::default()` read the typed code of
every `sqlx::Error` (and of the database error types inside it):

| database | code | example |
|---|---|---|
| Postgres | `Code::SqlState` | `40P01` deadlock, `40001` serialization failure, `55P03` lock timeout |
| MySQL / MariaDB | `Code::MySql(errno)` (the errno decides; the SQLSTATE is too coarse) | `1213` deadlock, `1205` lock-wait timeout |
| SQLite | `Code::Sqlite(extended code)` | `5` busy, `517` busy snapshot |
| any | `Code::Driver(..)` for failures sqlx detects itself | pool timed out, broken connection |

See [`error_code`] for the full mapping.

# Transactions
[`transaction`] and [`transaction_with`] take a `sqlx::Pool`, a [`RetryPolicy`], and an async
closure that gets `&mut sqlx::Transaction` for each attempt. They commit on `Ok`, roll back
on `Err`, and run the closure again, in a fresh transaction, when the failure is transient.
They return `Result<T, TxError<E>>`: the closure's own error comes back unchanged inside a
[`TxError`] (after one attempt unless it is transient), with the [`Outcome`] of the call
(see [Errors](#errors)). In a function that returns the closure's error type, write
`.map_err(TxError::into_error)?`; `?` into `anyhow::Error` or `Box<dyn Error + Send + Sync>`
works as it is.

A connection whose failure lost the session (a connection-class code, an I/O error, a
server going away or a standby answering a write: `TransientKind::Connection` and
`TransientKind::Failover`) is closed, never returned to the pool, so the next attempt
connects anew. sqlx connects to one host: for a Postgres primary behind a failover manager,
point the pool at an endpoint that follows the leader (HAProxy with Patroni's REST check,
PgBouncer, a cloud writer endpoint) or open a [`PrimaryPool`] on a multi-host URL (it
follows the primary itself), keep its `acquire_timeout` to a few seconds, and run under
`RetryPolicy::high_availability()` (the facade's `docs::high_availability` guide).

Postgres:

```no_run
# #[cfg(feature = "postgres")]
# async fn example() -> Result<(), sqlx::Error> {
use txretry_core::{Isolation, RetryPolicy, TxError, TxOptions};

let pool = sqlx::PgPool::connect("postgres://localhost/shop").await?;
let policy = RetryPolicy::builder().max_attempts(5).build().expect("valid policy");
let options = TxOptions::new().isolation(Isolation::Serializable);
let order_id: i64 = 42;
txretry_sqlx::transaction_with(&pool, &policy, &options, async move |tx| {
    let stock: i32 = sqlx::query_scalar("SELECT stock FROM item WHERE id = 1")
        .fetch_one(&mut **tx)
        .await?;
    sqlx::query("UPDATE item SET stock = $1 WHERE id = 1").bind(stock - 1).execute(&mut **tx).await?;
    sqlx::query("INSERT INTO shipment (order_id) VALUES ($1)").bind(order_id).execute(&mut **tx).await?;
    Ok::<_, sqlx::Error>(())
})
.await
.map_err(TxError::into_error)?; // back to sqlx::Error
# Ok(()) }
```

MySQL / MariaDB (a lock-wait timeout, 1205, leaves the transaction open with its earlier
statements applied; the runner always rolls back before it retries), with `anyhow`-style
error handling through `Box<dyn Error + Send + Sync>`:

```no_run
# #[cfg(feature = "mysql")]
# async fn example() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
use txretry_core::RetryPolicy;

let pool = sqlx::MySqlPool::connect("mysql://localhost/shop").await?;
let policy = RetryPolicy::default();
let moved = txretry_sqlx::transaction(&pool, &policy, async |tx| {
    sqlx::query("INSERT INTO audit (what) VALUES ('restock')").execute(&mut **tx).await?;
    let done = sqlx::query("UPDATE item SET stock = stock + 10 WHERE id = 1").execute(&mut **tx).await?;
    Ok::<_, sqlx::Error>(done.rows_affected())
})
.await?; // TxError<sqlx::Error> is an Error: `?` boxes it, Display and source() unchanged
# let _ = moved; Ok(()) }
```

SQLite (`BEGIN IMMEDIATE` by default; a DEFERRED transaction that reads and then writes can
fail with `SQLITE_BUSY_SNAPSHOT`, which only a restart cures):

```no_run
# #[cfg(feature = "sqlite")]
# async fn example() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
use txretry_core::{RetryPolicy, SqliteBegin, TxOptions};

let pool = sqlx::SqlitePool::connect("sqlite://shop.db").await?;
let options = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
let stock = txretry_sqlx::transaction_with(&pool, &RetryPolicy::default(), &options, async |tx| {
    let stock: i64 = sqlx::query_scalar("SELECT stock FROM item WHERE id = 1").fetch_one(&mut **tx).await?;
    sqlx::query("UPDATE item SET stock = ? WHERE id = 1").bind(stock - 1).execute(&mut **tx).await?;
    Ok::<_, Box<dyn std::error::Error + Send + Sync>>(stock - 1)
})
.await?;
# let _ = stock; Ok(()) }
```

The runners' futures are `Send` when the closure owns its captures (`async move`); see
[`transaction`] for why borrowed captures are not enough with today's rustc.

# Errors
A runner that gives up returns a [`TxError`]: the last attempt's error, unchanged
([`error`](txretry_core::TxError::error),
[`into_error`](txretry_core::TxError::into_error)), and the [`Outcome`] of the call
([`outcome`](txretry_core::TxError::outcome)): the verdict on the last attempt, the code
behind it, the phase it failed in (body or COMMIT), how many attempts ran and why the loop
stopped. Its `Display` and `source()` are the error's own.

```
# #[cfg(feature = "sqlite")]
# #[tokio::main(flavor = "current_thread")]
# async fn main() -> Result<(), sqlx::Error> {
use txretry_core::{Code, Phase, RetryPolicy, StopReason, Verdict};

// One connection: an in-memory SQLite database lives as long as its connection.
let pool = sqlx::sqlite::SqlitePoolOptions::new()
    .max_connections(1)
    .connect("sqlite::memory:")
    .await?;
sqlx::raw_sql("CREATE TABLE item (id INTEGER PRIMARY KEY)").execute(&pool).await?;

let policy = RetryPolicy::default();
let err = txretry_sqlx::transaction(&pool, &policy, async |tx| {
    sqlx::query("INSERT INTO item (id) VALUES (1), (1)").execute(&mut **tx).await?;
    Ok::<_, sqlx::Error>(())
})
.await
.unwrap_err();

// The driver's error, unchanged…
assert!(err.error().as_database_error().is_some_and(|e| e.is_unique_violation()));
// …and how the call went: a constraint is permanent, so it ran once, and nothing of it
// was committed.
let outcome = err.outcome();
assert_eq!(outcome.verdict(), Verdict::Permanent);
assert_eq!(outcome.code(), Some(Code::Sqlite(1555))); // SQLITE_CONSTRAINT_PRIMARYKEY
assert_eq!(outcome.phase(), Phase::Body);
assert_eq!(outcome.attempts(), 1);
assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
assert!(!outcome.may_have_committed());
# Ok(()) }
# #[cfg(not(feature = "sqlite"))]
# fn main() {}
```

When [`Outcome::may_have_committed`] is true (the answer to COMMIT was lost: the
transaction may be in the database), do not simply run the work again: check first, or
declare the call idempotent with [`TxOptions::idempotent`] so the runner retries it itself.

# SQLite linking
The `sqlite` feature depends on `sqlx-sqlite` without choosing how SQLite is linked: your
own sqlx features decide (`sqlite` bundles it, `sqlite-unbundled` uses the system library).

[`RetryPolicy`]: txretry_core::RetryPolicy
[`TxError`]: txretry_core::TxError
[`Outcome`]: txretry_core::Outcome
[`Outcome::may_have_committed`]: txretry_core::Outcome::may_have_committed
[`TxOptions::idempotent`]: txretry_core::TxOptions::idempotent
"#]

#[cfg(feature = "mysql")]
mod admission;
mod backends;
mod codes;
#[doc(hidden)]
pub mod database_url;
#[doc(hidden)]
pub mod describe;
mod lease;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod own_error;
#[cfg(feature = "postgres")]
mod primary;
#[doc(hidden)]
pub mod redact;
mod runner;

#[cfg(feature = "mysql")]
pub use admission::LockNotGranted;
pub use codes::{database_error_code, error_code, extract};
#[cfg(feature = "postgres")]
pub use primary::{MultiHostError, NotPrimary, PrimaryPool};
pub use runner::{Backend, transaction, transaction_with};
#[doc(hidden)]
pub use runner::{Cleanup, LockStyle};
