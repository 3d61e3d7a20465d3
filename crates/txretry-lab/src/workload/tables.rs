//! Creating and dropping a run's tables.

use sqlx::Pool;

use super::{INITIAL_BALANCE, Schema, sql};
use crate::backend::LabDb;
use crate::cli::Workload;

impl Schema {
    /// Creates this run's tables and fills them; when that fails, drops what it made (best
    /// effort) and returns the error.
    pub async fn create<DB: LabDb>(&self, pool: &Pool<DB>) -> Result<(), sqlx::Error> {
        let created = self.create_and_fill(pool).await;
        if created.is_err() {
            let _ = self.drop_tables(pool).await;
        }
        created
    }

    async fn create_and_fill<DB: LabDb>(&self, pool: &Pool<DB>) -> Result<(), sqlx::Error> {
        let mut conn = pool.acquire().await?;
        if self.workload == Workload::History {
            // No unique key: a call that ran twice must show twice. It starts empty.
            let ddl = format!(
                "CREATE TABLE {} (call_id BIGINT NOT NULL, port BIGINT NOT NULL)",
                self.history
            );
            return DB::batch(&mut conn, sql(ddl)).await;
        }
        let (table, column) = self.valued_rows();
        let ddl = format!("CREATE TABLE {table} (id BIGINT PRIMARY KEY, {column} BIGINT NOT NULL)");
        DB::batch(&mut conn, sql(ddl)).await?;
        let mut value = 0;
        if self.workload == Workload::Transfer {
            let ddl = format!(
                "CREATE TABLE {} (transfer_id BIGINT PRIMARY KEY, from_id BIGINT NOT NULL, to_id BIGINT NOT NULL, amount BIGINT NOT NULL)",
                self.ledger
            );
            DB::batch(&mut conn, sql(ddl)).await?;
            value = INITIAL_BALANCE;
        }
        // Literal integers the lab generated, in batches: one round trip per 500 rows.
        let ids: Vec<u32> = (1..=self.rows).collect();
        for chunk in ids.chunks(500) {
            let values: Vec<String> = chunk.iter().map(|id| format!("({id}, {value})")).collect();
            let insert = format!(
                "INSERT INTO {table} (id, {column}) VALUES {}",
                values.join(", ")
            );
            DB::batch(&mut conn, sql(insert)).await?;
        }
        Ok(())
    }

    /// Drops this run's tables (those that exist).
    pub async fn drop_tables<DB: LabDb>(&self, pool: &Pool<DB>) -> Result<(), sqlx::Error> {
        let mut conn = pool.acquire().await?;
        for table in [&self.accounts, &self.ledger, &self.hot, &self.history] {
            DB::batch(&mut conn, sql(format!("DROP TABLE IF EXISTS {table}"))).await?;
        }
        Ok(())
    }
}
