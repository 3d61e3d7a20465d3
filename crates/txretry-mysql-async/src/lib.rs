#![doc = r#"
txretry adapter for [mysql_async](https://docs.rs/mysql_async) 0.37: reads its typed error
codes and runs a closure in a transaction that is retried, in place, when MySQL or MariaDB
says the failure was transient (1213 deadlock, 1205 lock-wait timeout).

Most users reach this crate through the `txretry` facade with the `mysql_async` feature, as
`txretry::mysql_async`.

# Error codes
Linking this crate registers an extractor with the default classifier, so
`RetryPolicy::default()` and `txretry::classify` recognise mysql_async errors with no
setup ([`extract`]):

| error | code |
|---|---|
| `Error::Server(ServerError { code, .. })`, or a `ServerError` link | `Code::MySql(code)` |
| `Error::Io(..)`, or an `IoError` link | `Code::Driver("io")` |
| `Error::Driver(DriverError::ConnectionClosed)` | `Code::Driver("connection closed")` |
| `Error::Driver(DriverError::PacketOutOfOrder)` | `Code::Driver("packet out of order")` |

Other driver errors (a parameter count mismatch, a value that does not convert, …) carry no
code and are permanent, and so is `PoolDisconnected`: the application disconnected the pool,
and no retry reopens it.

# Runner
[`transaction`] / [`transaction_with`] take a `&Pool` and use a fresh connection from it
for every attempt.

```no_run
use txretry_core::{RetryPolicy, TxError};
use mysql_async::prelude::*;

# async fn demo() -> Result<(), mysql_async::Error> {
let pool = mysql_async::Pool::new("mysql://root@127.0.0.1:3306/test");
let policy = RetryPolicy::default();
txretry_mysql_async::transaction(&pool, &policy, async |tx| {
    tx.query_drop("UPDATE accounts SET balance = balance - 10 WHERE id = 1").await?;
    tx.query_drop("UPDATE accounts SET balance = balance + 10 WHERE id = 2").await
})
.await
// A `TxError<mysql_async::Error>`: the closure's error with the outcome (verdict, phase,
// attempts). In a function that returns the driver's error, take the error back out.
.map_err(TxError::into_error)?;
pool.disconnect().await?;
# Ok(())
# }
```
"#]

mod codes;
mod lease;
mod runner;

pub use codes::extract;
pub use runner::{transaction, transaction_with};
