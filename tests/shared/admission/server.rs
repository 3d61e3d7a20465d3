//! The SQL by which Postgres and MySQL show sessions and locks ([`Server`]), what a driver
//! reports for a refused lock ([`Refusal`]), and the name of a key's named lock on MySQL.

use txretry::{Code, KeyHash, SqlState};
use txretry_testkit::intervals::WAIT;

use super::Failed;

/// The server a binary's driver talks to.
#[allow(dead_code)] // each binary names one of them
pub enum Server {
    Postgres,
    MySql,
}

impl Server {
    /// The server's URL, or `None` to skip `test`.
    pub(super) fn url(&self, test: &str) -> Option<String> {
        match self {
            Server::Postgres => txretry_testkit::postgres_url(test),
            Server::MySql => txretry_testkit::mysql_url(test),
        }
    }

    /// `CREATE TABLE {table}` for the intervals: an `id` the server numbers, the key `k`,
    /// the `process`, and when the transaction `started` and `ended` (microseconds).
    /// What follows a `CREATE TABLE`'s column list.
    pub(super) fn table_options(&self) -> &'static str {
        match self {
            Server::Postgres => "",
            Server::MySql => " ENGINE=InnoDB",
        }
    }

    pub(super) fn interval_table(&self, table: &str) -> String {
        match self {
            Server::Postgres => format!(
                "CREATE TABLE {table} (id bigserial PRIMARY KEY, k bigint NOT NULL,
                 process bigint NOT NULL, started timestamptz NOT NULL, ended timestamptz NOT NULL)"
            ),
            Server::MySql => format!(
                "CREATE TABLE {table} (id bigint AUTO_INCREMENT PRIMARY KEY, k bigint NOT NULL,
                 process bigint NOT NULL, started datetime(6) NOT NULL, ended datetime(6) NOT NULL)
                 ENGINE=InnoDB"
            ),
        }
    }
}

