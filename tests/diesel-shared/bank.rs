//! [`Bank`](crate::transfers::Bank) and [`Sessions`](crate::locks::Sessions) for Diesel's
//! blocking connections: each worker (and each session outside the runner) opens a
//! connection of its own, which goes to one of tokio's blocking threads for each
//! transaction (or statement) and comes back. Macros over the connection type (Diesel's
//! bounds for a query generic over the backend would outweigh the code).

/// Defines `DieselBank` over connections of type `$conn`, on `$dialect`.
macro_rules! diesel_bank {
    ($conn:ty, $dialect:expr) => {
        /// Diesel (blocking) for the transfers of `tests/shared/transfers.rs`: what opens
        /// a connection.
        pub struct DieselBank(pub std::sync::Arc<dyn Fn() -> $conn + Send + Sync>);

        /// A row of one `bigint` column named `v`.
        #[derive(diesel::QueryableByName)]
        struct V {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            v: i64,
        }

        type Backend = <$conn as diesel::Connection>::Backend;

        /// `sql` with `binds`, all `bigint`.
        fn query(
            sql: &str,
            binds: &[i64],
        ) -> diesel::query_builder::BoxedSqlQuery<'static, Backend, diesel::query_builder::SqlQuery>
        {
            let mut query = diesel::sql_query(sql.to_owned()).into_boxed();
            for &bind in binds {
                query = query.bind::<diesel::sql_types::BigInt, _>(bind);
            }
            query
        }

        /// The one integer `sql` selects (as `v`).
        fn one(conn: &mut $conn, sql: &str, binds: &[i64]) -> diesel::QueryResult<i64> {
            use diesel::RunQueryDsl;
            query(sql, binds).get_result::<V>(conn).map(|row| row.v)
        }

        impl crate::transfers::Bank for DieselBank {
            const DIALECT: crate::transfers::Dialect = $dialect;
            type Worker = Option<$conn>;

            async fn worker(&self) -> Option<$conn> {
                Some((self.0)())
            }

            async fn exec(&self, sql: String) {
                let mut conn = (self.0)();
                diesel::connection::SimpleConnection::batch_execute(&mut conn, &sql).unwrap();
            }

            async fn query_i64(&self, sql: String) -> i64 {
                one(&mut (self.0)(), &sql, &[]).unwrap()
            }

            async fn transfer(
                worker: &mut Option<$conn>,
                policy: &txretry::RetryPolicy,
                options: &txretry::TxOptions,
                sql: std::sync::Arc<crate::transfers::Sql>,
                t: crate::transfers::Transfer,
                runs: std::sync::Arc<std::sync::atomic::AtomicU32>,
            ) -> Result<(), String> {
                use diesel::RunQueryDsl;
                let (policy, options) = (policy.clone(), options.clone());
                crate::transfers::on_blocking_thread(worker, move |conn| {
                    txretry::diesel::transaction_with(conn, &policy, &options, |conn| {
                        runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if let Some(prelude) = sql.prelude {
                            diesel::connection::SimpleConnection::batch_execute(conn, prelude)?;
                        }
                        let balance = one(conn, &sql.balance, &[t.src])?;
                        query(&sql.debit, &[balance - t.amount, t.src]).execute(conn)?;
                        query(&sql.credit, &[t.amount, t.dst]).execute(conn)?;
                        let row = [t.task, t.seq, t.src, t.dst, t.amount];
                        query(&sql.record, &row).execute(conn)?;
                        Ok::<_, diesel::result::Error>(())
                    })
                    .map_err(|err| err.to_string())
                })
                .await
            }

            async fn read(
                worker: &mut Option<$conn>,
                policy: &txretry::RetryPolicy,
                options: &txretry::TxOptions,
                sql: String,
            ) -> Result<i64, String> {
                let (policy, options) = (policy.clone(), options.clone());
                crate::transfers::on_blocking_thread(worker, move |conn| {
                    txretry::diesel::transaction_with(conn, &policy, &options, |conn| {
                        one(conn, &sql, &[])
                    })
                    .map_err(|err| err.to_string())
                })
                .await
            }
        }
    };
}

pub(crate) use diesel_bank;

/// Defines [`Sessions`](crate::locks::Sessions) for the `DieselBank` of this module, over
/// connections of type `$conn`; `crate::failure` says what the closure saw of an error.
#[allow(unused_macros)] // not in the SQLite binary
macro_rules! diesel_sessions {
    ($conn:ty) => {
        /// Blocking calls, made on one of tokio's blocking threads (see `script`).
        impl crate::locks::Tx for $conn {
            type Error = diesel::result::Error;

            async fn exec(&mut self, sql: &str) -> diesel::QueryResult<()> {
                diesel::RunQueryDsl::execute(diesel::sql_query(sql), self).map(drop)
            }

            async fn one(&mut self, sql: &str) -> diesel::QueryResult<i64> {
                one(self, sql, &[])
            }

            fn failure(err: &diesel::result::Error, in_tx: Option<i64>) -> crate::locks::Failure {
                crate::failure::failure(err, in_tx)
            }
        }

        impl crate::locks::Sessions for DieselBank {
            const KEEPS_ERRNO: bool = false;
            type Held = Option<$conn>;

            async fn begin(&self) -> Option<$conn> {
                let mut held = Some((self.0)());
                Self::held_exec(&mut held, "BEGIN".to_owned())
                    .await
                    .unwrap();
                held
            }

            async fn held_exec(held: &mut Option<$conn>, sql: String) -> Result<(), String> {
                crate::transfers::on_blocking_thread(held, move |conn| {
                    diesel::connection::SimpleConnection::batch_execute(conn, &sql)
                        .map_err(|err| err.to_string())
                })
                .await
            }

            async fn held_i64(held: &mut Option<$conn>, sql: String) -> i64 {
                crate::transfers::on_blocking_thread(held, move |conn| one(conn, &sql, &[]))
                    .await
                    .unwrap()
            }

            async fn commit(mut held: Option<$conn>) -> Result<(), String> {
                Self::held_exec(&mut held, "COMMIT".to_owned()).await
            }

            async fn script(
                worker: &mut Option<$conn>,
                policy: &txretry::RetryPolicy,
                script: std::sync::Arc<crate::locks::Script>,
            ) -> Result<(), String> {
                let policy = policy.clone();
                // The script is async (its hooks wait for the scenario): this blocking
                // thread waits for each attempt.
                let runtime = tokio::runtime::Handle::current();
                crate::transfers::on_blocking_thread(worker, move |conn| {
                    txretry::diesel::transaction(conn, &policy, |conn| {
                        runtime.block_on(script.run(conn))
                    })
                    .map_err(|err| err.to_string())
                })
                .await
            }
        }
    };
}

#[allow(unused_imports)]
pub(crate) use diesel_sessions;
