//! `CommitFaultProxy` against the real servers, with every driver txretry supports over a
//! network: armed, a COMMIT lands on the server while the client gets a connection-class
//! error (SQLSTATE 08P01 / MySQL error 2013); unarmed, traffic passes through untouched.
//!
//! The row count is checked over a direct connection, which is the point of the proxy: the
//! error alone does not say whether the transaction committed.

#[cfg(feature = "postgres")]
mod postgres {
    use sqlx::postgres::PgArguments;
    use sqlx::query::Query;
    use sqlx::{AssertSqlSafe, Connection, PgConnection, Postgres, Transaction};
    use tokio_postgres::error::SqlState;
    use tokio_postgres::{Client, NoTls};
    use txretry_testkit::{CommitFaultProxy, postgres_url, unique_name};

    async fn connect(url: &str) -> Client {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .expect("connect to postgres");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    /// A fresh table `(id int)` over a direct connection, which is returned to check with,
    /// and a proxy in front of the server; `None` when the test must skip.
    async fn start(test: &str, prefix: &str) -> Option<(Client, String, CommitFaultProxy)> {
        let url = postgres_url(test)?;
        let direct = connect(&url).await;
        let name = unique_name(prefix);
        direct
            .batch_execute(&format!("CREATE TABLE {name} (id int NOT NULL)"))
            .await
            .expect("create table");
        let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
        Some((direct, name, proxy))
    }

    async fn drop_table(direct: &Client, table: &str) {
        direct
            .batch_execute(&format!("DROP TABLE {table}"))
            .await
            .expect("drop table");
    }

    /// A sqlx transaction on `conn` that has run `insert`, for the caller to commit.
    async fn sqlx_inserted<'c>(
        conn: &'c mut PgConnection,
        insert: Query<'_, Postgres, PgArguments>,
    ) -> Transaction<'c, Postgres> {
        let mut tx = conn.begin().await.expect("BEGIN");
        insert.execute(&mut *tx).await.expect("INSERT");
        tx
    }

    async fn rows_with(direct: &Client, table: &str, id: i32) -> i64 {
        direct
            .query_one(
                &format!("SELECT count(*) FROM {table} WHERE id = $1"),
                &[&id],
            )
            .await
            .expect("count rows")
            .get(0)
    }

    fn assert_pgbouncer_error(err: &tokio_postgres::Error, how: &str) {
        assert_eq!(
            err.code(),
            Some(&SqlState::PROTOCOL_VIOLATION),
            "{how}: {err:?}"
        );
        let db = err.as_db_error().expect("a server error");
        assert_eq!(db.severity(), "FATAL", "{how}");
        assert_eq!(db.message(), "server conn crashed?", "{how}");
    }

    #[tokio::test]
    async fn tokio_postgres_commit_lands_but_the_client_sees_08p01() {
        let Some((direct, table, proxy)) = start(
            "tokio_postgres_commit_lands_but_the_client_sees_08p01",
            "proxy_tp",
        )
        .await
        else {
            return;
        };

        // Every way tokio-postgres can send a COMMIT: simple Query alone or after another
        // statement, Transaction::commit, and the extended protocol (prepare + execute).
        let ways = [
            "SELECT 1; COMMIT",
            "COMMIT",
            "Transaction::commit",
            "execute",
        ];
        for (id, how) in (1..).zip(ways) {
            let mut client = connect(proxy.url()).await;
            proxy.arm_commit_faults(1);
            let insert = format!("INSERT INTO {table} VALUES ({id})");
            let err = if how == "Transaction::commit" {
                let tx = client.transaction().await.expect("BEGIN");
                tx.batch_execute(&insert).await.expect("INSERT");
                tx.commit().await.expect_err("the proxy fails the commit")
            } else {
                client
                    .batch_execute(&format!("BEGIN; {insert}"))
                    .await
                    .expect("BEGIN; INSERT");
                if how == "execute" {
                    client.execute("COMMIT", &[]).await.map(drop)
                } else {
                    client.batch_execute(how).await
                }
                .expect_err("the proxy fails the commit")
            };
            assert_pgbouncer_error(&err, how);
            assert_eq!(proxy.faults_injected(), id as usize, "{how}");
            assert_eq!(proxy.armed_faults(), 0, "{how}");
            assert_eq!(
                rows_with(&direct, &table, id).await,
                1,
                "{how}: the commit landed"
            );
        }
        assert_eq!(proxy.commits_seen(), ways.len());
        drop_table(&direct, &table).await;
    }

    #[tokio::test]
    async fn sqlx_postgres_commit_lands_but_the_client_sees_08p01() {
        let Some((direct, table, proxy)) = start(
            "sqlx_postgres_commit_lands_but_the_client_sees_08p01",
            "proxy_sqlx_pg",
        )
        .await
        else {
            return;
        };

        let mut conn = PgConnection::connect(proxy.url()).await.expect("connect");
        proxy.arm_commit_faults(1);
        let insert = sqlx::query(AssertSqlSafe(format!("INSERT INTO {table} VALUES (1)")));
        let err = sqlx_inserted(&mut conn, insert)
            .await
            .commit()
            .await
            .expect_err("the proxy fails the commit");
        let db = err.as_database_error().expect("a server error");
        assert_eq!(db.code().as_deref(), Some("08P01"), "{err:?}");
        assert_eq!(proxy.faults_injected(), 1);
        assert_eq!(rows_with(&direct, &table, 1).await, 1, "the commit landed");
        drop_table(&direct, &table).await;
    }

    #[tokio::test]
    async fn postgres_unarmed_passes_everything_through() {
        let Some((direct, table, proxy)) = start(
            "postgres_unarmed_passes_everything_through",
            "proxy_pg_plain",
        )
        .await
        else {
            return;
        };

        let mut client = connect(proxy.url()).await;
        let tx = client.transaction().await.expect("BEGIN");
        tx.execute(&format!("INSERT INTO {table} VALUES ($1)"), &[&1i32])
            .await
            .expect("INSERT");
        tx.commit().await.expect("COMMIT");
        let echoed: String = client
            .query_one("SELECT $1::text", &[&"through the proxy"])
            .await
            .expect("SELECT")
            .get(0);
        assert_eq!(echoed, "through the proxy");

        let mut conn = PgConnection::connect(proxy.url()).await.expect("connect");
        let insert = sqlx::query(AssertSqlSafe(format!("INSERT INTO {table} VALUES ($1)")));
        sqlx_inserted(&mut conn, insert.bind(2i32))
            .await
            .commit()
            .await
            .expect("COMMIT");

        // Armed for one: it is spent on the first COMMIT, the next passes.
        proxy.arm_commit_faults(1);
        client
            .batch_execute("BEGIN; COMMIT")
            .await
            .expect_err("the armed fault");
        let insert = sqlx::query(AssertSqlSafe(format!("INSERT INTO {table} VALUES (3)")));
        sqlx_inserted(&mut conn, insert)
            .await
            .commit()
            .await
            .expect("COMMIT after the fault was spent");

        assert_eq!(proxy.faults_injected(), 1);
        assert_eq!(proxy.commits_seen(), 4);
        for id in 1..=3 {
            assert_eq!(rows_with(&direct, &table, id).await, 1, "row {id}");
        }
        drop_table(&direct, &table).await;
    }

    /// From a test with no runtime of its own: the proxy brings its own.
    #[test]
    fn serves_a_blocking_caller_and_stops_when_dropped() {
        let Some(url) = postgres_url("serves_a_blocking_caller_and_stops_when_dropped") else {
            return;
        };
        let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
        let addr = proxy.local_addr();
        std::net::TcpStream::connect(addr).expect("the proxy listens");
        drop(proxy);
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "still listening after drop"
        );
    }
}

