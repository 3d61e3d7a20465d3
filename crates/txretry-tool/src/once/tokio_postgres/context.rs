//! `ToolContext::once_tokio_postgres`: a tool call's one transaction on a tokio-postgres
//! client, run exactly once per key.

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_postgres::{Client, Transaction};
use txretry_core::{AsError, TxOptions};

use super::transaction::run_transaction;
use crate::once::record::{Call, finish};
#[cfg(doc)]
use crate::{BusinessError, Once, OnceRefused};
use crate::{Dialect, OnceError, ToolContext};

impl ToolContext {
    /// `ToolContext::once` on a tokio-postgres client (feature `tokio-postgres`): runs the
    /// call's one transaction exactly once per idempotency key, for a tool declared
    /// [`once`](crate::Tool::once), with txretry-tokio-postgres's runner under
    /// [`ToolContext::policy`] (the invocation's one budget).
    ///
    /// The same records, statements and guarantees as the sqlx path (see `once` there, with
    /// feature `sqlx-postgres`, for the table and the claim): each attempt claims the key
    /// (`INSERT … ON CONFLICT DO NOTHING`, then `SELECT … FOR UPDATE`, so a duplicate waits
    /// on the row's lock); a completed record (`ok` or `error`) is returned without calling
    /// `f`; otherwise `f` runs under `SAVEPOINT txretry_once`, its value is recorded (and
    /// returned as read back from its JSON), and an error the policy judges permanent is
    /// rolled back to the savepoint and recorded as a [`BusinessError`]. Other errors go to
    /// the runner, which rolls the whole attempt back (the claim too) and retries. The
    /// table is created the first time it is found missing
    /// ([`Once::migrate_tokio_postgres`]).
    ///
    /// `f` is called once per attempt with a fresh transaction, like the runner's closure:
    /// write `async move |tx| …` over owned values and run its queries on `tx`. Its error
    /// type `E` is one that `tokio_postgres::Error` converts into; return a
    /// [`BusinessError`] (through `E`, e.g. a `BoxError`) to choose the recorded kind.
    ///
    /// # A lost COMMIT answer
    /// The runner borrows `client` and cannot replace a broken connection: when the answer
    /// to COMMIT is lost, `once_tokio_postgres` fails with [`OnceError::Failed`] (ambiguous,
    /// [`may_have_committed`](txretry_core::Outcome::may_have_committed)) instead of
    /// retrying in place as on a pool. The record makes that safe to resolve by running the
    /// call again under the same key on a new client: the invocation does so itself, within
    /// its budget, when the handler returns that error (`?`) and connects (or takes a
    /// client from a pool) each time it runs, as below; otherwise a re-sent call does. The
    /// claim then finds the record if the COMMIT landed, and runs the work if it did not.
    ///
    /// # Errors
    /// - [`OnceError::Business`]: the call's outcome is a business error (now or before);
    /// - [`OnceError::Failed`]: the transaction did not commit, or may not have;
    /// - [`OnceError::Refused`]: the tool is not declared `once`, or this is the run's
    ///   second transaction ([`OnceRefused`]); nothing ran;
    /// - [`OnceError::Table`]: the table was missing and could not be created.
    ///
    /// ```no_run
    /// # fn demo(url: String) -> Result<txretry_tool::Toolbox, txretry_tool::BuildError> {
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    /// use txretry_tool::{BoxError, BusinessError, Once, Tool, ToolContext, Toolbox};
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// struct PlaceOrder { item: i64, qty: i32 }
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Placed { order_id: i64 }
    ///
    /// let place = Tool::new("place_order", "Order an item.", move |ctx: ToolContext, args: PlaceOrder| {
    ///     let url = url.clone();
    ///     async move {
    ///         let (mut client, connection) =
    ///             tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    ///         tokio::spawn(connection);
    ///         let placed = ctx
    ///             .once_tokio_postgres(&mut client, async move |tx| {
    ///                 let left: i32 = tx
    ///                     .query_one(
    ///                         "UPDATE item SET stock = stock - $1 WHERE id = $2 RETURNING stock",
    ///                         &[&args.qty, &args.item],
    ///                     )
    ///                     .await?
    ///                     .get(0);
    ///                 if left < 0 {
    ///                     // Rolled back to the savepoint, recorded, and answered to every repeat.
    ///                     let refusal = BusinessError::new("out_of_stock", "not enough stock");
    ///                     return Err(BoxError::from(refusal));
    ///                 }
    ///                 let order_id = tx
    ///                     .query_one("INSERT INTO orders (item) VALUES ($1) RETURNING id", &[&args.item])
    ///                     .await?
    ///                     .get(0);
    ///                 Ok(Placed { order_id })
    ///             })
    ///             .await?;
    ///         Ok::<_, BoxError>(placed)
    ///     }
    /// })
    /// .once(Once::new());
    /// Toolbox::builder().tool(place).build()
    /// # }
    /// ```
    pub fn once_tokio_postgres<'c, T, E, Via, F>(
        &self,
        client: &'c mut Client,
        f: F,
    ) -> impl Future<Output = Result<T, OnceError<E>>> + use<'c, T, E, Via, F>
    where
        T: Serialize + DeserializeOwned,
        F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
        E: From<tokio_postgres::Error> + AsError<Via>,
    {
        self.once_tokio_postgres_with(client, &TxOptions::new(), f)
    }

    /// [`once_tokio_postgres`](ToolContext::once_tokio_postgres) with options for the
    /// transaction (isolation level, contention keys). The transaction is always read-write
    /// and idempotent: `read_only` and `idempotent` are overridden. Under `REPEATABLE READ`
    /// or `SERIALIZABLE`, a duplicate that waited for the first call's claim fails with a
    /// serialization failure and finds the record on its retry (one retry of its budget).
    pub fn once_tokio_postgres_with<'c, T, E, Via, F>(
        &self,
        client: &'c mut Client,
        options: &TxOptions,
        f: F,
    ) -> impl Future<Output = Result<T, OnceError<E>>> + use<'c, T, E, Via, F>
    where
        T: Serialize + DeserializeOwned,
        F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
        E: From<tokio_postgres::Error> + AsError<Via>,
    {
        let call = Call::new(self, options);
        async move {
            let (run, job) = call.begin(Dialect::Postgres)?;
            let done = run_transaction(client, call.options(), &job, &run, f).await?;
            finish(&run, done)
        }
    }
}
