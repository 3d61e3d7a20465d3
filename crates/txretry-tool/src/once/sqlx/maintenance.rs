//! Creating the records' table, and deleting old records.

use std::time::Duration;

use sqlx::Pool;

use super::OnceBackend;
use crate::Once;

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
