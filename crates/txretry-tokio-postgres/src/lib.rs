#![doc = r#"
txretry adapter for [tokio-postgres](https://docs.rs/tokio-postgres) 0.7: reads its typed
error codes and runs a closure in a transaction that is retried, in place, when Postgres
says the failure was transient (40P01 deadlock, 40001 serialization failure, 55P03 lock
timeout).

Most users reach this crate through the `txretry` facade with the `tokio-postgres` feature,
as `txretry::tokio_postgres`.

# Error codes
Linking this crate registers an extractor with the default classifier, so
`RetryPolicy::default()` and `txretry::classify` recognise tokio-postgres errors with no
setup. `tokio_postgres::Error`'s `Display` is only `"db error"`; the code lives on the
[`DbError`](tokio_postgres::error::DbError) behind it, which [`extract`] reads:

| error | code |
|---|---|
| `tokio_postgres::Error` with [`code()`](tokio_postgres::Error::code) | `Code::SqlState(..)` |
| `tokio_postgres::error::DbError` (a link of a chain) | `Code::SqlState(..)` |
| `tokio_postgres::Error` with [`is_closed()`](tokio_postgres::Error::is_closed) | `Code::Driver("connection closed")` |
| `tokio_postgres::Error` caused by a connection-breaking `std::io::Error` | `Code::Driver("io")` |

# Runner
[`transaction`] / [`transaction_with`] take the caller's `&mut Client`. tokio-postgres has
no pool, so the runner cannot replace a broken connection: after a connection failure it
returns the error at once, whatever the policy says (see [`transaction_with`]).
[`Reconnecting::transaction`] runs the same runner on a client it connects again after
such a failure: with a multi-host config (`target_session_attrs=read-write`) and
`RetryPolicy::high_availability()` it rides out a switchover or failover and lands on the
new primary (the facade's `docs::high_availability` guide).

The runners return `Result<T, TxError<E>>`: on failure, your own error `E` unchanged
([`TxError::error`](txretry_core::TxError::error),
[`TxError::into_error`](txretry_core::TxError::into_error)) together with how the attempts went
([`TxError::outcome`](txretry_core::TxError::outcome): verdict, phase, attempts, and whether the last COMMIT may have
landed). In a function that returns the driver's error, unwrap it with
`.map_err(TxError::into_error)?`:

```no_run
use tokio_postgres::NoTls;
use txretry_core::{RetryPolicy, TxError};

# async fn demo() -> Result<(), tokio_postgres::Error> {
let (mut client, connection) =
    tokio_postgres::connect("postgres://postgres@127.0.0.1/test", NoTls).await?;
tokio::spawn(connection); // tokio-postgres needs its connection future polled

let policy = RetryPolicy::default();
let moved: u64 = txretry_tokio_postgres::transaction(&mut client, &policy, async |tx| {
    tx.execute("UPDATE accounts SET balance = balance - 10 WHERE id = 1", &[]).await?;
    tx.execute("UPDATE accounts SET balance = balance + 10 WHERE id = 2", &[]).await
})
.await
.map_err(TxError::into_error)?;
# let _ = moved;
# Ok(())
# }
```

Or read the outcome before deciding what to tell the user; `TxError` implements
`std::error::Error`, so `?` into `Box<dyn Error>` or `anyhow::Error` works too:

```no_run
use txretry_core::{RetryPolicy, Verdict};

# async fn demo(client: &mut tokio_postgres::Client) -> Result<(), Box<dyn std::error::Error>> {
let policy = RetryPolicy::default();
let result = txretry_tokio_postgres::transaction(client, &policy, async |tx| {
    tx.execute("INSERT INTO orders (id) VALUES (17)", &[]).await
})
.await;
match result {
    Ok(_) => println!("order 17 placed"),
    Err(err) if err.outcome().may_have_committed() => {
        // The COMMIT was sent but its answer was lost: look before placing it again.
        println!("order 17 may have been placed: {err}");
    }
    Err(err) if err.outcome().verdict() == Verdict::Permanent => {
        println!("order 17 refused: {}", err.error());
    }
    Err(err) => return Err(err.into()), // transient, and the policy gave up
}
# Ok(())
# }
```
"#]

mod codes;
mod hosts;
mod reconnecting;
mod runner;

pub use codes::extract;
pub use reconnecting::{Reconnecting, UnreplicatedCommit};
pub use runner::{transaction, transaction_with};

pub(crate) use runner::{Source, run};
