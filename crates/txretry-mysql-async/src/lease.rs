//! The pooled connection an attempt holds, and how it goes back (or does not).

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use txretry_core::__private::DatabaseLocks;

/// A pooled connection one attempt holds. Dropped without [`Lease::release`] (the attempt
/// was cancelled mid-exchange), it closes the connection in the background, so the pool
/// never hands out a connection with an unread reply, an open transaction or named locks.
pub(crate) struct Lease {
    pub(crate) conn: Option<Conn>,
    /// The session may hold named locks of database-backed admission:
    /// [`Lease::release`] releases them first.
    pub(crate) named_locks: bool,
}

impl Lease {
    pub(crate) fn conn(&mut self) -> &mut Conn {
        self.conn
            .get_or_insert_with(|| unreachable!("a lease holds its connection until it ends"))
    }

    /// The session is clean: back to the pool, once its named locks (if it may hold any)
    /// are released; a connection whose locks could not be released is closed instead.
    pub(crate) async fn release(mut self) {
        if self.named_locks
            && self
                .conn()
                .query_drop(DatabaseLocks::MYSQL_RELEASE)
                .await
                .is_err()
        {
            return self.discard().await;
        }
        drop(self.conn.take());
    }

    /// Closes the connection so the pool never hands it out again. `Conn::disconnect`
    /// marks it disconnected before anything can fail, and the pool drops disconnected
    /// connections. The server drops the session's named locks with it.
    pub(crate) async fn discard(mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.disconnect().await;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = conn.disconnect().await;
            });
        }
    }
}
