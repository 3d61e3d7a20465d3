//! Stopping, in the server, the statement of a call dropped while it runs (Postgres).
//!
//! A call is dropped when its client cancels it, when its attempt times out, or when the
//! server shuts down. Dropping it drops the transaction, but sqlx cannot cancel a statement
//! in flight: the server runs it to its end (a lock wait, a long query) and only then sees
//! the ROLLBACK, holding the transaction's locks and its pooled connection meanwhile, so a
//! retry, or the next call, waits behind the call that was given up. The stopper, armed for
//! the length of the statements, asks the server to cancel that backend's statement, from a
//! connection of its own, when it is dropped armed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use sqlx::{ConnectOptions, Connection};

/// How long the cancel may take (connect, then one statement): past it, the statement is
/// left to end by itself, as it would without a stopper.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// The backend and its transaction, read inside the transaction: `now()` is the
/// transaction's start, `pg_stat_activity.xact_start` of the same backend while it lasts.
const IDENTIFY: &str = "SELECT pg_backend_pid(), CAST(extract(epoch FROM now()) * 1000000 AS int8)";

/// Cancels the backend's statement only while it is still in the same transaction: a
/// connection already given back to the pool and running another call's transaction has
/// another start, and is left alone.
const CANCEL: &str = "SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
     WHERE pid = $1 AND CAST(extract(epoch FROM xact_start) * 1000000 AS int8) = $2";

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

/// Armed: cancels the transaction's statement in the server when dropped.
pub struct Stopper {
    /// The pool's own (shared, not copied for every call).
    options: Arc<PgConnectOptions>,
    pid: i32,
    started_us: i64,
    armed: bool,
}

impl Stopper {
    /// A stopper for the transaction open on `conn`, a connection of `pool`.
    ///
    /// # Errors
    /// The query's that identifies the backend and its transaction.
    pub async fn arm(conn: &mut PgConnection, pool: &PgPool) -> Result<Stopper, sqlx::Error> {
        let (pid, started_us): (i32, i64) = sqlx::query_as(IDENTIFY).fetch_one(conn).await?;
        PENDING.fetch_add(1, Ordering::SeqCst);
        Ok(Stopper {
            options: pool.connect_options(),
            pid,
            started_us,
            armed: true,
        })
    }

    /// The statements have ended: nothing to stop.
    pub fn disarm(mut self) {
        self.armed = false;
        PENDING.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let pending = Pending;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (options, pid, started_us) = (Arc::clone(&self.options), self.pid, self.started_us);
        runtime.spawn(async move {
            let _pending = pending;
            let cancel = async {
                let mut conn = options.connect().await?;
                sqlx::query(CANCEL)
                    .bind(pid)
                    .bind(started_us)
                    .execute(&mut conn)
                    .await?;
                conn.close().await
            };
            // Best effort: the statement then ends by itself, as it did before.
            let _ = tokio::time::timeout(CANCEL_WAIT, cancel).await;
        });
    }
}
