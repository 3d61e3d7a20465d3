//! `ToolContext::once_mysql_async` on MySQL/MariaDB, through a mysql_async pool.

use std::time::Duration;

use mysql_async::Pool;
use mysql_async::prelude::Queryable;
use txretry_tool::{BoxError, Once, Tool, ToolContext};

use crate::common::{Args, Work};
use crate::driver::{Db, OnceDriver, Record};

pub struct MysqlAsync {
    pool: Pool,
    url: String,
}

impl OnceDriver for MysqlAsync {
    type Handle = Pool;
    const DB: Db = Db::MySql;

    async fn open(test: &str) -> Option<Self> {
        let url = txretry_testkit::mysql_url(test)?;
        let pool = Pool::new(url.as_str());
        Some(MysqlAsync { pool, url })
    }

    fn handle(&self) -> Pool {
        self.pool.clone()
    }

    fn server_url(&self) -> Option<&str> {
        Some(&self.url)
    }

    async fn through(url: &str) -> Pool {
        Pool::new(url)
    }

    fn tool(pool: &Pool, name: &'static str, work: &Work) -> Tool {
        let (pool, work) = (pool.clone(), work.clone());
        Tool::new(
            name,
            "The test tool.",
            move |ctx: ToolContext, args: Args| {
                let (pool, work) = (pool.clone(), work.clone());
                async move {
                    let w = work.clone();
                    let placed = ctx
                        .once_mysql_async(&pool, async move |tx| {
                            let n = w.runs.bump();
                            tx.query_drop(w.insert_sql(args.item)).await?;
                            w.gate.pass().await;
                            if w.hangs(n) {
                                std::future::pending::<()>().await;
                            }
                            if let Some(sql) = w.extra_sql() {
                                tx.query_drop(sql).await?;
                            }
                            w.check(n, args.item)?;
                            let effects: Option<i64> = tx.query_first(w.count_sql()).await?;
                            Ok::<_, BoxError>(w.placed(args.item, effects.unwrap_or_default()))
                        })
                        .await?;
                    work.answered();
                    Ok::<_, BoxError>(placed)
                }
            },
        )
    }

    async fn migrate(&self, once: &Once) {
        once.migrate_mysql_async(&self.pool).await.unwrap();
    }

    async fn prune(&self, once: &Once, older_than: Duration) -> u64 {
        once.prune_mysql_async(&self.pool, older_than)
            .await
            .unwrap()
    }

    async fn exec(&self, sql: String) {
        let mut conn = self.pool.get_conn().await.unwrap();
        conn.query_drop(sql).await.unwrap();
    }

    async fn scalar(&self, sql: String) -> i64 {
        let mut conn = self.pool.get_conn().await.unwrap();
        conn.query_first(sql).await.unwrap().unwrap()
    }

    async fn record(&self, records: &str, key: &str) -> Record {
        let mut conn = self.pool.get_conn().await.unwrap();
        let sql = format!(
            "SELECT status, output, error_kind, error_message FROM {records} WHERE call_key = ?"
        );
        conn.exec_first(sql, (key,)).await.unwrap().unwrap()
    }
}

crate::scenarios::once_scenarios!(MysqlAsync);
crate::scenarios::commit_fault_scenarios!(MysqlAsync);
