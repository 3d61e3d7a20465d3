//! Ctrl-C for real: SIGINT sent to a running lab. A burst of signals a few milliseconds
//! apart (what `timeout -s INT` sends) is one Ctrl-C: the lab reports and cleans up; a
//! second, separate one quits without a report, and still cleans up.

#![cfg(unix)]

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Starts the lab with `args`, stdout and stderr piped, temp files under `tmp`.
fn start(args: &[&str], tmp: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_txretry-lab"))
        .args(args)
        .env("NO_COLOR", "1")
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the txretry-lab binary runs")
}

fn sigint(child: &Child) {
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill -INT failed");
}

/// Polls `ready` every 50 ms until it holds; panics after `limit` (with `what`).
fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the lab to exit (killing it after 2 minutes) and returns its status, stdout
/// and stderr.
fn finish(mut child: Child) -> (ExitStatus, String, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the lab can be waited for") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the lab did not exit within 2 minutes of Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut stdout)
        .expect("stdout is text");
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr)
        .expect("stderr is text");
    (status, stdout, stderr)
}

/// Waits until the embedded SQLite lab with its temp files under `tmp` has writers at
/// work: its WAL file holds something (the tables are created after the lab listens for
/// Ctrl-C).
fn wait_for_writers(tmp: &Path) {
    wait_until("the lab's WAL file fills", Duration::from_secs(60), || {
        entries(tmp)
            .iter()
            .any(|d| std::fs::metadata(tmp.join(d).join("lab.db-wal")).is_ok_and(|m| m.len() > 0))
    });
}

/// What a test of a lab on Postgres at `url` needs beside it: a runtime, a pool of its own
/// and a temp dir for the lab's files.
fn postgres_side(url: &str) -> (tokio::runtime::Runtime, sqlx::PgPool, tempfile::TempDir) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let pool = runtime
        .block_on(sqlx::PgPool::connect(url))
        .expect("the test connects");
    (runtime, pool, tempfile::tempdir().expect("a temp dir"))
}

/// The entries of `dir`.
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("the temp dir exists")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn a_burst_of_two_sigints_reports_and_removes_the_temp_dir() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let child = start(
        &["--duration", "10m", "--json", "--policy", "exp-jitter"],
        tmp.path(),
    );
    wait_for_writers(tmp.path());
    sigint(&child);
    std::thread::sleep(Duration::from_millis(5));
    sigint(&child);
    let (status, stdout, stderr) = finish(child);
    assert_eq!(status.code(), Some(130), "stderr:\n{stderr}");
    let runs: Vec<serde_json::Value> =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(runs.len(), 1, "{stdout}");
    assert_eq!(runs[0]["interrupted"], true, "{}", runs[0]);
    assert_eq!(runs[0]["invariant_ok"], true, "{}", runs[0]);
    assert!(
        !stderr.contains("interrupted again"),
        "one burst is one Ctrl-C:\n{stderr}"
    );
    assert_eq!(entries(tmp.path()), Vec::<String>::new(), "left behind");
}

/// Tables on the server whose names start with `prefix`.
async fn tables_named(pool: &sqlx::PgPool, prefix: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE tablename LIKE $1")
        .bind(format!("{prefix}%"))
        .fetch_all(pool)
        .await
        .expect("pg_tables can be read")
}

#[test]
fn a_second_separate_sigint_quits_without_a_report_and_drops_the_tables() {
    let Some(url) = txretry_testkit::postgres_url("lab_interrupt_quit") else {
        return;
    };
    let (runtime, pool, tmp) = postgres_side(&url);
    let child = start(
        &[
            "--db",
            &url,
            "--duration",
            "10m",
            "--json",
            "--policy",
            "exp-jitter",
            "--workers",
            "4",
        ],
        tmp.path(),
    );
    let prefix = format!("txlab\\_{}\\_", child.id());
    wait_until("the lab's tables exist", Duration::from_secs(60), || {
        runtime.block_on(tables_named(&pool, &prefix)).len() == 2
    });
    let tables = runtime.block_on(tables_named(&pool, &prefix));
    let accounts = tables
        .iter()
        .find(|t| t.ends_with("_accounts"))
        .expect("an accounts table");
    // Hold every transfer in flight: the first Ctrl-C then cannot finish the run, so the
    // second one finds it still going.
    let mut lock = runtime.block_on(pool.begin()).expect("a transaction");
    runtime
        .block_on(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "LOCK TABLE {accounts} IN ACCESS EXCLUSIVE MODE"
            )))
            .execute(&mut *lock),
        )
        .expect("the lock is taken");
    sigint(&child);
    std::thread::sleep(Duration::from_millis(1500));
    sigint(&child);
    // Let the lab abort its transactions, then let its DROP TABLE through.
    std::thread::sleep(Duration::from_millis(500));
    runtime
        .block_on(lock.rollback())
        .expect("the lock is released");
    let (status, stdout, stderr) = finish(child);
    assert_eq!(status.code(), Some(130), "stderr:\n{stderr}");
    assert!(stdout.is_empty(), "no report after quitting:\n{stdout}");
    assert!(stderr.contains("interrupted again"), "{stderr}");
    assert!(stderr.contains("dropped this run's tables"), "{stderr}");
    assert!(stderr.contains("quit: no report"), "{stderr}");
    assert_eq!(
        runtime.block_on(tables_named(&pool, &prefix)),
        Vec::<String>::new(),
        "tables left behind; stderr:\n{stderr}"
    );
    assert_eq!(entries(tmp.path()), Vec::<String>::new(), "left behind");
}

