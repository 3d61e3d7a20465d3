//! A Postgres COMMIT held on the server, and its backend terminated in the middle of it:
//! the COMMIT whose outcome the client cannot know, made for real (no proxy, no fake
//! error).
//!
//! [`HeldCommit::install`] puts a deferred constraint trigger on a table: at COMMIT, for
//! every row the transaction inserted, it waits for an advisory lock that the helper's own
//! session holds. A transaction that inserts into the table therefore stops inside its
//! COMMIT. [`HeldCommit::terminate_in_commit`] spawns the killer: it finds the session its
//! lock blocks with `COMMIT` in its query text (`pg_blocking_pids`, so no other test's
//! session can match, and one reached through a pooler is found as well),
//! `pg_terminate_backend`s it, waits until the backend has gone, and only then lets the
//! lock go. The killed transaction never got its lock, so it did not commit: the server
//! rolled it back when the backend exited, while the client got 57P01 or a closed
//! connection in answer to its COMMIT. Anything run after the release (a retry's COMMIT)
//! passes.
//!
//! Used by the tokio-postgres runner's test, the PgBouncer test (the pooler's server link
//! cut during COMMIT) and txretry-tool's `once` tests on the Postgres pairs.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};

/// How many times the killer looks for the blocked COMMIT, and how long it waits in
/// between: about 30 s in all, so a broken setup fails instead of hanging.
const POLLS: u32 = 3000;
const POLL_EVERY: Duration = Duration::from_millis(10);

/// A deferred trigger on one table that holds every COMMIT inserting into it, until the
/// session running that COMMIT has been terminated. See the [module](self) documentation.
///
/// The helper's session (which holds the lock) connects to the server directly: give
/// [`install`](Self::install) the server's URL, never a pooler's.
pub struct HeldCommit {
    url: String,
    table: String,
    function: String,
    /// The session that holds the lock, until the killer takes it.
    holder: Option<Client>,
}

/// The session the killer terminated in its COMMIT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    /// Its backend's process id.
    pub pid: i32,
    /// Its `application_name` (a pooler passes its client's on).
    pub application_name: String,
    /// Its query text, which contains `COMMIT`.
    pub query: String,
}

impl HeldCommit {
    /// Connects to `url` (the server itself), creates the trigger on `table` (which must
    /// exist) and takes the lock the trigger waits for. Panics when any of that fails.
    pub async fn install(url: &str, table: &str) -> HeldCommit {
        let function = format!("{table}_held_commit");
        let holder = connect(url).await;
        holder
            .batch_execute(&format!(
                "CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                     PERFORM pg_advisory_xact_lock(hashtext('{function}'));
                     RETURN NULL;
                 END $$;
                 CREATE CONSTRAINT TRIGGER {function} AFTER INSERT ON {table}
                     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {function}();
                 SELECT pg_advisory_lock(hashtext('{function}'));"
            ))
            .await
            .unwrap_or_else(|e| panic!("hold the COMMITs on {table}: {e}"));
        HeldCommit {
            url: url.to_owned(),
            table: table.to_owned(),
            function,
            holder: Some(holder),
        }
    }

    /// Spawns the killer: it waits for a session blocked by this lock with `COMMIT` in its
    /// query, terminates it, waits until its backend has exited, then releases the lock. The
    /// task's result names the session it terminated.
    ///
    /// The task panics (after releasing the lock, so the held COMMIT goes through and the
    /// test does not hang) when no such session appears within about 30 s, and when the
    /// termination fails. Call it once.
    pub fn terminate_in_commit(&mut self) -> JoinHandle<Terminated> {
        let holder = self
            .holder
            .take()
            .expect("terminate_in_commit is called once");
        let function = self.function.clone();
        let table = self.table.clone();
        // On a panic the holder is dropped with the task: its session ends, and the lock
        // with it.
        tokio::spawn(async move {
            let victim = blocked_commit(&holder)
                .await
                .unwrap_or_else(|| panic!("no COMMIT on {table} blocked within 30 s"));
            let killed: bool = holder
                .query_one("SELECT pg_terminate_backend($1)", &[&victim.pid])
                .await
                .expect("pg_terminate_backend")
                .get(0);
            assert!(killed, "pg_terminate_backend({}) failed", victim.pid);
            // Only once the backend has gone may the lock go: released earlier, the trigger
            // could still take it and the COMMIT land.
            let mut gone = false;
            for _ in 0..POLLS {
                gone = holder
                    .query_one(
                        "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)",
                        &[&victim.pid],
                    )
                    .await
                    .expect("poll pg_stat_activity")
                    .get(0);
                if gone {
                    break;
                }
                tokio::time::sleep(POLL_EVERY).await;
            }
            assert!(gone, "backend {} never exited", victim.pid);
            let released: bool = holder
                .query_one(
                    &format!("SELECT pg_advisory_unlock(hashtext('{function}'))"),
                    &[],
                )
                .await
                .expect("release the lock")
                .get(0);
            assert!(released, "the lock was held");
            victim
        })
    }

    /// Drops the trigger and its function (the test drops its table, before or after) and
    /// the lock if it is still held.
    pub async fn remove(self) {
        drop(self.holder);
        connect(&self.url)
            .await
            .batch_execute(&format!(
                "DROP FUNCTION IF EXISTS {}() CASCADE",
                self.function
            ))
            .await
            .expect("drop the held-commit trigger");
    }
}

/// The session `holder`'s lock blocks with `COMMIT` in its query, polled for about 30 s.
async fn blocked_commit(holder: &Client) -> Option<Terminated> {
    for _ in 0..POLLS {
        let row = holder
            .query_opt(
                "SELECT pid, coalesce(application_name, ''), query FROM pg_stat_activity \
                 WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid)) \
                   AND query ILIKE '%COMMIT%'",
                &[],
            )
            .await
            .expect("poll pg_stat_activity");
        if let Some(row) = row {
            return Some(Terminated {
                pid: row.get(0),
                application_name: row.get(1),
                query: row.get(2),
            });
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    None
}

/// A session whose connection runs on the current runtime until the client is dropped.
async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}