#[cfg(feature = "mysql")]
mod mysql {
    use mysql_async::prelude::*;
    use mysql_async::{Conn, TxOpts};
    use sqlx::mysql::{MySqlArguments, MySqlDatabaseError};
    use sqlx::query::Query;
    use sqlx::{AssertSqlSafe, Connection, MySql, MySqlConnection, Transaction};
    use txretry_testkit::{CommitFaultProxy, mysql_url, unique_name};

    /// What a MySQL client reports when the link drops mid-query.
    const CR_SERVER_LOST: u16 = 2013;

    async fn connect(url: &str) -> Conn {
        Conn::from_url(url).await.expect("connect to mysql")
    }

    /// A fresh table `(id int)` over a direct connection, which is returned to check with,
    /// and a proxy in front of the server; `None` when the test must skip.
    async fn start(test: &str, prefix: &str) -> Option<(Conn, String, CommitFaultProxy)> {
        let url = mysql_url(test)?;
        let mut direct = connect(&url).await;
        let name = unique_name(prefix);
        direct
            .query_drop(format!(
                "CREATE TABLE {name} (id int NOT NULL) ENGINE=InnoDB"
            ))
            .await
            .expect("create table");
        let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
        Some((direct, name, proxy))
    }

    async fn drop_table(direct: &mut Conn, table: &str) {
        direct
            .query_drop(format!("DROP TABLE {table}"))
            .await
            .expect("drop table");
    }

