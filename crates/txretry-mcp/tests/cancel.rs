//! Cancellation: a `notifications/cancelled` for a call whose transaction has not committed
//! stops it — its statement is cancelled in the server, its writes are rolled back, nothing
//! is recorded — and the same call sent again runs once. An attempt that times out has its
//! statement cancelled too, and its locks go with it. On Postgres and MariaDB, with the
//! transaction held inside the server (`pg_sleep`, `SLEEP`) when the cancel or the timeout
//! comes: left alone, the server runs the statement to its end, holding its locks.

mod common;

use std::time::Duration;

use common::{Client, Db, object, outcome, stdio, within};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::json;

/// The tools, with `{sleep}` the database's sleep function.
const CONFIG: &str = r#"
sources:
  db: { url: "${CANCEL_URL}" }
tools:
  slow_note:
    source: db
    description: Writes a note, then waits inside the transaction.
    parameters:
      note: { type: string, min: 1, max: 64 }
      wait_s: { type: number, min: 0, max: 3600 }
    statements:
      - sql: INSERT INTO notes (note) VALUES (:note)
      - sql: SELECT {sleep}(:wait_s)
    once: { key: [note] }
    returns: { template: "noted {note}" }
  held_count:
    source: db
    description: Counts, then waits inside the transaction, holding the row's lock.
    timeout: 1s
    parameters:
      wait_s: { type: number, min: 0, max: 3600 }
    statements:
      - sql: UPDATE counters SET n = n + 1 WHERE id = 1
      - sql: SELECT {sleep}(:wait_s)
"#;

const TABLES: &str = "CREATE TABLE notes (note TEXT NOT NULL);
    CREATE TABLE counters (id INT PRIMARY KEY, n INT NOT NULL);
    INSERT INTO counters VALUES (1, 0)";

/// What differs between the databases: the sleep, and how the test sees it from outside.
struct Dialect {
    /// The sleep function.
    sleep: &'static str,
    /// How many of the test database's sessions are in the sleep.
    sleeping: &'static str,
    /// Whether the `once` records' table exists in the test database.
    records_table: &'static str,
    /// The counter, as a BIGINT.
    counter: &'static str,
    /// Another session takes the counter's row, waiting for its lock at most 60 s (a
    /// guard far below the 10-minute sleep that holds it when nothing cancels it).
    take_row: &'static str,
}

const POSTGRES: Dialect = Dialect {
    sleep: "pg_sleep",
    sleeping: "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
         AND query LIKE 'SELECT pg_sleep%' AND state = 'active'",
    records_table: "SELECT count(*) FROM information_schema.tables WHERE table_name = 'txretry_tool_calls'",
    counter: "SELECT CAST(n AS BIGINT) FROM counters",
    take_row: "SET lock_timeout = '60s'; UPDATE counters SET n = n + 10 WHERE id = 1",
};

const MARIADB: Dialect = Dialect {
    sleep: "SLEEP",
    sleeping: "SELECT count(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() \
         AND INFO LIKE 'SELECT SLEEP%'",
    records_table: "SELECT count(*) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name = 'txretry_tool_calls'",
    counter: "SELECT CAST(n AS SIGNED) FROM counters",
    take_row: "SET SESSION innodb_lock_wait_timeout = 60; UPDATE counters SET n = n + 10 WHERE id = 1",
};

/// `test`'s own database with the tables, and a server of [`CONFIG`] on it; `None`
/// (skipped, loudly) without the database's server.
async fn served(db: Option<Db>, dialect: &Dialect) -> Option<(Db, Client)> {
    let db = db?;
    db.exec(TABLES).await;
    let config = db.write("cancel.yaml", &CONFIG.replace("{sleep}", dialect.sleep));
    let client = stdio(&config, &[], &[("CANCEL_URL", &db.url)]).await;
    Some((db, client))
}