/// Server-side SQL for the session scenarios: `key`s are the tests' own names, never input.
impl Server {
    /// The session's id (`pg_backend_pid()`, `CONNECTION_ID()`), as a bigint.
    pub fn session_id(&self) -> &'static str {
        match self {
            Server::Postgres => "SELECT pg_backend_pid()::bigint",
            Server::MySql => "SELECT CAST(CONNECTION_ID() AS SIGNED)",
        }
    }

    /// A minute's sleep in the server: only the session's end stops it sooner.
    pub fn sleep_a_minute(&self) -> &'static str {
        match self {
            Server::Postgres => "SELECT pg_sleep(60)",
            Server::MySql => "DO SLEEP(60)",
        }
    }

    /// The rows of `pg_locks` that are `key`'s advisory lock, as `pg_advisory_lock(bigint)`
    /// names it: its number's high and low 32 bits in `classid` and `objid`.
    fn advisory_locks(key: &(String, i64)) -> String {
        format!(
            "pg_locks WHERE locktype = 'advisory' AND objsubid = 1
             AND ((classid::bigint << 32) | objid::bigint) = {}",
            KeyHash::of(key).to_i64()
        )
    }

    /// The id of a session waiting on the server for `key`'s lock, or 0: a not granted
    /// advisory lock, or a session in the runner's `GET_LOCK('<lock>', <WAIT>)` on the key's
    /// named lock (the wait of [`shared`](txretry_testkit::intervals::shared)).
    pub(super) fn waiting_for(&self, key: &(String, i64)) -> String {
        match self {
            Server::Postgres => format!(
                "SELECT COALESCE(max(pid), 0)::bigint FROM {} AND NOT granted",
                Self::advisory_locks(key)
            ),
            Server::MySql => format!(
                "SELECT COALESCE(MAX(CAST(id AS SIGNED)), 0) FROM information_schema.processlist
                 WHERE state = 'User lock' AND INSTR(info, 'GET_LOCK(''{}'', {})') > 0",
                lock_name(key),
                WAIT.as_secs()
            ),
        }
    }

    /// The id of the session holding `key`'s lock, or 0 (`IS_USED_LOCK` on MySQL).
    pub(super) fn holder_of(&self, key: &(String, i64)) -> String {
        match self {
            Server::Postgres => format!(
                "SELECT COALESCE(max(pid), 0)::bigint FROM {} AND granted",
                Self::advisory_locks(key)
            ),
            Server::MySql => format!(
                "SELECT COALESCE(CAST(IS_USED_LOCK('{}') AS SIGNED), 0)",
                lock_name(key)
            ),
        }
    }

    /// Ends session `id` (its connection with it).
    pub(super) fn kill(&self, id: i64) -> String {
        match self {
            Server::Postgres => format!("SELECT pg_terminate_backend({id})"),
            Server::MySql => format!("KILL {id}"),
        }
    }

    /// What the server shows of session `id`, as a [`SessionState`] number.
    pub(super) fn session_state(&self, id: i64) -> String {
        match self {
            Server::Postgres => format!(
                "SELECT COALESCE(max(CASE WHEN state = 'idle' THEN 1 ELSE 2 END), 0)::bigint
                 FROM pg_stat_activity WHERE pid = {id}"
            ),
            Server::MySql => format!(
                "SELECT COALESCE(MAX(IF(command = 'Sleep', 1, 2)), 0)
                 FROM information_schema.processlist WHERE id = {id}"
            ),
        }
    }

    /// 1 if a new session can take `key`'s lock at once (it lets go of it in the same
    /// statement), else 0.
    pub(super) fn key_free(&self, key: &(String, i64)) -> String {
        match self {
            Server::Postgres => {
                let id = KeyHash::of(key).to_i64();
                format!(
                    "SELECT (pg_try_advisory_lock({id}) AND pg_advisory_unlock({id}))::int::bigint"
                )
            }
            Server::MySql => {
                let lock = lock_name(key);
                format!(
                    "SELECT CAST(GET_LOCK('{lock}', 0) = 1 AND RELEASE_LOCK('{lock}') = 1 AS SIGNED)"
                )
            }
        }
    }

    /// A session setting a process sets on each of its sessions, which the runner's
    /// transactions (and its waits for keys) must keep: the statement that sets it, and a
    /// query of 1 while it is still set. Postgres's `lock_timeout` (the runner sets its own,
    /// `LOCAL`, for a wait), InnoDB's lock-wait timeout on MySQL.
    pub(super) fn own_setting(&self) -> (&'static str, &'static str) {
        match self {
            Server::Postgres => (
                "SET lock_timeout = '7s'",
                "SELECT (current_setting('lock_timeout') = '7s')::int::bigint",
            ),
            Server::MySql => (
                "SET SESSION innodb_lock_wait_timeout = 7",
                "SELECT CAST(@@SESSION.innodb_lock_wait_timeout = 7 AS SIGNED)",
            ),
        }
    }

    /// The statement that makes every statement of a session fail after 100 ms:
    /// `statement_timeout` on Postgres, `max_statement_time` on MariaDB (a role's or a
    /// pool's setting in production).
    pub(super) fn short_statement_timeout(&self) -> &'static str {
        match self {
            Server::Postgres => "SET statement_timeout = 100",
            Server::MySql => "SET SESSION max_statement_time = 0.1",
        }
    }

    /// How many of `keys`' locks the session running it holds.
    pub(super) fn held_here(&self, keys: &[(String, i64)]) -> String {
        match self {
            Server::Postgres => {
                let ids: Vec<String> = keys
                    .iter()
                    .map(|key| KeyHash::of(key).to_i64().to_string())
                    .collect();
                format!(
                    "SELECT count(*)::bigint FROM pg_locks WHERE locktype = 'advisory'
                     AND objsubid = 1 AND granted AND pid = pg_backend_pid()
                     AND ((classid::bigint << 32) | objid::bigint) IN ({})",
                    ids.join(", ")
                )
            }
            Server::MySql => {
                let held: Vec<String> = keys
                    .iter()
                    .map(|key| {
                        format!(
                            "COALESCE(IS_USED_LOCK('{}') = CONNECTION_ID(), 0)",
                            lock_name(key)
                        )
                    })
                    .collect();
                format!("SELECT CAST({} AS SIGNED)", held.join(" + "))
            }
        }
    }

    /// Cancels the statement session `id` is running (its session stays).
    pub(super) fn cancel(&self, id: i64) -> String {
        match self {
            Server::Postgres => format!("SELECT pg_cancel_backend({id})"),
            Server::MySql => format!("KILL QUERY {id}"),
        }
    }

    /// A statement on a missing table: a database error the runner does not retry.
    pub(super) fn missing_table(&self, table: &str) -> String {
        format!("SELECT count(*) FROM {table}_missing")
    }

    /// What the driver reports when the runner's wait for `key`'s lock was cancelled
    /// ([`Server::cancel`]): Postgres's `query_canceled` (57014); on MySQL the runner's
    /// 1317 (`GET_LOCK` returned NULL), which names the lock. Both permanent.
    pub(super) fn wait_cancelled(&self, key: &(String, i64)) -> Refusal {
        match self {
            Server::Postgres => Refusal {
                code: Code::SqlState(SqlState::new("57014").unwrap()),
                sqlstate: "57014",
                number: None,
                message_starts: None,
            },
            Server::MySql => Refusal {
                code: Code::MySql(1317),
                sqlstate: "70100",
                number: Some(1317),
                message_starts: Some(format!(
                    "txretry admission: the wait for named lock '{}' was interrupted",
                    lock_name(key)
                )),
            },
        }
    }

    /// What the driver reports when the runner's lock of `key` was not granted within the
    /// wait: Postgres's own `lock_timeout` (55P03); on MySQL the runner's 1205 (SQLSTATE
    /// HY000), which names the lock, for a `GET_LOCK` that timed out.
    pub(super) fn lock_timeout(&self, key: &(String, i64)) -> Refusal {
        match self {
            Server::Postgres => Refusal {
                code: Code::SqlState(SqlState::new("55P03").unwrap()),
                sqlstate: "55P03",
                number: None,
                message_starts: None,
            },
            Server::MySql => Refusal {
                code: Code::MySql(1205),
                sqlstate: "HY000",
                number: Some(1205),
                message_starts: Some(format!(
                    "txretry admission: named lock '{}' not granted within ",
                    lock_name(key)
                )),
            },
        }
    }
}

/// What a driver reports for a lock not granted in time ([`Server::lock_timeout`]).
pub(super) struct Refusal {
    /// The outcome's code.
    code: Code,
    /// The error's SQLSTATE.
    sqlstate: &'static str,
    /// Its MySQL error number.
    number: Option<u16>,
    /// How its message begins, where it is the runner's own.
    message_starts: Option<String>,
}

impl Refusal {
    /// Asserts `failed` is this refusal.
    #[track_caller]
    pub(super) fn assert(&self, failed: &Failed) {
        assert_eq!(failed.outcome.code(), Some(self.code), "{failed:?}");
        let said = &failed.said;
        assert_eq!(said.sqlstate.as_deref(), Some(self.sqlstate), "{failed:?}");
        assert_eq!(said.number, self.number, "{failed:?}");
        if let Some(start) = &self.message_starts {
            assert!(said.message.starts_with(start), "{failed:?}");
        }
    }
}

/// The name of `key`'s named lock on MySQL.
pub fn lock_name(key: &(String, i64)) -> String {
    format!("txretry:{:016x}", KeyHash::of(key).to_u64())
}