/// Whether a backend of the lab's (`application_name` txretry-lab) waits on a lock.
async fn lab_waits_on_a_lock(pool: &sqlx::PgPool) -> bool {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
         WHERE application_name = 'txretry-lab' AND wait_event_type = 'Lock')",
    )
    .fetch_one(pool)
    .await
    .expect("pg_stat_activity can be read")
}

/// A row the test holds locked fails every attempt of the lab's workers on it with a lock
/// timeout (55P03, retried: 50 attempts under `exp-jitter`, at least 5 s). Ctrl-C while
/// they retry ends each transaction with its attempt in flight: none is given up on as
/// failed (they are `cut_short`), and the lab reports while the row is still locked.
/// (Before, every transaction in flight went on retrying to its last attempt, minutes
/// under contention, and was counted as failed.)
#[test]
fn ctrl_c_lets_no_transaction_begin_another_retry() {
    let Some(url) = txretry_testkit::postgres_url("lab_interrupt_retries") else {
        return;
    };
    let (runtime, pool, tmp) = postgres_side(&url);
    let separator = if url.contains('?') { '&' } else { '?' };
    let lab_url = format!("{url}{separator}options=-c%20lock_timeout%3D100ms");
    let child = start(
        &[
            "--db",
            &lab_url,
            "--workload",
            "hot-rows",
            "--rows",
            "1",
            "--workers",
            "2",
            "--duration",
            "10m",
            "--json",
            "--policy",
            "exp-jitter",
        ],
        tmp.path(),
    );
    let prefix = format!("txlab\\_{}\\_", child.id());
    wait_until("the lab's table exists", Duration::from_secs(60), || {
        runtime.block_on(tables_named(&pool, &prefix)).len() == 1
    });
    let table = runtime.block_on(tables_named(&pool, &prefix)).remove(0);
    let mut lock = runtime.block_on(pool.begin()).expect("a transaction");
    runtime
        .block_on(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT id FROM {table} WHERE id = 1 FOR UPDATE"
            )))
            .execute(&mut *lock),
        )
        .expect("the row is locked");
    wait_until("a worker waits on the row", Duration::from_secs(60), || {
        runtime.block_on(lab_waits_on_a_lock(&pool))
    });
    sigint(&child);
    // The row stays locked until the lab has exited: a worker that retried would fail
    // until its attempts ran out.
    let (status, stdout, stderr) = finish(child);
    runtime
        .block_on(lock.rollback())
        .expect("the lock is released");
    // The lab's DROP TABLE waited on the lock and gave up: drop what it left.
    runtime
        .block_on(
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
                .execute(&pool),
        )
        .expect("the table is dropped");
    assert_eq!(status.code(), Some(130), "stderr:\n{stderr}");
    let runs: Vec<serde_json::Value> =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(runs.len(), 1, "{stdout}");
    assert_eq!(runs[0]["interrupted"], true, "{}", runs[0]);
    assert_eq!(runs[0]["failed"], 0, "{}", runs[0]);
    assert!(runs[0]["cut_short"].as_u64() >= Some(1), "{}", runs[0]);
    assert_eq!(runs[0]["invariant_ok"], true, "{}", runs[0]);
}

/// SIGTERM (what `timeout`, `kill` and `docker stop` send) is taken as a Ctrl-C: the lab
/// reports and removes its temp dir, instead of dying with them left behind.
#[test]
fn sigterm_reports_and_removes_the_temp_dir() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let child = start(
        &["--duration", "10m", "--json", "--policy", "exp-jitter"],
        tmp.path(),
    );
    wait_for_writers(tmp.path());
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill -TERM failed");
    let (status, stdout, stderr) = finish(child);
    assert_eq!(status.code(), Some(130), "stderr:\n{stderr}");
    let runs: Vec<serde_json::Value> =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(runs[0]["interrupted"], true, "{}", runs[0]);
    assert_eq!(runs[0]["invariant_ok"], true, "{}", runs[0]);
    assert_eq!(entries(tmp.path()), Vec::<String>::new(), "left behind");
}
