//! [`Bank`](crate::transfers::Bank) for sqlx, on any of its databases: one pool, which
//! every worker clones. A macro over the pool type, as sqlx's executor bounds for a generic
//! database would outweigh the code.

/// Defines `SqlxBank`, a [`Bank`](crate::transfers::Bank) over a `$pool` on `$dialect`.
macro_rules! sqlx_bank {
    ($pool:ty, $dialect:expr) => {
        /// sqlx for the transfers of `tests/shared/transfers.rs`.
        pub struct SqlxBank(pub $pool);

        impl crate::transfers::Bank for SqlxBank {
            const DIALECT: crate::transfers::Dialect = $dialect;
            type Worker = $pool;

            async fn worker(&self) -> $pool {
                self.0.clone()
            }

            async fn exec(&self, text: String) {
                sqlx::raw_sql(sqlx::AssertSqlSafe(text))
                    .execute(&self.0)
                    .await
                    .unwrap();
            }

            async fn query_i64(&self, text: String) -> i64 {
                sqlx::query_scalar(sqlx::AssertSqlSafe(text))
                    .fetch_one(&self.0)
                    .await
                    .unwrap()
            }

            async fn transfer(
                pool: &mut $pool,
                policy: &txretry::RetryPolicy,
                options: &txretry::TxOptions,
                sql: std::sync::Arc<crate::transfers::Sql>,
                t: crate::transfers::Transfer,
                runs: std::sync::Arc<std::sync::atomic::AtomicU32>,
            ) -> Result<(), String> {
                use sqlx::AssertSqlSafe as Safe;
                txretry::sqlx::transaction_with(&*pool, policy, options, async move |tx| {
                    runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if let Some(prelude) = sql.prelude {
                        sqlx::query(prelude).execute(&mut **tx).await?;
                    }
                    let balance: i64 = sqlx::query_scalar(Safe(sql.balance.clone()))
                        .bind(t.src)
                        .fetch_one(&mut **tx)
                        .await?;
                    sqlx::query(Safe(sql.debit.clone()))
                        .bind(balance - t.amount)
                        .bind(t.src)
                        .execute(&mut **tx)
                        .await?;
                    sqlx::query(Safe(sql.credit.clone()))
                        .bind(t.amount)
                        .bind(t.dst)
                        .execute(&mut **tx)
                        .await?;
                    sqlx::query(Safe(sql.record.clone()))
                        .bind(t.task)
                        .bind(t.seq)
                        .bind(t.src)
                        .bind(t.dst)
                        .bind(t.amount)
                        .execute(&mut **tx)
                        .await?;
                    Ok::<_, sqlx::Error>(())
                })
                .await
                .map_err(|err| err.to_string())
            }

            async fn read(
                pool: &mut $pool,
                policy: &txretry::RetryPolicy,
                options: &txretry::TxOptions,
                text: String,
            ) -> Result<i64, String> {
                txretry::sqlx::transaction_with(&*pool, policy, options, async move |tx| {
                    sqlx::query_scalar(sqlx::AssertSqlSafe(text.clone()))
                        .fetch_one(&mut **tx)
                        .await
                })
                .await
                .map_err(|err| err.to_string())
            }
        }
    };
}

pub(crate) use sqlx_bank;

/// Defines [`Sessions`](crate::locks::Sessions) for the `SqlxBank` of this module, on
/// database `$db` (the bank's pool is a `sqlx::Pool<$db>`); `crate::dialect::errno` reads a
/// MySQL error's number.
#[allow(unused_macros)] // not in the SQLite binary
macro_rules! sqlx_sessions {
    ($db:ty) => {
        impl<'c> crate::locks::Tx for sqlx::Transaction<'c, $db> {
            type Error = sqlx::Error;

            async fn exec(&mut self, text: &str) -> Result<(), sqlx::Error> {
                let query = sqlx::query(sqlx::AssertSqlSafe(text.to_owned()));
                query.execute(&mut **self).await.map(drop)
            }

            async fn one(&mut self, text: &str) -> Result<i64, sqlx::Error> {
                let query = sqlx::query_scalar(sqlx::AssertSqlSafe(text.to_owned()));
                query.fetch_one(&mut **self).await
            }

            fn failure(err: &sqlx::Error, in_tx: Option<i64>) -> crate::locks::Failure {
                let db = err.as_database_error();
                crate::locks::Failure {
                    sqlstate: db.and_then(|db| db.code()).map(|code| code.into_owned()),
                    errno: crate::dialect::errno(err),
                    message: db.map_or_else(|| err.to_string(), |db| db.message().to_owned()),
                    classified: txretry::classify(err),
                    in_tx,
                }
            }
        }

        impl crate::locks::Sessions for SqlxBank {
            const KEEPS_ERRNO: bool = true;
            type Held = sqlx::pool::PoolConnection<$db>;

            async fn begin(&self) -> Self::Held {
                let mut held = self.0.acquire().await.unwrap();
                sqlx::raw_sql("BEGIN").execute(&mut *held).await.unwrap();
                held
            }

            async fn held_exec(held: &mut Self::Held, text: String) -> Result<(), String> {
                let done = sqlx::raw_sql(sqlx::AssertSqlSafe(text)).execute(&mut **held);
                done.await.map(drop).map_err(|err| err.to_string())
            }

            async fn held_i64(held: &mut Self::Held, text: String) -> i64 {
                let query = sqlx::query_scalar(sqlx::AssertSqlSafe(text));
                query.fetch_one(&mut **held).await.unwrap()
            }

            async fn commit(mut held: Self::Held) -> Result<(), String> {
                Self::held_exec(&mut held, "COMMIT".to_owned()).await
            }

            async fn script(
                pool: &mut sqlx::Pool<$db>,
                policy: &txretry::RetryPolicy,
                script: std::sync::Arc<crate::locks::Script>,
            ) -> Result<(), String> {
                txretry::sqlx::transaction(&*pool, policy, async move |tx| script.run(tx).await)
                    .await
                    .map_err(|err| err.to_string())
            }
        }
    };
}

#[allow(unused_imports)]
pub(crate) use sqlx_sessions;
