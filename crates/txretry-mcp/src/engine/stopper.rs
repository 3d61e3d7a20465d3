//! Stopping, in the server, the statement of a call dropped while it runs (Postgres, and
//! MySQL/MariaDB).
//!
//! A call is dropped when its client cancels it, when its attempt times out, or when the
//! server shuts down. Dropping it drops the transaction, but sqlx cannot cancel a statement
//! in flight: the server runs it to its end (a lock wait, a long query) and only then sees
//! the ROLLBACK or the closed connection, holding the transaction's locks meanwhile, so a
//! retry, or the next call, waits behind the call that was given up. The stopper, armed for
//! the length of the statements, asks the server to cancel that session's statement, from a
//! connection of its own, when it is dropped armed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::mysql::{MySqlConnection, MySqlPool};
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection};

/// How long the cancel may take (connect, then one statement): past it, the statement is
/// left to end by itself, as it would without a stopper.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// The backend and its transaction, read inside the transaction: `now()` is the
/// transaction's start, `pg_stat_activity.xact_start` of the same backend while it lasts.
const PG_IDENTIFY: &str =
    "SELECT pg_backend_pid(), CAST(extract(epoch FROM now()) * 1000000 AS int8)";

/// Cancels the backend's statement only while it is still in the same transaction: a
/// connection already given back to the pool and running another call's transaction has
/// another start, and is left alone.
const PG_CANCEL: &str = "SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
     WHERE pid = $1 AND CAST(extract(epoch FROM xact_start) * 1000000 AS int8) = $2";

/// The session, and the server it is on. A MySQL server never gives a connection id to two
/// sessions while it runs, and the runner closes a connection dropped inside its
/// transaction instead of pooling it: the id names this call's session and no other. The
/// server's host name and port tell it apart from the session of the same id on another
/// node, where a load-balancing proxy may route the stopper's own connection.
const MYSQL_IDENTIFY: &str =
    "SELECT CAST(CONNECTION_ID() AS UNSIGNED), CAST(@@hostname AS CHAR), CAST(@@port AS SIGNED)";

/// The server the stopper's own connection reached.
const MYSQL_SERVER: &str = "SELECT CAST(@@hostname AS CHAR), CAST(@@port AS SIGNED)";

/// Stoppers armed, and cancels on their way: the process waits for them before it exits
/// ([`settled`]), or its runtime would drop a cancel half done (at a signal, or when the
/// host goes away and the calls in flight are dropped) and the statement would run on,
/// holding its locks.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// One fewer pending, when dropped: a cancel that ends, fails or is itself dropped.
struct Pending;

impl Drop for Pending {
    fn drop(&mut self) {
        PENDING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits until no call has a statement a stopper may have to cancel and every cancel sent
/// has ended, for at most 10 s (`CANCEL_WAIT`): what the server does before it exits, once it
/// has stopped serving (its calls then end, or are dropped, at once).
pub async fn settled() {
    let wait = async {
        while PENDING.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let _ = tokio::time::timeout(CANCEL_WAIT, wait).await;
}

/// The cancel of one session's statement, from a connection of its own.
type Cancel = Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send>>;

/// Armed: cancels the transaction's statement in the server when dropped.
pub struct Stopper {
    /// `None` once disarmed.
    cancel: Option<Cancel>,
}

impl Stopper {
    /// Armed with `cancel`, which runs only if the stopper is dropped armed.
    fn armed(cancel: Cancel) -> Stopper {
        PENDING.fetch_add(1, Ordering::SeqCst);
        Stopper {
            cancel: Some(cancel),
        }
    }

    /// A stopper for the Postgres transaction open on `conn`, a connection of `pool`.
    ///
    /// # Errors
    /// The query's that identifies the backend and its transaction.
    pub async fn postgres(conn: &mut PgConnection, pool: &PgPool) -> Result<Stopper, sqlx::Error> {
        let (pid, started_us): (i32, i64) = sqlx::query_as(PG_IDENTIFY).fetch_one(conn).await?;
        let options = pool.connect_options();
        Ok(Stopper::armed(Box::pin(async move {
            let mut conn = options.connect().await?;
            sqlx::query(PG_CANCEL)
                .bind(pid)
                .bind(started_us)
                .execute(&mut conn)
                .await?;
            conn.close().await
        })))
    }

    /// A stopper for the MySQL or MariaDB transaction open on `conn`, a connection of
    /// `pool`.
    ///
    /// # Errors
    /// The query's that identifies the session and its server.
    pub async fn mysql(
        conn: &mut MySqlConnection,
        pool: &MySqlPool,
    ) -> Result<Stopper, sqlx::Error> {
        let (id, host, port): (u64, String, i64) =
            sqlx::query_as(MYSQL_IDENTIFY).fetch_one(conn).await?;
        let options = pool.connect_options();
        Ok(Stopper::armed(Box::pin(async move {
            let mut conn = options.connect().await?;
            let (here, here_port): (String, i64) =
                sqlx::query_as(MYSQL_SERVER).fetch_one(&mut conn).await?;
            if (here, here_port) == (host, port) {
                // KILL takes no placeholder; the id is the number the server gave.
                sqlx::raw_sql(AssertSqlSafe(format!("KILL QUERY {id}")))
                    .execute(&mut conn)
                    .await?;
            }
            conn.close().await
        })))
    }

    /// The statements have ended: nothing to stop.
    pub fn disarm(mut self) {
        if self.cancel.take().is_some() {
            PENDING.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        let Some(cancel) = self.cancel.take() else {
            return;
        };
        let pending = Pending;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let _pending = pending;
            // Best effort: the statement then ends by itself, as it did before.
            let _ = tokio::time::timeout(CANCEL_WAIT, cancel).await;
        });
    }
}
