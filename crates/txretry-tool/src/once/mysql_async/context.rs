//! `ToolContext::once_mysql_async`: a tool call's one transaction on a mysql_async pool,
//! run exactly once per key.

use std::future::Future;

use mysql_async::{Pool, Transaction};
use serde::Serialize;
use serde::de::DeserializeOwned;
use txretry_core::{AsError, TxOptions};

use super::transaction::run_transaction;
use crate::once::record::{Call, finish};
#[cfg(doc)]
use crate::{BusinessError, Once, OnceRefused};
use crate::{Dialect, OnceError, ToolContext};

impl ToolContext {
    /// `ToolContext::once` on a mysql_async pool (feature `mysql_async`; MySQL 8 and
    /// MariaDB 10.5 and later): runs the call's one transaction exactly once per
    /// idempotency key, for a tool declared [`once`](crate::Tool::once), with
    /// txretry-mysql-async's runner under [`ToolContext::policy`] (the invocation's one
    /// budget), idempotent: the record makes an ambiguous COMMIT safe to retry.
    ///
    /// The same records, table and guarantees as the sqlx path (`once`, with feature
    /// `sqlx-mysql`). Each attempt, in one transaction: claim the key, then read the row
    /// locked; a completed record (`ok` or `error`) is returned without calling `f`;
    /// otherwise `f` runs under `SAVEPOINT txretry_once`, its value is recorded (and
    /// returned as read back from its JSON), and an error the policy judges permanent is
    /// rolled back to the savepoint and recorded as a [`BusinessError`]. Other errors go to
    /// the runner, which rolls the whole attempt back (the claim too) and retries. The
    /// table is created the first time it is found missing ([`Once::migrate_mysql_async`]).
    ///
    /// # The claim
    /// | claim | read |
    /// |---|---|
    /// | `INSERT INTO … (tool, call_key, status, created_at) VALUES (?, ?, 'pending', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE status = status` (an exclusive lock on a duplicate: waiters queue instead of deadlocking, as `INSERT IGNORE`'s shared locks would) | `SELECT status, output, error_kind, error_message … WHERE tool = ? AND call_key = ? FOR UPDATE` |
    ///
    /// When a claim rolls back (a transient failure in `f`) while duplicates queue behind
    /// it, InnoDB ends all but one of the queued claims as deadlocks (1213); the policy
    /// retries them, and they queue behind the one claim that went through. With a policy
    /// of one attempt they would fail instead.
    ///
    /// # A lost COMMIT answer
    /// The runner takes each attempt's connection from `pool`: when the answer to COMMIT
    /// is lost (2013, a connection-class error), the attempt is ambiguous and, the
    /// transaction being idempotent, retried on another connection under the same key; the
    /// claim then finds the record if the COMMIT landed, and runs the work if it did not.
    ///
    /// `f` is called once per attempt with a fresh transaction, like the runner's closure:
    /// write `async move |tx| …` over owned values and run its queries on `tx`. Its error
    /// type `E` is one that `mysql_async::Error` converts into; return a [`BusinessError`]
    /// (through `E`, e.g. a `BoxError`) to choose the recorded kind.
    ///
    /// # Errors
    /// - [`OnceError::Business`]: the call's outcome is a business error (now or before);
    /// - [`OnceError::Failed`]: the transaction did not commit, or may not have;
    /// - [`OnceError::Refused`]: the tool is not declared `once`, or this is the run's
    ///   second transaction ([`OnceRefused`]); nothing ran;
    /// - [`OnceError::Table`]: the table was missing and could not be created.
    ///
    /// ```no_run
    /// # fn demo(pool: mysql_async::Pool) -> Result<txretry_tool::Toolbox, txretry_tool::BuildError> {
    /// use mysql_async::prelude::Queryable;
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    /// use txretry_tool::{BoxError, BusinessError, Once, Tool, ToolContext, Toolbox};
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// struct PlaceOrder { item: i64, qty: i32 }
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Placed { order_id: u64 }
    ///
    /// let place = Tool::new("place_order", "Order an item.", move |ctx: ToolContext, args: PlaceOrder| {
    ///     let pool = pool.clone();
    ///     async move {
    ///         let placed = ctx
    ///             .once_mysql_async(&pool, async move |tx| {
    ///                 tx.exec_drop(
    ///                     "UPDATE item SET stock = stock - ? WHERE id = ? AND stock >= ?",
    ///                     (args.qty, args.item, args.qty),
    ///                 )
    ///                 .await?;
    ///                 if tx.affected_rows() == 0 {
    ///                     // Rolled back to the savepoint, recorded, and answered to every repeat.
    ///                     let refusal = BusinessError::new("out_of_stock", "not enough stock");
    ///                     return Err(BoxError::from(refusal));
    ///                 }
    ///                 tx.exec_drop("INSERT INTO orders (item) VALUES (?)", (args.item,)).await?;
    ///                 let order_id = tx.last_insert_id().unwrap_or_default();
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
    pub fn once_mysql_async<T, E, Via, F>(
        &self,
        pool: &Pool,
        f: F,
    ) -> impl Future<Output = Result<T, OnceError<E>>> + use<T, E, Via, F>
    where
        T: Serialize + DeserializeOwned,
        F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
        E: From<mysql_async::Error> + AsError<Via>,
    {
        self.once_mysql_async_with(pool, &TxOptions::new(), f)
    }

    /// [`once_mysql_async`](ToolContext::once_mysql_async) with options for the
    /// transaction (isolation level, contention keys). The transaction is always read-write
    /// and idempotent: `read_only` and `idempotent` are overridden.
    ///
    /// ```no_run
    /// # async fn demo(ctx: txretry_tool::ToolContext, pool: mysql_async::Pool) -> Result<(), txretry_tool::BoxError> {
    /// use mysql_async::prelude::Queryable;
    /// use txretry_core::{Isolation, TxOptions};
    ///
    /// let options = TxOptions::new().isolation(Isolation::ReadCommitted);
    /// ctx.once_mysql_async_with(&pool, &options, async move |tx| {
    ///     tx.query_drop("INSERT INTO ledger (amount) VALUES (10)").await
    /// })
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub fn once_mysql_async_with<T, E, Via, F>(
        &self,
        pool: &Pool,
        options: &TxOptions,
        f: F,
    ) -> impl Future<Output = Result<T, OnceError<E>>> + use<T, E, Via, F>
    where
        T: Serialize + DeserializeOwned,
        F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
        E: From<mysql_async::Error> + AsError<Via>,
    {
        let call = Call::new(self, options);
        let pool = pool.clone();
        async move {
            let (run, job) = call.begin(Dialect::MySql)?;
            let done = run_transaction(&pool, call.options(), &job, &run, f).await?;
            finish(&run, done)
        }
    }
}
