//! `ToolContext::once` on sqlx pools: claim the key, run the handler's work, record the
//! outcome — one transaction, run by txretry-sqlx's runner under the invocation's policy.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::{Pool, Transaction};
use txretry_core::{AsError, Outcome, RetryPolicy, TxError, TxOptions, Verdict};

use super::{BusinessError, Dialect, Once, OnceRefused, Statements};
use crate::ToolContext;

/// The savepoint the handler's work runs under, so that a business error can undo that
/// work and still commit its record.
const SAVEPOINT: &str = "SAVEPOINT txretry_once";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT txretry_once";

/// Postgres caps interval arithmetic; no record is that old anyway (about 317 years).
const MAX_AGE_SECS: f64 = 1e10;

/// A record as it is read back: `status, output, error_kind, error_message`.
type Record = (String, Option<String>, Option<String>, Option<String>);

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A sqlx database `ToolContext::once` can record calls in: [`Postgres`](sqlx::Postgres)
/// (feature `sqlx-postgres`), [`MySql`](sqlx::MySql) (feature `sqlx-mysql`, MySQL 8 and
/// MariaDB) and `Sqlite` (feature `sqlx-sqlite`). Sealed; its items are internal.
pub trait OnceBackend: txretry_sqlx::Backend + sealed::Sealed {
    /// The SQL dialect of the records' statements.
    #[doc(hidden)]
    const DIALECT: Dialect;

    /// Runs one of the records' statements with string binds; the rows it affected.
    #[doc(hidden)]
    fn execute<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Arc<str>,
        binds: &'c [&'c str],
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'c;

    /// Reads a record (`status, output, error_kind, error_message`), if there is one.
    #[doc(hidden)]
    fn fetch_record<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Arc<str>,
        binds: &'c [&'c str],
    ) -> impl Future<Output = Result<Option<Record>, sqlx::Error>> + Send + 'c;

    /// Runs a fixed statement (a savepoint).
    #[doc(hidden)]
    fn fixed<'c>(
        conn: &'c mut Self::Connection,
        sql: &'static str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c;

    /// Creates the table and its index if they do not exist.
    #[doc(hidden)]
    fn migrate<'c>(
        pool: &'c Pool<Self>,
        ddl: &'c Arc<str>,
        table: &'c str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c;

    /// Deletes the records created more than `older_than` ago; how many.
    #[doc(hidden)]
    fn prune<'c>(
        pool: &'c Pool<Self>,
        sql: &'c Arc<str>,
        older_than: Duration,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'c;

    /// Whether `error` says the table does not exist.
    #[doc(hidden)]
    fn is_missing_table(error: &sqlx::Error) -> bool;
}

/// `execute`, `fetch_record` and `fixed`: the same code for every database.
macro_rules! shared_methods {
    ($db:ty, $conn:ty) => {
        async fn execute<'c>(
            conn: &'c mut $conn,
            sql: &'c Arc<str>,
            binds: &'c [&'c str],
        ) -> Result<u64, sqlx::Error> {
            let mut query = sqlx::query::<$db>(sqlx::AssertSqlSafe(Arc::clone(sql)));
            for bind in binds {
                query = query.bind(*bind);
            }
            Ok(query.execute(conn).await?.rows_affected())
        }

        async fn fetch_record<'c>(
            conn: &'c mut $conn,
            sql: &'c Arc<str>,
            binds: &'c [&'c str],
        ) -> Result<Option<Record>, sqlx::Error> {
            let mut query = sqlx::query_as::<$db, Record>(sqlx::AssertSqlSafe(Arc::clone(sql)));
            for bind in binds {
                query = query.bind(*bind);
            }
            query.fetch_optional(conn).await
        }

        async fn fixed(conn: &mut $conn, sql: &'static str) -> Result<(), sqlx::Error> {
            sqlx::raw_sql(sql).execute(conn).await.map(drop)
        }
    };
}

#[cfg(feature = "sqlx-postgres")]
impl sealed::Sealed for sqlx::Postgres {}

#[cfg(feature = "sqlx-postgres")]
impl OnceBackend for sqlx::Postgres {
    const DIALECT: Dialect = Dialect::Postgres;

    shared_methods!(sqlx::Postgres, sqlx::PgConnection);

