//! Creating the records' table, and deleting old records, on a rusqlite connection.

use std::time::Duration;

use rusqlite::Connection;

use crate::once::record::age_modifier;
use crate::{Dialect, Once};

impl Once {
    /// `Once::migrate` on a rusqlite connection (feature `rusqlite`, blocking): creates the
    /// records' table and its index on `created_at` if they do not exist
    /// ([`Once::ddl`]`(Dialect::Sqlite)`), in a transaction of its own. Safe to run
    /// concurrently and repeatedly; optional, as
    /// [`ToolContext::once_rusqlite`](crate::ToolContext::once_rusqlite) creates the table
    /// the first time it finds it missing.
    ///
    /// ```
    /// # fn main() -> Result<(), rusqlite::Error> {
    /// let mut conn = rusqlite::Connection::open_in_memory()?;
    /// let once = txretry_tool::Once::new();
    /// once.migrate_rusqlite(&mut conn)?;
    /// once.migrate_rusqlite(&mut conn)?; // nothing to do
    /// let n: i64 = conn.query_row("SELECT count(*) FROM txretry_tool_calls", [], |r| r.get(0))?;
    /// assert_eq!(n, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The database's (e.g. a read-only database file).
    pub fn migrate_rusqlite(&self, conn: &mut Connection) -> Result<(), rusqlite::Error> {
        super::transaction::migrate(conn, self)
    }

    /// `Once::prune` on a rusqlite connection (feature `rusqlite`, blocking): deletes the
    /// records created more than `older_than` ago (by SQLite's clock, in UTC), and returns
    /// how many. A call repeated with the key of a pruned record runs again: keep records
    /// for longer than any caller may repeat a call.
    ///
    /// ```
    /// # fn main() -> Result<(), rusqlite::Error> {
    /// use std::time::Duration;
    ///
    /// let mut conn = rusqlite::Connection::open_in_memory()?;
    /// let once = txretry_tool::Once::new();
    /// once.migrate_rusqlite(&mut conn)?;
    /// let week = Duration::from_secs(7 * 24 * 3600);
    /// assert_eq!(once.prune_rusqlite(&conn, week)?, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The database's (e.g. the table does not exist).
    pub fn prune_rusqlite(
        &self,
        conn: &Connection,
        older_than: Duration,
    ) -> Result<u64, rusqlite::Error> {
        let sql = &self.statements(Dialect::Sqlite).prune;
        let deleted = conn.execute(sql, [age_modifier(older_than)])?;
        Ok(deleted as u64)
    }
}
