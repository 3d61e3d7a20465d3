//! Creating the records' table, and deleting old records, on a mysql_async pool.

use std::time::Duration;

use mysql_async::Pool;
use mysql_async::prelude::Queryable;

use crate::once::record::age_micros;
use crate::{Dialect, Once};

impl Once {
    /// `Once::migrate` on a mysql_async pool (feature `mysql_async`): creates the records'
    /// table and its index on `created_at` if they do not exist (one
    /// `CREATE TABLE IF NOT EXISTS`, [`Once::ddl`]`(Dialect::MySql)`). Safe to run
    /// concurrently and repeatedly; optional, as
    /// [`ToolContext::once_mysql_async`](crate::ToolContext::once_mysql_async) creates the
    /// table the first time it finds it missing.
    ///
    /// ```no_run
    /// # async fn demo(pool: mysql_async::Pool) -> Result<(), mysql_async::Error> {
    /// txretry_tool::Once::new().migrate_mysql_async(&pool).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The database's, e.g. when the user may not create tables.
    pub async fn migrate_mysql_async(&self, pool: &Pool) -> Result<(), mysql_async::Error> {
        super::transaction::migrate(pool, self).await
    }

    /// `Once::prune` on a mysql_async pool (feature `mysql_async`): deletes the records
    /// created more than `older_than` ago (by the database's clock, in UTC), and returns
    /// how many. A call repeated with the key of a pruned record runs again: keep records
    /// for longer than any caller may repeat a call.
    ///
    /// ```no_run
    /// # async fn demo(pool: mysql_async::Pool) -> Result<(), mysql_async::Error> {
    /// use std::time::Duration;
    ///
    /// let week = Duration::from_secs(7 * 24 * 3600);
    /// let deleted = txretry_tool::Once::new().prune_mysql_async(&pool, week).await?;
    /// # let _ = deleted; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The database's (e.g. the table does not exist).
    pub async fn prune_mysql_async(
        &self,
        pool: &Pool,
        older_than: Duration,
    ) -> Result<u64, mysql_async::Error> {
        let mut conn = pool.get_conn().await?;
        conn.exec_drop(
            &*self.statements(Dialect::MySql).prune,
            (age_micros(older_than),),
        )
        .await?;
        Ok(conn.affected_rows())
    }
}
