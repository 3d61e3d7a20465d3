//! `ToolContext::once_rusqlite` on SQLite, from blocking tools: a database file in WAL
//! mode; each call opens its own connection (a duplicate waits for the write lock in
//! SQLite's busy handler, up to its `busy_timeout`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use txretry_tool::{BoxError, Once, Tool, ToolContext};

use crate::common::{Args, Work};
use crate::driver::{Db, OnceDriver, Record};

pub struct Rusqlite {
    /// The test's own connection.
    admin: Connection,
    path: Arc<Path>,
    _dir: tempfile::TempDir,
}

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(20))?;
    Ok(conn)
}

impl OnceDriver for Rusqlite {
    /// The database file each call opens.
    type Handle = Arc<Path>;
    const DB: Db = Db::Sqlite;

    async fn open(_test: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let path: PathBuf = dir.path().join("once.db");
        let admin = connect(&path).unwrap();
        admin
            .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .unwrap();
        Some(Rusqlite {
            admin,
            path: path.into(),
            _dir: dir,
        })
    }

    fn handle(&self) -> Arc<Path> {
        Arc::clone(&self.path)
    }

    fn server_url(&self) -> Option<&str> {
        None
    }

    async fn through(_: &str) -> Arc<Path> {
        unreachable!("SQLite has no server to reach through a proxy")
    }

    fn tool(path: &Arc<Path>, name: &'static str, work: &Work) -> Tool {
        let (path, work) = (Arc::clone(path), work.clone());
        Tool::blocking(
            name,
            "The test tool.",
            move |ctx: ToolContext, args: Args| {
                let mut conn = connect(&path)?;
                let placed = ctx.once_rusqlite(&mut conn, |tx| {
                    let n = work.runs.bump();
                    tx.execute_batch(&work.insert_sql(args.item))?;
                    work.gate.pass_blocking();
                    if work.hangs(n) {
                        while !ctx.is_cancelled() {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        // A thread cannot be stopped from outside: the timed-out attempt ends
                        // here, as a process dying would; its transaction rolls back as the
                        // panic unwinds, and the invocation discards what the attempt returns.
                        panic!("the timed-out attempt stops");
                    }
                    if let Some(sql) = work.extra_sql() {
                        tx.execute_batch(&sql)?;
                    }
                    work.check(n, args.item)?;
                    let effects: i64 = tx.query_row(&work.count_sql(), [], |row| row.get(0))?;
                    Ok::<_, BoxError>(work.placed(args.item, effects))
                })?;
                work.answered();
                Ok::<_, BoxError>(placed)
            },
        )
    }

    async fn migrate(&self, once: &Once) {
        // `migrate_rusqlite` takes the connection `&mut`; the fixture is shared.
        once.migrate_rusqlite(&mut connect(&self.path).unwrap())
            .unwrap();
    }

    async fn prune(&self, once: &Once, older_than: Duration) -> u64 {
        once.prune_rusqlite(&self.admin, older_than).unwrap()
    }

    async fn exec(&self, sql: String) {
        self.admin.execute_batch(&sql).unwrap();
    }

    async fn scalar(&self, sql: String) -> i64 {
        self.admin.query_row(&sql, [], |row| row.get(0)).unwrap()
    }

    async fn record(&self, records: &str, key: &str) -> Record {
        let sql = format!(
            "SELECT status, output, error_kind, error_message FROM {records} WHERE call_key = ?1"
        );
        self.admin
            .query_row(&sql, [key], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })
            .unwrap()
    }
}

crate::scenarios::once_scenarios!(Rusqlite);
