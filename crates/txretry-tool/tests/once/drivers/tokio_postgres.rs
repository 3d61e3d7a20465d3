//! `ToolContext::once_tokio_postgres` on PostgreSQL. Each call connects its own client, as
//! a handler without a pool would; the runner cannot replace that client, so a lost
//! COMMIT answer is resolved by the invocation running the handler again.

use std::time::Duration;

use tokio_postgres::{Client, NoTls};
use txretry_tool::{BoxError, Once, Tool, ToolContext};

use crate::common::{Args, Work};
use crate::driver::{Db, OnceDriver, Record};

/// The test's own client.
pub struct TokioPostgres {
    admin: Client,
    url: String,
}

async fn connect(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

impl OnceDriver for TokioPostgres {
    /// The URL each call connects to.
    type Handle = String;
    const DB: Db = Db::Postgres;

    async fn open(test: &str) -> Option<Self> {
        let url = txretry_testkit::postgres_url(test)?;
        let admin = connect(&url).await.unwrap();
        Some(TokioPostgres { admin, url })
    }

    fn handle(&self) -> String {
        self.url.clone()
    }

    fn server_url(&self) -> Option<&str> {
        Some(&self.url)
    }

    async fn through(url: &str) -> String {
        url.to_owned()
    }

    fn tool(url: &String, name: &'static str, work: &Work) -> Tool {
        let (url, work) = (url.clone(), work.clone());
        Tool::new(
            name,
            "The test tool.",
            move |ctx: ToolContext, args: Args| {
                let (url, work) = (url.clone(), work.clone());
                async move {
                    let mut client = connect(&url).await?;
                    let w = work.clone();
                    let placed = ctx
                        .once_tokio_postgres(&mut client, async move |tx| {
                            let n = w.runs.bump();
                            tx.batch_execute(&w.insert_sql(args.item)).await?;
                            w.gate.pass().await;
                            if w.hangs(n) {
                                std::future::pending::<()>().await;
                            }
                            if let Some(sql) = w.extra_sql() {
                                tx.batch_execute(&sql).await?;
                            }
                            w.check(n, args.item)?;
                            let effects: i64 = tx.query_one(&w.count_sql(), &[]).await?.get(0);
                            Ok::<_, BoxError>(w.placed(args.item, effects))
                        })
                        .await?;
                    work.answered();
                    Ok::<_, BoxError>(placed)
                }
            },
        )
    }

    async fn migrate(&self, once: &Once) {
        // `migrate_tokio_postgres` takes the client `&mut`; the fixture is shared.
        let mut client = connect(&self.url).await.unwrap();
        once.migrate_tokio_postgres(&mut client).await.unwrap();
    }

    async fn prune(&self, once: &Once, older_than: Duration) -> u64 {
        once.prune_tokio_postgres(&self.admin, older_than)
            .await
            .unwrap()
    }

    async fn exec(&self, sql: String) {
        self.admin.batch_execute(&sql).await.unwrap();
    }

    async fn scalar(&self, sql: String) -> i64 {
        self.admin.query_one(&sql, &[]).await.unwrap().get(0)
    }

    async fn record(&self, records: &str, key: &str) -> Record {
        let sql = format!(
            "SELECT status, output, error_kind, error_message FROM {records} WHERE call_key = $1"
        );
        let row = self.admin.query_one(&sql, &[&key]).await.unwrap();
        (row.get(0), row.get(1), row.get(2), row.get(3))
    }
}

crate::scenarios::once_scenarios!(TokioPostgres);
crate::scenarios::commit_fault_scenarios!(TokioPostgres);
crate::terminated::terminated_scenarios!(TokioPostgres);
