//! The pooled connection a runner holds for one attempt, and what becomes of it when the
//! attempt ends or is dropped: back to the pool, closed gracefully, or dropped at once.

use sqlx::Database;
use sqlx::pool::PoolConnection;

use crate::runner::{Backend, Cleanup};

/// A pooled connection the runner holds for one attempt.
pub(crate) struct Lease<DB: Database> {
    /// The connection, until the lease is dropped.
    pub(crate) conn: Option<PoolConnection<DB>>,
    /// Close the connection (instead of returning it to the pool) when dropped.
    pub(crate) discard_on_drop: bool,
    /// The session may hold session-level locks of database-backed admission (MySQL):
    /// until [`Lease::finish`] has released them, dropping closes the connection.
    pub(crate) session_locks: bool,
    /// Nothing is in flight on the connection: [`Lease::finish`] ran to its end, or the
    /// attempt returned an error the server had answered. Else the caller dropped the
    /// attempt mid-exchange.
    pub(crate) finished: bool,
}

impl<DB: Database> Lease<DB> {
    /// The connection of a lease's `conn` field (borrowing that field alone).
    pub(crate) fn live(conn: &mut Option<PoolConnection<DB>>) -> &mut PoolConnection<DB> {
        match conn {
            Some(conn) => conn,
            None => unreachable!("a lease holds its connection until it is dropped"),
        }
    }

    /// The connection.
    pub(crate) fn conn(&mut self) -> &mut PoolConnection<DB> {
        Lease::live(&mut self.conn)
    }
}

impl<DB: Backend> Lease<DB> {
    /// Ends the attempt's use of the connection: restores the session and releases its
    /// admission locks, or marks the connection to be closed when `discard` or when
    /// either fails (closing it releases the locks on the server).
    pub(crate) async fn finish(&mut self, cleanup: Cleanup, discard: bool) {
        let mut clean = !discard
            && match cleanup {
                Cleanup::Nothing | Cleanup::DiscardIfBeginFailed => true,
                Cleanup::Sql(sql) => DB::run_statement(self.conn(), sql).await.is_ok(),
            };
        if clean && self.session_locks {
            clean = DB::run_statement(self.conn(), DB::LOCK_CLEANUP)
                .await
                .is_ok();
        }
        if clean {
            self.session_locks = false;
        }
        self.discard_on_drop = !clean;
        self.finished = true;
    }
}

impl<DB: Database> Drop for Lease<DB> {
    fn drop(&mut self) {
        if !(self.discard_on_drop || self.session_locks) {
            return;
        }
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if self.finished {
            // The attempt is over and the server waits for the next command: a graceful
            // close (in the background, bounded by sqlx) ends at once, and the pool opens
            // a replacement.
            conn.close_on_drop();
        } else {
            // Dropped mid-attempt (the caller dropped our future): a statement may be in
            // flight, and the server reads no goodbye before it ends; over TLS sqlx's
            // graceful close waits for the server to speak (its flush reads), holding the
            // pool's slot for its 5 s bound. The connection leaves the pool now and its
            // socket closes at once: the slot is free, and the server sees the client gone
            // (Postgres ends the statement at its next `client_connection_check_interval`).
            drop(conn.detach());
        }
    }
}
