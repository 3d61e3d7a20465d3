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
The closure's own errors come back unchanged, after one attempt unless they are transient.

Postgres:

```no_run
# #[cfg(feature = "postgres")]
# async fn example() -> Result<(), sqlx::Error> {
use txretry_core::{Isolation, RetryPolicy, TxOptions};

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
.await?;
# Ok(()) }
```

MySQL / MariaDB (a lock-wait timeout, 1205, leaves the transaction open with its earlier
statements applied; the runner always rolls back before it retries):

```no_run
# #[cfg(feature = "mysql")]
# async fn example() -> Result<(), sqlx::Error> {
use txretry_core::RetryPolicy;

let pool = sqlx::MySqlPool::connect("mysql://localhost/shop").await?;
let policy = RetryPolicy::default();
let moved = txretry_sqlx::transaction(&pool, &policy, async |tx| {
    sqlx::query("INSERT INTO audit (what) VALUES ('restock')").execute(&mut **tx).await?;
    let done = sqlx::query("UPDATE item SET stock = stock + 10 WHERE id = 1").execute(&mut **tx).await?;
    Ok::<_, sqlx::Error>(done.rows_affected())
})
.await?;
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

# SQLite linking
The `sqlite` feature depends on `sqlx-sqlite` without choosing how SQLite is linked: your
own sqlx features decide (`sqlite` bundles it, `sqlite-unbundled` uses the system library).

[`RetryPolicy`]: txretry_core::RetryPolicy
"#]

mod backends;
mod codes;
mod runner;

pub use codes::{database_error_code, error_code, extract};
#[doc(hidden)]
pub use runner::Cleanup;
pub use runner::{Backend, transaction, transaction_with};