    /// In a transaction that holds an advisory lock named after the table: concurrent
    /// `CREATE TABLE IF NOT EXISTS` of one table can fail on Postgres (a unique violation
    /// in its catalog), so creators take turns.
    async fn migrate<'c>(
        pool: &'c sqlx::PgPool,
        ddl: &'c Arc<str>,
        table: &'c str,
    ) -> Result<(), sqlx::Error> {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(format!("txretry_tool_calls:{table}"))
            .execute(&mut *tx)
            .await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(Arc::clone(ddl)))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    async fn prune<'c>(
        pool: &'c sqlx::PgPool,
        sql: &'c Arc<str>,
        older_than: Duration,
    ) -> Result<u64, sqlx::Error> {
        let seconds = older_than.as_secs_f64().min(MAX_AGE_SECS);
        let done = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(sql)))
            .bind(seconds)
            .execute(pool)
            .await?;
        Ok(done.rows_affected())
    }

    fn is_missing_table(error: &sqlx::Error) -> bool {
        // undefined_table
        error
            .as_database_error()
            .and_then(|e| e.code())
            .is_some_and(|code| code == "42P01")
    }
}

#[cfg(feature = "sqlx-mysql")]
impl sealed::Sealed for sqlx::MySql {}

#[cfg(feature = "sqlx-mysql")]
impl OnceBackend for sqlx::MySql {
    const DIALECT: Dialect = Dialect::MySql;

    shared_methods!(sqlx::MySql, sqlx::MySqlConnection);

    /// One `CREATE TABLE IF NOT EXISTS` (the index is part of it).
    async fn migrate<'c>(
        pool: &'c sqlx::MySqlPool,
        ddl: &'c Arc<str>,
        _: &'c str,
    ) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(Arc::clone(ddl)))
            .execute(pool)
            .await
            .map(drop)
    }

    async fn prune<'c>(
        pool: &'c sqlx::MySqlPool,
        sql: &'c Arc<str>,
        older_than: Duration,
    ) -> Result<u64, sqlx::Error> {
        // Whole microseconds; MAX_AGE_SECS * 1e6 fits an i64.
        let micros = (older_than.as_secs_f64().min(MAX_AGE_SECS) * 1e6) as i64;
        let done = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(sql)))
            .bind(micros)
            .execute(pool)
            .await?;
        Ok(done.rows_affected())
    }

    fn is_missing_table(error: &sqlx::Error) -> bool {
        // ER_NO_SUCH_TABLE
        error
            .as_database_error()
            .and_then(|e| e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
            .is_some_and(|e| e.number() == 1146)
    }
}

#[cfg(feature = "sqlx-sqlite")]
impl sealed::Sealed for sqlx_sqlite::Sqlite {}

#[cfg(feature = "sqlx-sqlite")]
impl OnceBackend for sqlx_sqlite::Sqlite {
    const DIALECT: Dialect = Dialect::Sqlite;

    shared_methods!(sqlx_sqlite::Sqlite, sqlx_sqlite::SqliteConnection);

    /// `CREATE TABLE IF NOT EXISTS` and `CREATE INDEX IF NOT EXISTS`, in one transaction.
    async fn migrate<'c>(
        pool: &'c sqlx::Pool<sqlx_sqlite::Sqlite>,
        ddl: &'c Arc<str>,
        _: &'c str,
    ) -> Result<(), sqlx::Error> {
        let mut tx = pool.begin().await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(Arc::clone(ddl)))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    async fn prune<'c>(
        pool: &'c sqlx::Pool<sqlx_sqlite::Sqlite>,
        sql: &'c Arc<str>,
        older_than: Duration,
    ) -> Result<u64, sqlx::Error> {
        let modifier = format!("-{:.6} seconds", older_than.as_secs_f64().min(MAX_AGE_SECS));
        let done = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(sql)))
            .bind(modifier)
            .execute(pool)
            .await?;
        Ok(done.rows_affected())
    }

    fn is_missing_table(error: &sqlx::Error) -> bool {
        error
            .as_database_error()
            .is_some_and(|e| e.message().starts_with("no such table"))
    }
}

impl Once {
    /// Creates the records' table and its index on `created_at` if they do not exist (the
    /// DDL of [`Once::ddl`], with `IF NOT EXISTS`). Safe to run concurrently and repeatedly.
    ///
    /// Optional: `ToolContext::once` creates the table itself the first time it finds it
    /// missing. Run it at startup to keep DDL out of the first call, or create the table
    /// with your own migrations instead.
    ///
    /// # Errors
    /// The database's, e.g. when the user may not create tables.
    pub async fn migrate<DB: OnceBackend>(&self, pool: &Pool<DB>) -> Result<(), sqlx::Error> {
        DB::migrate(pool, &self.statements(DB::DIALECT).ddl, self.table_name()).await
    }

