//! `ToolContext::once_rusqlite`: a blocking tool call's one transaction on a rusqlite
//! connection, run exactly once per key.

use rusqlite::{Connection, Transaction};
use serde::Serialize;
use serde::de::DeserializeOwned;
use txretry_core::{AsError, TxOptions};

use super::transaction::run_transaction;
use crate::once::record::{Call, finish};
#[cfg(doc)]
use crate::{BusinessError, Once, OnceRefused};
use crate::{Dialect, OnceError, ToolContext};

impl ToolContext {
    /// `ToolContext::once` on a rusqlite connection, **blocking** (feature `rusqlite`):
    /// runs the call's one transaction exactly once per idempotency key, for a tool
    /// declared [`once`](crate::Tool::once), with txretry-rusqlite's runner under
    /// [`ToolContext::policy`] (the invocation's one budget). Call it from a
    /// [`Tool::blocking`](crate::Tool::blocking) handler (it runs on tokio's blocking
    /// threads), never from async code.
    ///
    /// The same records, table and guarantees as the sqlx path (`once`, with feature
    /// `sqlx-sqlite`). Each attempt, in one transaction begun `IMMEDIATE` (the runner's
    /// default: the write lock up front, so a duplicate waits in SQLite's busy handler, as
    /// long as the connection's `busy_timeout`): claim the key, then read the row; a
    /// completed record (`ok` or `error`) is returned without calling `f`; otherwise `f`
    /// runs under `SAVEPOINT txretry_once`, its value is recorded (and returned as read
    /// back from its JSON), and an error the policy judges permanent is rolled back to the
    /// savepoint and recorded as a [`BusinessError`]. Other errors (`SQLITE_BUSY`…) go to
    /// the runner, which rolls the whole attempt back (the claim too) and retries. The
    /// table is created the first time it is found missing ([`Once::migrate_rusqlite`]).
    ///
    /// # The claim
    /// | claim | read |
    /// |---|---|
    /// | `INSERT INTO … (tool, call_key, status, created_at) VALUES (?, ?, 'pending', strftime('%Y-%m-%d %H:%M:%f', 'now')) ON CONFLICT (tool, call_key) DO NOTHING` (the write lock, taken by `BEGIN IMMEDIATE`, already serialises writers) | `SELECT status, output, error_kind, error_message … WHERE tool = ? AND call_key = ?` |
    ///
    /// # COMMIT
    /// SQLite answers COMMIT in process, always with a result code: a COMMIT is never
    /// ambiguous here, and a failed one was rolled back (the runner retries it when
    /// transient). What can be lost is the call's answer after the COMMIT (the process
    /// dies, the caller gives up): the call re-sent with the same key gets the recorded
    /// outcome. A process that dies before COMMIT leaves no record (SQLite rolls the
    /// transaction back on recovery), and the re-sent call runs the work.
    ///
    /// `f` is called once per attempt with a fresh transaction, like the runner's closure.
    /// Its error type `E` is one that `rusqlite::Error` converts into; return a
    /// [`BusinessError`] (through `E`, e.g. a `BoxError`) to choose the recorded kind.
    /// Check [`ToolContext::is_cancelled`] in long work: a blocking attempt that timed out
    /// cannot be stopped from outside.
    ///
    /// # Errors
    /// - [`OnceError::Business`]: the call's outcome is a business error (now or before);
    /// - [`OnceError::Failed`]: the transaction did not commit;
    /// - [`OnceError::Refused`]: the tool is not declared `once`, or this is the run's
    ///   second transaction ([`OnceRefused`]); nothing ran;
    /// - [`OnceError::Table`]: the table was missing and could not be created.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    ///
    /// use schemars::JsonSchema;
    /// use serde::Deserialize;
    /// use txretry_tool::{BoxError, BusinessError, Caller, Once, Tool, ToolContext, Toolbox};
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// struct Refund { order_id: i64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let conn = rusqlite::Connection::open_in_memory()?;
    /// conn.execute_batch("CREATE TABLE refunds (order_id INTEGER NOT NULL);")?;
    /// let conn = Arc::new(Mutex::new(conn));
    ///
    /// let db = Arc::clone(&conn);
    /// let refund = Tool::blocking("refund", "Refund an order.", move |ctx: ToolContext, args: Refund| {
    ///     let mut conn = db.lock().unwrap();
    ///     let refunded = ctx.once_rusqlite(&mut conn, |tx| {
    ///         if args.order_id <= 0 {
    ///             // Recorded, and answered to every repeat.
    ///             return Err(BoxError::from(BusinessError::new("no_order", "no such order")));
    ///         }
    ///         tx.execute("INSERT INTO refunds (order_id) VALUES (?1)", [args.order_id])?;
    ///         Ok(args.order_id)
    ///     })?;
    ///     Ok::<_, BoxError>(refunded)
    /// })
    /// .once(Once::new());
    /// let toolbox = Toolbox::builder().tool(refund).build()?;
    ///
    /// let caller = Caller::new(["support"]);
    /// let args = serde_json::json!({"order_id": 7});
    /// toolbox.invoke(&caller, "refund", args.clone(), "call-1").await?;
    /// toolbox.invoke(&caller, "refund", args, "call-1").await?; // the same call: replayed
    /// let n: i64 = conn.lock().unwrap().query_row("SELECT count(*) FROM refunds", [], |r| r.get(0))?;
    /// assert_eq!(n, 1);
    /// # Ok(()) }
    /// ```
    pub fn once_rusqlite<T, E, Via, F>(
        &self,
        conn: &mut Connection,
        f: F,
    ) -> Result<T, OnceError<E>>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(&mut Transaction<'_>) -> Result<T, E>,
        E: From<rusqlite::Error> + AsError<Via>,
    {
        self.once_rusqlite_with(conn, &TxOptions::new(), f)
    }

    /// [`once_rusqlite`](ToolContext::once_rusqlite) with options for the transaction
    /// (SQLite's BEGIN mode: `IMMEDIATE` unless told otherwise). The transaction is always
    /// read-write and idempotent: `read_only` and `idempotent` are overridden. Under
    /// `SqliteBegin::Deferred`, a duplicate whose read went stale fails with
    /// `SQLITE_BUSY_SNAPSHOT` and finds the record on its retry (one retry of its budget).
    ///
    /// ```no_run
    /// # fn demo(ctx: txretry_tool::ToolContext, conn: &mut rusqlite::Connection) -> Result<(), txretry_tool::BoxError> {
    /// use txretry_core::{SqliteBegin, TxOptions};
    ///
    /// let exclusive = TxOptions::new().sqlite_begin(SqliteBegin::Exclusive);
    /// ctx.once_rusqlite_with(conn, &exclusive, |tx| {
    ///     tx.execute("INSERT INTO ledger (amount) VALUES (10)", [])
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn once_rusqlite_with<T, E, Via, F>(
        &self,
        conn: &mut Connection,
        options: &TxOptions,
        f: F,
    ) -> Result<T, OnceError<E>>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(&mut Transaction<'_>) -> Result<T, E>,
        E: From<rusqlite::Error> + AsError<Via>,
    {
        let call = Call::new(self, options);
        let (run, job) = call.begin(Dialect::Sqlite)?;
        let done = run_transaction(conn, call.options(), &job, &run, f)?;
        finish(&run, done)
    }
}
