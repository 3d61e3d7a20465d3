//! `ToolContext::once`: a tool call's one transaction, run exactly once per key.

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::{Pool, Transaction};
use txretry_core::{AsError, TxOptions};

use super::OnceBackend;
use super::transaction::run_transaction;
use crate::once::OnceError;
use crate::once::record::{Call, finish};
#[cfg(doc)]
use txretry_core::TxError;

use crate::ToolContext;
#[cfg(doc)]
use crate::{BusinessError, Once, OnceRefused};

impl ToolContext {
    /// Runs the call's one transaction exactly once per idempotency key, for a tool
    /// declared [`once`](crate::Tool::once): `f` does the tool's database work in the
    /// transaction it is given, and the call's outcome is recorded in the same transaction.
    /// A call whose key already has a record gets the recorded outcome, and `f` does not
    /// run.
    ///
    /// The transaction is run by txretry-sqlx's runner under [`ToolContext::policy`] (the
    /// invocation's one budget), with [`TxOptions::idempotent`]: the record makes an
    /// ambiguous COMMIT safe to retry. Each attempt, in one transaction:
    ///
    /// 1. **claim** the key: insert a `pending` row for `(tool, key)` unless one exists, then
    ///    read the row (locked). A concurrent call with the same key waits on the
    ///    database's own lock on that row until the first one commits or rolls back.
    /// 2. a **completed record** (`ok` or `error`): its outcome is returned, `f` is not
    ///    called;
    /// 3. else (the `pending` row is this transaction's) **`SAVEPOINT txretry_once`**, then
    ///    `f`:
    ///    - `Ok(value)`: the value is serialized to JSON and recorded (`status = 'ok'`), and
    ///      the value returned is the one deserialized from that JSON — what every repeated
    ///      call gets too;
    ///    - `Err` that the policy judges **permanent** (a business refusal, a constraint):
    ///      `ROLLBACK TO SAVEPOINT txretry_once` undoes `f`'s writes, the error is recorded
    ///      (`status = 'error'`, as a [`BusinessError`]: kind and message), and it is
    ///      committed; the call returns [`OnceError::Business`], the same as any repeated
    ///      call gets;
    ///    - any other `Err` (deadlock, serialization failure, lost connection…): returned
    ///      to the runner, which rolls the whole transaction back (the claim too) and
    ///      retries within the budget; nothing is recorded.
    /// 4. COMMIT (the runner's). A `pending` row therefore never commits.
    ///
    /// A repeated call, an MCP client's re-send or a retry after an ambiguous COMMIT
    /// therefore either finds the record (the first commit landed) or runs `f` (it did
    /// not). The table is created the first time it is found missing ([`Once::migrate`]).
    ///
    /// `f` is called once per attempt with a fresh transaction, like a runner's closure:
    /// write `async move |tx| …` over owned values, and run its queries on `&mut **tx`. Its
    /// error type `E` is one that sqlx's errors convert into (`sqlx::Error`, your
    /// `thiserror` enum, `BoxError`, `anyhow::Error`); return a [`BusinessError`] (through
    /// `E`) to choose the recorded kind.
    ///
    /// The transaction begins with the database's defaults; see
    /// [`once_with`](ToolContext::once_with).
    ///
    /// # The records' table
    /// `txretry_tool_calls` by default ([`Once::table`]); one row per `(tool, call_key)`.
    /// Postgres:
    /// ```sql
    /// CREATE TABLE IF NOT EXISTS "txretry_tool_calls" (
    ///     tool text NOT NULL,
    ///     call_key text NOT NULL,
    ///     status text NOT NULL CHECK (status IN ('pending', 'ok', 'error')),
    ///     output text,
    ///     error_kind text,
    ///     error_message text,
    ///     created_at timestamptz NOT NULL DEFAULT now(),
    ///     PRIMARY KEY (tool, call_key)
    /// );
    /// CREATE INDEX IF NOT EXISTS "txretry_tool_calls_created_at" ON "txretry_tool_calls" (created_at)
    /// ```
    /// MySQL / MariaDB (binary key columns: keys compare byte for byte, whatever the
    /// server's collation):
    /// ```sql
    /// CREATE TABLE IF NOT EXISTS `txretry_tool_calls` (
    ///     tool VARBINARY(64) NOT NULL,
    ///     call_key VARBINARY(255) NOT NULL,
    ///     status VARCHAR(7) CHARACTER SET ascii NOT NULL,
    ///     output LONGTEXT CHARACTER SET utf8mb4,
    ///     error_kind TEXT CHARACTER SET utf8mb4,
    ///     error_message MEDIUMTEXT CHARACTER SET utf8mb4,
    ///     created_at DATETIME(6) NOT NULL,
    ///     PRIMARY KEY (tool, call_key),
    ///     KEY txretry_created_at (created_at)
    /// ) ENGINE=InnoDB
    /// ```
    /// SQLite:
    /// ```sql
    /// CREATE TABLE IF NOT EXISTS "txretry_tool_calls" (
    ///     tool TEXT NOT NULL,
    ///     call_key TEXT NOT NULL,
    ///     status TEXT NOT NULL CHECK (status IN ('pending', 'ok', 'error')),
    ///     output TEXT,
    ///     error_kind TEXT,
    ///     error_message TEXT,
    ///     created_at TEXT NOT NULL,
    ///     PRIMARY KEY (tool, call_key)
    /// );
    /// CREATE INDEX IF NOT EXISTS "txretry_tool_calls_created_at" ON "txretry_tool_calls" (created_at)
    /// ```
    ///
    /// # The claim, per database
    /// | database | claim | read |
    /// |---|---|---|
    /// | Postgres | `INSERT … VALUES ($1, $2, 'pending') ON CONFLICT (tool, call_key) DO NOTHING` (waits for an uncommitted claim of the key) | `SELECT … FOR UPDATE` |
    /// | MySQL / MariaDB | `INSERT … VALUES (?, ?, 'pending', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE status = status` (an exclusive lock on a duplicate: waiters queue instead of deadlocking, as `INSERT IGNORE`'s shared locks would) | `SELECT … FOR UPDATE` |
    /// | SQLite | `INSERT … ON CONFLICT (tool, call_key) DO NOTHING` (the write lock, taken by the runner's `BEGIN IMMEDIATE`, already serialises writers) | `SELECT …` |
    ///
    /// When a claim rolls back (a transient failure in `f`) while duplicates queue behind
    /// it, MySQL/MariaDB leave the duplicates' locks on the gap the row leaves, and InnoDB
    /// ends all but one of their claims as deadlocks (1213). The policy retries them, and
    /// they queue behind the one claim that went through: with a policy of one attempt
    /// they would fail instead (tested on MariaDB 10.11, 15 duplicates: 14 deadlocks, one
    /// retry each). Postgres and SQLite hand the key to one waiter without an error.
    ///
    /// # Errors
    /// - [`OnceError::Business`]: the call's outcome is a business error (now or before);
    /// - [`OnceError::Failed`]: the transaction did not commit, or may not have (the
    ///   runner's [`TxError`]; nothing recorded);
    /// - [`OnceError::Refused`]: the tool is not declared `once`, or this is the run's
    ///   second transaction ([`OnceRefused`]); nothing ran;
    /// - [`OnceError::Table`]: the table was missing and could not be created.
    ///
    /// ```no_run
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # fn demo(pool: sqlx::PgPool) -> Result<txretry_tool::Toolbox, txretry_tool::BuildError> {
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
    ///     let pool = pool.clone();
    ///     async move {
    ///         let placed = ctx.once(&pool, async move |tx| {
    ///             let left: i32 = sqlx::query_scalar(
    ///                 "UPDATE item SET stock = stock - $1 WHERE id = $2 RETURNING stock",
    ///             )
    ///             .bind(args.qty)
    ///             .bind(args.item)
    ///             .fetch_one(&mut **tx)
    ///             .await?;
    ///             if left < 0 {
    ///                 // Rolled back to the savepoint, recorded, and answered to every repeat.
    ///                 let refusal = BusinessError::new("out_of_stock", "not enough stock");
    ///                 return Err(BoxError::from(refusal));
    ///             }
    ///             let order_id = sqlx::query_scalar(
    ///                 "INSERT INTO orders (item) VALUES ($1) RETURNING id",
    ///             )
    ///             .bind(args.item)
    ///             .fetch_one(&mut **tx)
    ///             .await?;
    ///             Ok(Placed { order_id })
    ///         })
    ///         .await?;
    ///         Ok::<_, BoxError>(placed)
    ///     }
    /// })
    /// .once(Once::new());
    /// Toolbox::builder().tool(place).build()
    /// # }
    /// ```
    pub fn once<DB, T, E, Via, F>(
        &self,
        pool: &Pool<DB>,
        f: F,
    ) -> impl Future<Output = Result<T, OnceError<E>>> + use<DB, T, E, Via, F>
    where
        DB: OnceBackend,
        T: Serialize + DeserializeOwned,
        F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
        E: From<sqlx::Error> + AsError<Via>,
    {
        self.once_with(pool, &TxOptions::new(), f)
    }

    /// [`once`](ToolContext::once) with options for the transaction (isolation level,
    /// SQLite's BEGIN mode, contention keys). The transaction is always read-write and
    /// idempotent: `read_only` and `idempotent` are overridden.
    ///
    /// Under Postgres `REPEATABLE READ` or `SERIALIZABLE`, a duplicate that waited for the
    /// first call's claim fails with a serialization failure (`40001`) when that call
    /// commits, and finds the record on its retry: each such duplicate spends a retry of its
    /// budget. `READ COMMITTED` (the default) has it find the record at once.
    pub fn once_with<DB, T, E, Via, F>(
        &self,
        pool: &Pool<DB>,
        options: &TxOptions,
        f: F,
    ) -> impl Future<Output = Result<T, OnceError<E>>> + use<DB, T, E, Via, F>
    where
        DB: OnceBackend,
        T: Serialize + DeserializeOwned,
        F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
        E: From<sqlx::Error> + AsError<Via>,
    {
        let call = Call::new(self, options);
        let pool = pool.clone();
        async move {
            let (run, job) = call.begin(DB::DIALECT)?;
            let done = run_transaction(&pool, &job.policy, call.options(), &job, &run, f).await?;
            finish(&run, done)
        }
    }
}