    /// Deletes the records created more than `older_than` ago, and returns how many. A
    /// call repeated with the key of a pruned record runs again: keep records for longer
    /// than any caller may repeat a call.
    ///
    /// The age is measured with the database's clock (`created_at` is set by the database
    /// when the key is first claimed, in UTC on MySQL and SQLite).
    ///
    /// # Errors
    /// The database's (e.g. the table does not exist).
    pub async fn prune<DB: OnceBackend>(
        &self,
        pool: &Pool<DB>,
        older_than: Duration,
    ) -> Result<u64, sqlx::Error> {
        DB::prune(pool, &self.statements(DB::DIALECT).prune, older_than).await
    }
}

/// Why [`ToolContext::once`] did not return the tool's output.
#[non_exhaustive]
#[derive(Debug)]
pub enum OnceError<E> {
    /// The call's outcome is this business error: the closure returned an error the policy
    /// judged permanent, its work was rolled back and the error recorded; or an earlier
    /// call with the same key recorded it. The same value either way. Return it from the
    /// handler (`?`): the call fails with [`FailureKind::Business`](crate::FailureKind).
    Business(BusinessError),
    /// The transaction did not commit (or may not have): transient failures outlasted the
    /// budget, a COMMIT stayed ambiguous, or a statement failed permanently outside the
    /// closure's work. Nothing was recorded; a later call with the same key runs the work.
    /// The runner's error, with its outcome.
    Failed(TxError<E>),
    /// The call broke the rules of `once` (see [`OnceRefused`]); nothing ran.
    Refused(OnceRefused),
    /// The records' table was missing and could not be created.
    Table(sqlx::Error),
}

impl<E> OnceError<E> {
    /// The business error, if that is the outcome.
    pub fn business(&self) -> Option<&BusinessError> {
        match self {
            OnceError::Business(business) => Some(business),
            _ => None,
        }
    }

    /// The runner's outcome, when the transaction failed.
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            OnceError::Failed(error) => Some(error.outcome()),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for OnceError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OnceError::Business(business) => fmt::Display::fmt(business, f),
            OnceError::Failed(error) => fmt::Display::fmt(error, f),
            OnceError::Refused(refused) => fmt::Display::fmt(refused, f),
            OnceError::Table(_) => {
                f.write_str("the table of recorded tool calls could not be created")
            }
        }
    }
}

impl<E: fmt::Debug + fmt::Display> Error for OnceError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            OnceError::Failed(error) => error.source(),
            OnceError::Table(error) => Some(error),
            OnceError::Business(_) | OnceError::Refused(_) => None,
        }
    }
}

/// What the transaction committed: the output (recorded now, or read back), or the
/// business error.
enum Done<T> {
    Output(T),
    Business(BusinessError),
}

/// What one `once` transaction needs, shared with each of its attempts.
struct Job {
    statements: Statements,
    tool: Arc<str>,
    key: Arc<str>,
    policy: RetryPolicy,
    /// The claim found no table.
    missing_table: AtomicBool,
}

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
    pub fn once<DB, T, E, V, F>(
        &self,
        pool: &Pool<DB>,
        f: F,
    ) -> impl Future<Output = Result<T, OnceError<E>>> + use<DB, T, E, V, F>
    where
        DB: OnceBackend,
        T: Serialize + DeserializeOwned,
        F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
        E: From<sqlx::Error> + AsError<V>,
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
    pub fn once_with<DB, T, E, V, F>(
        &self,
        pool: &Pool<DB>,
        options: &TxOptions,
        f: F,
    ) -> impl Future<Output = Result<T, OnceError<E>>> + use<DB, T, E, V, F>
    where
        DB: OnceBackend,
        T: Serialize + DeserializeOwned,
        F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
        E: From<sqlx::Error> + AsError<V>,
    {
        let run = self.once_run().cloned();
        let policy = self.policy().clone();
        let tool: Arc<str> = self.tool().into();
        let pool = pool.clone();
        let options = options.clone().idempotent(true).read_only(false);
        async move {
            let Some(run) = run else {
                return Err(OnceError::Refused(OnceRefused::NotDeclared));
            };
            run.begin().map_err(OnceError::Refused)?;
            let job = Arc::new(Job {
                statements: run.once.statements(DB::DIALECT).clone(),
                tool,
                key: Arc::clone(&run.key),
                policy: policy.clone(),
                missing_table: AtomicBool::new(false),
            });
            let done = once_transaction(&pool, &policy, &options, &job, &run.once, f).await?;
            match done {
                Done::Output(value) => {
                    run.ended(false);
                    Ok(value)
                }
                Done::Business(business) => {
                    run.ended(true);
                    Err(OnceError::Business(business))
                }
            }
        }
    }
}

