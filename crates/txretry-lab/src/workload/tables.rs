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
        let ddl = match self.workload {
            Workload::Transfer => vec![
                format!(
                    "CREATE TABLE {} (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)",
                    self.accounts
                ),
                format!(
                    "CREATE TABLE {} (transfer_id BIGINT PRIMARY KEY, from_id BIGINT NOT NULL, to_id BIGINT NOT NULL, amount BIGINT NOT NULL)",
                    self.ledger
                ),
            ],
            Workload::HotRows => vec![format!(
                "CREATE TABLE {} (id BIGINT PRIMARY KEY, counter BIGINT NOT NULL)",
                self.hot
            )],
            // No unique key: a call that ran twice must show twice.
            Workload::History => vec![format!(
                "CREATE TABLE {} (call_id BIGINT NOT NULL, port BIGINT NOT NULL)",
                self.history
            )],
        };
        for statement in ddl {
            DB::batch(&mut conn, sql(statement)).await?;
        }
        let (table, value) = match self.workload {
            Workload::Transfer => (&self.accounts, INITIAL_BALANCE),
            Workload::HotRows => (&self.hot, 0),
            // Starts empty.
            Workload::History => return Ok(()),
        };
        // Literal integers the lab generated, in batches: one round trip per 500 rows.
        let ids: Vec<u32> = (1..=self.rows).collect();
        for chunk in ids.chunks(500) {
            let values: Vec<String> = chunk.iter().map(|id| format!("({id}, {value})")).collect();
            let column = if self.workload == Workload::Transfer {
                "balance"
            } else {
                "counter"
            };
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
