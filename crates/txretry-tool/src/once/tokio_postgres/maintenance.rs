//! Creating the records' table, and deleting old records, on a tokio-postgres client.

use std::time::Duration;

use tokio_postgres::Client;

use crate::once::record::age_seconds;
use crate::{Dialect, Once};

impl Once {
    /// `Once::migrate` on a tokio-postgres client (feature `tokio-postgres`): creates the
    /// records' table and its index on `created_at` if they do not exist, in a transaction
    /// of its own. Safe to run concurrently and repeatedly; optional, as
    /// [`ToolContext::once_tokio_postgres`](crate::ToolContext::once_tokio_postgres)
    /// creates the table the first time it finds it missing.
    ///
    /// # Errors
    /// The database's, e.g. when the user may not create tables.
    pub async fn migrate_tokio_postgres(
        &self,
        client: &mut Client,
    ) -> Result<(), tokio_postgres::Error> {
        super::transaction::migrate(client, self).await
    }

    /// `Once::prune` on a tokio-postgres client (feature `tokio-postgres`): deletes the
    /// records created more than `older_than` ago (by the database's clock), and returns
    /// how many. A call repeated with the key of a pruned record runs again.
    ///
    /// # Errors
    /// The database's (e.g. the table does not exist).
    pub async fn prune_tokio_postgres(
        &self,
        client: &Client,
        older_than: Duration,
    ) -> Result<u64, tokio_postgres::Error> {
        let seconds = age_seconds(older_than);
        let sql = &self.statements(Dialect::Postgres).prune;
        client.execute(&**sql, &[&seconds]).await
    }
}