    /// A sqlx transaction on `conn` that has run `insert`, for the caller to commit.
    async fn sqlx_inserted<'c>(
        conn: &'c mut MySqlConnection,
        insert: Query<'_, MySql, MySqlArguments>,
    ) -> Transaction<'c, MySql> {
        let mut tx = conn.begin().await.expect("BEGIN");
        insert.execute(&mut *tx).await.expect("INSERT");
        tx
    }

    /// Asserts that row `id` is in `table` once: the COMMIT the client saw fail landed.
    async fn assert_commit_landed(direct: &mut Conn, table: &str, id: i32) {
        let rows: i64 = direct
            .exec_first(format!("SELECT count(*) FROM {table} WHERE id = ?"), (id,))
            .await
            .expect("count rows")
            .expect("a row");
        assert_eq!(rows, 1, "the commit landed");
    }

    #[tokio::test]
    async fn mysql_async_commit_lands_but_the_client_sees_2013() {
        let Some((mut direct, table, proxy)) = start(
            "mysql_async_commit_lands_but_the_client_sees_2013",
            "proxy_ma",
        )
        .await
        else {
            return;
        };

        let mut conn = connect(proxy.url()).await;
        proxy.arm_commit_faults(1);
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .expect("BEGIN");
        tx.query_drop(format!("INSERT INTO {table} VALUES (1)"))
            .await
            .expect("INSERT");
        let err = tx.commit().await.expect_err("the proxy fails the commit");
        match &err {
            mysql_async::Error::Server(e) => {
                assert_eq!(e.code, CR_SERVER_LOST, "{err:?}");
                assert_eq!(e.state, "HY000", "{err:?}");
            }
            other => panic!("not the proxy's error: {other:?}"),
        }
        assert_eq!(proxy.faults_injected(), 1);
        assert_commit_landed(&mut direct, &table, 1).await;

        // A COMMIT after a result set in one multi-statement query: the proxy must read
        // the whole answer (rows, then the COMMIT's OK) before it answers with the error.
        let mut conn = connect(proxy.url()).await;
        proxy.arm_commit_faults(1);
        let err = conn
            .query_drop(format!(
                "BEGIN; INSERT INTO {table} VALUES (2); SELECT id FROM {table}; COMMIT"
            ))
            .await
            .expect_err("the proxy fails the commit");
        assert!(
            matches!(&err, mysql_async::Error::Server(e) if e.code == CR_SERVER_LOST),
            "{err:?}"
        );
        assert_eq!(proxy.faults_injected(), 2);
        assert_commit_landed(&mut direct, &table, 2).await;
        drop_table(&mut direct, &table).await;
    }

    #[tokio::test]
    async fn sqlx_mysql_commit_lands_but_the_client_sees_2013() {
        let Some((mut direct, table, proxy)) = start(
            "sqlx_mysql_commit_lands_but_the_client_sees_2013",
            "proxy_sqlx_my",
        )
        .await
        else {
            return;
        };

        let mut conn = MySqlConnection::connect(proxy.url())
            .await
            .expect("connect");
        proxy.arm_commit_faults(1);
        let insert = sqlx::query(AssertSqlSafe(format!("INSERT INTO {table} VALUES (1)")));
        let err = sqlx_inserted(&mut conn, insert)
            .await
            .commit()
            .await
            .expect_err("the proxy fails the commit");
        let number = err
            .as_database_error()
            .and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>())
            .map(MySqlDatabaseError::number);
        assert_eq!(number, Some(CR_SERVER_LOST), "{err:?}");
        assert_eq!(proxy.faults_injected(), 1);
        assert_commit_landed(&mut direct, &table, 1).await;
        drop_table(&mut direct, &table).await;
    }

    #[tokio::test]
    async fn mysql_unarmed_passes_everything_through() {
        let Some((mut direct, table, proxy)) =
            start("mysql_unarmed_passes_everything_through", "proxy_my_plain").await
        else {
            return;
        };

        let mut conn = connect(proxy.url()).await;
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .expect("BEGIN");
        tx.exec_drop(format!("INSERT INTO {table} VALUES (?)"), (1,))
            .await
            .expect("INSERT");
        tx.commit().await.expect("COMMIT");
        let echoed: Option<String> = conn
            .exec_first("SELECT ?", ("through the proxy",))
            .await
            .expect("SELECT");
        assert_eq!(echoed.as_deref(), Some("through the proxy"));

        let mut sqlx_conn = MySqlConnection::connect(proxy.url())
            .await
            .expect("connect");
        let insert = sqlx::query(AssertSqlSafe(format!("INSERT INTO {table} VALUES (?)")));
        sqlx_inserted(&mut sqlx_conn, insert.bind(2i32))
            .await
            .commit()
            .await
            .expect("COMMIT");

        // A multi-row answer before the next command must still be relayed whole.
        let ids: Vec<i32> = conn
            .query(format!("SELECT id FROM {table} ORDER BY id"))
            .await
            .expect("SELECT");
        assert_eq!(ids, [1, 2]);

        assert_eq!(proxy.faults_injected(), 0);
        assert_eq!(proxy.commits_seen(), 2);
        drop_table(&mut direct, &table).await;
    }
}