/// Waits until `sessions` of the test database sleep.
async fn until_sleeping(db: &Db, dialect: &Dialect, what: &str, sessions: i64) {
    within(what, async {
        while db.ints(dialect.sleeping).await[0] != sessions {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

async fn notes(db: &Db, note: &str) -> i64 {
    let count = db
        .ints(&format!("SELECT count(*) FROM notes WHERE note = '{note}'"))
        .await;
    count[0]
}

async fn a_call_cancelled_before_commit_writes_nothing_and_runs_once_when_sent_again(
    db: Option<Db>,
    dialect: &Dialect,
) {
    let Some((db, client)) = served(db, dialect).await else {
        return;
    };

    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("slow_note")
            .with_arguments(object(json!({"note": "first", "wait_s": 600}))),
    ));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    // The insert is made and the transaction sleeps in the server: wait until it does.
    until_sleeping(&db, dialect, "the transaction sleeps", 1).await;
    handle
        .cancel(Some("the user stopped it".to_owned()))
        .await
        .unwrap();

    // The server drops the call and cancels its statement: the backend stops sleeping
    // (left alone, it would sleep out its 10 minutes, past this guard), and the
    // transaction never commits.
    until_sleeping(&db, dialect, "the cancelled statement ends", 0).await;
    assert_eq!(
        notes(&db, "first").await,
        0,
        "a cancelled call writes nothing"
    );
    let table = db.ints(dialect.records_table).await;
    if table[0] == 1 {
        let records = db.ints("SELECT count(*) FROM txretry_tool_calls").await;
        assert_eq!(
            records[0], 0,
            "nothing recorded for a call that did not commit"
        );
    }

    // The same call sent again runs, once; and once more is answered from the record.
    let sent_again = outcome(&client, "slow_note", json!({"note": "first", "wait_s": 0})).await;
    assert_eq!(sent_again["status"], "committed", "{sent_again}");
    assert_eq!(sent_again["result"], "noted first");
    let repeated = outcome(&client, "slow_note", json!({"note": "first", "wait_s": 0})).await;
    assert_eq!(repeated["result"], "noted first", "{repeated}");
    assert_eq!(notes(&db, "first").await, 1, "applied once");
    client.cancel().await.unwrap();
}

async fn an_attempt_that_times_out_has_its_statement_cancelled_and_its_locks_released(
    db: Option<Db>,
    dialect: &Dialect,
) {
    let Some((db, client)) = served(db, dialect).await else {
        return;
    };
    // Its attempt times out after 1 s, holding the row's lock in a 10-minute sleep.
    let timed_out = outcome(&client, "held_count", json!({"wait_s": 600})).await;
    assert_ne!(timed_out["status"], "committed", "{timed_out}");
    assert_eq!(timed_out["failure"], "timed_out", "{timed_out}");
    // Another session takes the row: at once when the statement was cancelled, and never
    // within its lock wait (a guard, far below the sleep) while the sleep holds it.
    db.exec(dialect.take_row).await;
    assert_eq!(
        db.ints(dialect.counter).await,
        [10],
        "the timed-out attempt's update was rolled back"
    );
    client.cancel().await.unwrap();
}

macro_rules! on_postgres_and_mariadb {
    ($($scenario:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let db = super::Db::postgres(concat!("cancel::", stringify!($scenario))).await;
                    super::$scenario(db, &super::POSTGRES).await;
                }
            )*
        }
        mod mariadb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let db = super::Db::mariadb(concat!("cancel::", stringify!($scenario))).await;
                    super::$scenario(db, &super::MARIADB).await;
                }
            )*
        }
    };
}

on_postgres_and_mariadb!(
    a_call_cancelled_before_commit_writes_nothing_and_runs_once_when_sent_again,
    an_attempt_that_times_out_has_its_statement_cancelled_and_its_locks_released,
    a_statement_running_when_the_server_is_stopped_is_cancelled_before_it_exits,
);

/// SIGTERM while a call sleeps in its transaction: the server stops serving, drops the
/// call, and cancels its statement in the server before it exits. (It exited with the
/// cancel still on its way, often enough: the statement slept on, holding its locks.)
async fn a_statement_running_when_the_server_is_stopped_is_cancelled_before_it_exits(
    db: Option<Db>,
    dialect: &Dialect,
) {
    let Some(db) = db else {
        return;
    };
    db.exec(TABLES).await;
    let token = "cancel-token-0123456789abcdef";
    let config = CONFIG.replace("{sleep}", dialect.sleep);
    let config = format!("{config}\nauth:\n  tokens:\n    - env: CANCEL_TOKEN\n      roles: []\n");
    let config = db.write("cancel-http.yaml", &config);
    // Every connection of the server's comes a second late, its statement's cancel too:
    // well after the process would have exited without waiting for it.
    let url = slow_relay(&db.url, Duration::from_secs(1)).await;
    let mut server = common::HttpServer::start(
        &config,
        "127.0.0.1:0",
        &[("CANCEL_URL", url.as_str()), ("CANCEL_TOKEN", token)],
    )
    .await;
    let client = server.client(Some(token)).await;
    let note = "at-exit";
    let call = tokio::spawn(async move {
        let request = CallToolRequestParams::new("slow_note")
            .with_arguments(object(json!({"note": note, "wait_s": 600})));
        let _ = client.peer().call_tool(request).await;
    });
    until_sleeping(&db, dialect, "the transaction sleeps", 1).await;

    let pid = server.child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let exit = within("the server exits", server.child.wait())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    call.abort();
    // Cancelled before the exit: the session's statement stops at once. Left alone, it
    // would sleep out its 10 minutes, past this guard.
    until_sleeping(&db, dialect, "the statement ends", 0).await;
    assert_eq!(notes(&db, note).await, 0, "nothing committed");
}

/// `url` through a relay on loopback that holds every new connection `delay` before it
/// connects on to `url`'s server.
async fn slow_relay(url: &str, delay: Duration) -> String {
    // The server's `host:port`, between the user's `@` and the path.
    let rest = url.split_once("://").unwrap().1;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    let upstream = rest[..rest.find(['/', '?']).unwrap_or(rest.len())].to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    common::via(url, relay)
}