/// Runs the once transaction; when its claim finds no table, creates it and runs it once
/// more.
async fn once_transaction<DB, T, E, V, F>(
    pool: &Pool<DB>,
    policy: &RetryPolicy,
    options: &TxOptions,
    job: &Arc<Job>,
    once: &Once,
    f: F,
) -> Result<Done<T>, OnceError<E>>
where
    DB: OnceBackend,
    T: Serialize + DeserializeOwned,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<V>,
{
    // The closure is handed to each runner call, and taken back after (the runner's
    // closure must own what it captures for its future to be `Send`).
    let slot = Arc::new(Mutex::new(Some(f)));
    let mut table_created = false;
    loop {
        let (job_here, slot_here) = (Arc::clone(job), Arc::clone(&slot));
        let result = txretry_sqlx::transaction_with(pool, policy, options, async move |tx| {
            let taken = slot_here
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let Some(mut f) = taken else {
                unreachable!("a runner runs one attempt at a time");
            };
            let result = attempt(tx, &mut f, &job_here).await;
            *slot_here.lock().unwrap_or_else(PoisonError::into_inner) = Some(f);
            result
        })
        .await;
        match result {
            Ok(done) => return Ok(done),
            Err(error) if !table_created && job.missing_table.swap(false, Ordering::AcqRel) => {
                drop(error);
                // The failed claim is this layer's business, not the invocation's.
                if let Some(scope) = policy.scope() {
                    drop(scope.take_last_give_up());
                }
                DB::migrate(pool, &once.statements(DB::DIALECT).ddl, once.table_name())
                    .await
                    .map_err(OnceError::Table)?;
                table_created = true;
            }
            Err(error) => return Err(OnceError::Failed(error)),
        }
    }
}

/// One attempt: claim, then replay or run `f` and record.
async fn attempt<DB, T, E, V, F>(
    tx: &mut Transaction<'_, DB>,
    f: &mut F,
    job: &Job,
) -> Result<Done<T>, E>
where
    DB: OnceBackend,
    T: Serialize + DeserializeOwned,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<V>,
{
    let sql = &job.statements;
    let who: [&str; 2] = [&job.tool, &job.key];
    // A record deleted (pruned) between the claim and the read is claimed again.
    let mut claimed = None;
    for _ in 0..3 {
        if let Err(error) = DB::execute(&mut **tx, &sql.claim, &who).await {
            if DB::is_missing_table(&error) {
                job.missing_table.store(true, Ordering::Release);
            }
            return Err(E::from(error));
        }
        claimed = DB::fetch_record(&mut **tx, &sql.select, &who).await?;
        if claimed.is_some() {
            break;
        }
    }
    let Some((status, output, kind, message)) = claimed else {
        return Err(E::from(sqlx::Error::RowNotFound));
    };
    match status.as_str() {
        "pending" => {}
        "ok" => {
            let output = output.unwrap_or_default();
            return serde_json::from_str(&output)
                .map(Done::Output)
                .map_err(|e| E::from(sqlx::Error::Decode(Box::new(e))));
        }
        "error" => {
            return Ok(Done::Business(BusinessError::new(
                kind.unwrap_or_default(),
                message.unwrap_or_default(),
            )));
        }
        other => {
            return Err(E::from(sqlx::Error::Decode(
                format!("a recorded tool call has the unknown status {other:?}").into(),
            )));
        }
    }

    // The pending row is this transaction's own: run the work.
    DB::fixed(&mut **tx, SAVEPOINT).await?;
    match f(&mut *tx).await {
        Ok(value) => {
            let json = serde_json::to_string(&value)
                .map_err(|e| E::from(sqlx::Error::Encode(Box::new(e))))?;
            // What every repeated call will get: the value read back from its record.
            let value = serde_json::from_str(&json)
                .map_err(|e| E::from(sqlx::Error::Decode(Box::new(e))))?;
            DB::execute(&mut **tx, &sql.record_output, &[&json, &job.tool, &job.key]).await?;
            Ok(Done::Output(value))
        }
        Err(error) => {
            let judged = job.policy.classify(error.as_error());
            if judged.verdict != Verdict::Permanent {
                // Transient or ambiguous: the runner rolls everything back and decides.
                return Err(error);
            }
            let business = BusinessError::from_error(error.as_error(), judged.code);
            // Undo the work, keep the claim. If even that fails (the connection broke),
            // that failure goes to the runner: nothing is recorded, a retry runs again.
            DB::fixed(&mut **tx, ROLLBACK_TO_SAVEPOINT).await?;
            DB::execute(
                &mut **tx,
                &sql.record_error,
                &[business.kind(), business.message(), &job.tool, &job.key],
            )
            .await?;
            Ok(Done::Business(business))
        }
    }
}
