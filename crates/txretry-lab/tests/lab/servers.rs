//! Postgres and MySQL / MariaDB runs, through `TXRETRY_POSTGRES_URL` / `TXRETRY_MYSQL_URL`
//! (or a container when Docker answers); skipped with a printed reason otherwise, and a
//! failure when `TXRETRY_REQUIRE_DB=1`.

use std::process::Output;

use crate::{PRESETS, check_run_shape, json_runs, lab, texts};

/// Runs the lab on `url` with `args` (split at white space) and checks that it exited 0.
fn lab_ok(url: &str, args: &str) -> Output {
    let args: Vec<&str> = ["--db", url]
        .into_iter()
        .chain(args.split_whitespace())
        .collect();
    let output = lab(&args);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    output
}

/// The URL with its user info replaced by a user that does not exist and `password`.
fn with_wrong_login(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
    let host_and_path = match rest.split_once('/').map(|(authority, _)| authority) {
        Some(authority) if authority.contains('@') => {
            &rest[rest[..authority.len()].rfind('@').map_or(0, |at| at + 1)..]
        }
        _ => rest,
    };
    format!("{scheme}://txretry_lab_nobody:{password}@{host_and_path}")
}

fn assert_wrong_password_is_never_printed(url: &str) {
    let secret = "Wr0ng-Pass%2Fword";
    let bad = with_wrong_login(url, secret);
    let output = lab(&["--db", &bad, "--duration", "1s", "--json"]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(
        output.status.code(),
        Some(2),
        "a wrong login must fail to connect; stderr:\n{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("could not connect"), "{stderr}");
    for shown in [&stdout, &stderr] {
        assert!(
            !shown.contains("Wr0ng") && !shown.contains("Pass/word"),
            "password leaked:\n{shown}"
        );
    }
    assert!(stderr.contains("txretry_lab_nobody:***@"), "{stderr}");
    // The server's message, without Postgres' position in its own C source.
    assert!(!stderr.contains(" at line "), "{stderr}");
}

#[test]
fn postgres_hot_rows_under_repeatable_read() {
    let Some(url) = txretry_testkit::postgres_url("lab_postgres_hot_rows") else {
        return;
    };
    let output = lab_ok(
        &url,
        "--workload hot-rows --rows 4 --isolation repeatable-read --workers 8 --duration 1s \
         --json --policy all",
    );
    let runs = json_runs(&output);
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["policy"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, PRESETS);
    for run in &runs {
        check_run_shape(run, 8);
        assert_eq!(run["invariant_ok"], true, "{run}");
        assert_eq!(run["isolation"], "repeatable-read");
        assert!(!run["db"].as_str().unwrap_or_default().is_empty());
    }
    // 8 workers on 4 rows under REPEATABLE READ collide: the classifier must see 40001.
    let serialization: u64 = runs
        .iter()
        .filter_map(|r| r["retries_by_kind"]["serialization_failure"].as_u64())
        .sum();
    assert!(
        serialization > 0,
        "no serialization failure was retried: {runs:?}"
    );
    // Per-key admission lets one transaction per row run at a time in this process:
    // different rows never conflict, so nothing is left to retry.
    let contention = &runs[4];
    assert_eq!(
        contention["retries_by_kind"]["serialization_failure"], 0,
        "{contention}"
    );
    assert_eq!(contention["failed"], 0, "{contention}");
    // The database preset takes its row's lock before the snapshot: nothing to retry either.
    let database = &runs[5];
    assert_eq!(
        database["retries_by_kind"]["serialization_failure"], 0,
        "{database}"
    );
    assert_eq!(database["failed"], 0, "{database}");
}

#[test]
fn postgres_wrong_login_never_prints_the_password() {
    let Some(url) = txretry_testkit::postgres_url("lab_postgres_wrong_login") else {
        return;
    };
    assert_wrong_password_is_never_printed(&url);
}

#[test]
fn mysql_transfers() {
    let Some(url) = txretry_testkit::mysql_url("lab_mysql_transfer") else {
        return;
    };
    let output = lab_ok(&url, "--workers 8 --duration 1s --json --policy all");
    let runs = json_runs(&output);
    assert_eq!(runs.len(), PRESETS.len());
    for run in &runs {
        check_run_shape(run, 8);
        assert_eq!(run["invariant_ok"], true, "{run}");
        assert_eq!(run["workload"], "transfer");
    }
}

#[test]
fn mysql_hot_rows_with_an_isolation_level() {
    let Some(url) = txretry_testkit::mysql_url("lab_mysql_hot_rows") else {
        return;
    };
    let output = lab_ok(
        &url,
        "--workload hot-rows --isolation serializable --workers 4 --duration 500ms --json \
         --policy contention",
    );
    let runs = json_runs(&output);
    check_run_shape(&runs[0], 4);
    assert_eq!(runs[0]["invariant_ok"], true, "{}", runs[0]);
}

#[test]
fn mysql_wrong_login_never_prints_the_password() {
    let Some(url) = txretry_testkit::mysql_url("lab_mysql_wrong_login") else {
        return;
    };
    assert_wrong_password_is_never_printed(&url);
}

#[test]
fn wrong_login_helper_replaces_user_info() {
    assert_eq!(
        with_wrong_login("postgres://postgres@127.0.0.1:5432/test", "x"),
        "postgres://txretry_lab_nobody:x@127.0.0.1:5432/test"
    );
    assert_eq!(
        with_wrong_login("mysql://root:pw@h:3306/test", "x"),
        "mysql://txretry_lab_nobody:x@h:3306/test"
    );
    assert_eq!(
        with_wrong_login("mysql://h:3306/test", "x"),
        "mysql://txretry_lab_nobody:x@h:3306/test"
    );
}

/// The server's `max_connections` (Postgres' or MariaDB's), asked by the test itself.
fn max_connections(url: &str) -> u64 {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let text: String = runtime
        .block_on(async {
            if url.starts_with("postgres") {
                let pool = sqlx::PgPool::connect(url).await.expect("the test connects");
                sqlx::query_scalar("SHOW max_connections")
                    .fetch_one(&pool)
                    .await
            } else {
                let pool = sqlx::MySqlPool::connect(url)
                    .await
                    .expect("the test connects");
                sqlx::query_scalar("SELECT CAST(@@max_connections AS CHAR)")
                    .fetch_one(&pool)
                    .await
            }
        })
        .expect("the server answers");
    text.parse().expect("a number")
}

/// More workers than the server accepts connections: refused before anything runs (it
/// used to wait out the 30 s acquire timeout and count "connection" failures).
fn assert_too_many_workers_refused(url: &str) {
    let max_connections = max_connections(url);
    let workers = max_connections + 1;
    assert!(
        workers <= 1024,
        "max_connections {max_connections}: this test needs a server that takes fewer than 1024"
    );
    let workers = workers.to_string();
    let output = lab(&["--db", url, "--workers", &workers, "--duration", "1s"]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(&format!("--workers {workers} needs {workers} connections")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("at most {max_connections} (max_connections)")),
        "{stderr}"
    );
}

#[test]
fn postgres_more_workers_than_connections_is_refused() {
    let Some(url) = txretry_testkit::postgres_url("lab_postgres_max_connections") else {
        return;
    };
    assert_too_many_workers_refused(&url);
}

#[test]
fn mysql_more_workers_than_connections_is_refused() {
    let Some(url) = txretry_testkit::mysql_url("lab_mysql_max_connections") else {
        return;
    };
    assert_too_many_workers_refused(&url);
}

#[test]
fn postgres_names_its_default_isolation() {
    let Some(url) = txretry_testkit::postgres_url("lab_postgres_default_isolation") else {
        return;
    };
    let output = lab_ok(&url, "--duration 300ms --json --policy contention");
    let run = &json_runs(&output)[0];
    check_run_shape(run, 4);
    let isolation = run["isolation"].as_str().unwrap_or_default();
    assert!(
        isolation.ends_with(" (server default)") && !isolation.contains("server-default"),
        "{run}"
    );
}

/// Issue 12's collapse, for real: 16 workers moving money between 8 accounts in random
/// lock order deadlock, and Postgres finds each deadlock only after `deadlock_timeout`
/// (1 s by default), so the default policy's p50 (or, when most transfers slip through, its
/// p95) sits near or past it. The report says why and points at the contention preset.
#[test]
fn postgres_p50_near_deadlock_timeout_is_explained() {
    let Some(url) = txretry_testkit::postgres_url("lab_postgres_deadlock_timeout_hint") else {
        return;
    };
    let output = lab_ok(
        &url,
        "--workload transfer --workers 16 --policy default --duration 3s",
    );
    let (stdout, _) = texts(&output);
    let hint = stdout
        .lines()
        .find(|line| line.contains("deadlock_timeout"))
        .unwrap_or_else(|| panic!("no deadlock_timeout hint:\n{stdout}"));
    assert!(
        hint.starts_with("hint: default: p50 ") || hint.starts_with("hint: default: p95 "),
        "{hint}"
    );
    assert!(stdout.contains("--policy contention"), "{stdout}");
    assert!(stdout.contains("invariant"), "{stdout}");
}

/// Database admission locks are server-wide on MySQL / MariaDB (`GET_LOCK`): a lab run's
/// keys name its tables, so a lock another client holds on a bare row key (what another
/// run on other tables used to take for its row 1) does not make this run wait.
#[test]
fn mysql_admission_keys_are_the_runs_own() {
    let Some(url) = txretry_testkit::mysql_url("lab_mysql_admission_keys") else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let mut other = runtime
        .block_on(<sqlx::MySqlConnection as sqlx::Connection>::connect(&url))
        .expect("the test connects");
    let row_1 = format!("txretry:{:016x}", txretry::KeyHash::of(1_i64).to_u64());
    let held: i64 = runtime
        .block_on(
            sqlx::query_scalar("SELECT GET_LOCK(?, 5)")
                .bind(&row_1)
                .fetch_one(&mut other),
        )
        .expect("GET_LOCK answers");
    assert_eq!(held, 1, "the test holds {row_1}");
    let output = lab_ok(
        &url,
        "--workload hot-rows --rows 1 --workers 1 --duration 1s --json --policy database",
    );
    let runs = json_runs(&output);
    assert_eq!(runs[0]["invariant_ok"], true, "{}", runs[0]);
    assert_eq!(runs[0]["retries_by_kind"]["lock_timeout"], 0, "{}", runs[0]);
    assert_eq!(runs[0]["failed"], 0, "{}", runs[0]);
    drop(other);
}

/// An attempt that fails before the transaction's body runs (here: its admission lock,
/// held by the test, is not granted in time) is an attempt too: `attempts` is every first
/// attempt and every retry, `committed + failed + business_failed + cut_short + retries`.
/// It counted only the calls of the body, and said 0 attempts beside 49 retries. And the
/// end of the run reaches such a transaction: it retried its lock for 50 attempts of 5 s
/// each past a 1 s run.
#[test]
fn mysql_attempts_count_those_refused_before_the_body() {
    let Some(url) = txretry_testkit::mysql_url("lab_mysql_attempts") else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let mut other = runtime
        .block_on(<sqlx::MySqlConnection as sqlx::Connection>::connect(&url))
        .expect("the test connects");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_txretry-lab"))
        .args(["--db", &url])
        .args(["--workload", "hot-rows", "--rows", "1", "--workers", "1"])
        .args(["--duration", "1s", "--json", "--policy", "database"])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the txretry-lab binary runs");
    // The run's key for its row 1 (its tables' prefix and the row), taken while the lab
    // still starts up; should the lab's first transaction get it first, the test waits for
    // it, and the next one finds it taken.
    let prefix = format!("txlab_{}_0", child.id());
    let key = txretry::KeyHash::of((prefix.as_str(), 1_i64)).to_u64();
    let held: i64 = runtime
        .block_on(
            sqlx::query_scalar("SELECT GET_LOCK(?, 30)")
                .bind(format!("txretry:{key:016x}"))
                .fetch_one(&mut other),
        )
        .expect("GET_LOCK answers");
    assert_eq!(held, 1, "the test holds the run's key");
    let status = child.wait().expect("the lab exits");
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert_eq!(status.code(), Some(0), "{stdout}");
    drop(other);
    let runs: Vec<serde_json::Value> = serde_json::from_str(&stdout).expect("the JSON report");
    let run = &runs[0];
    let n = |field: &str| run[field].as_u64().expect(field);
    // The run's one transaction waited for the lock past the end of the run: it was cut
    // short (or, had it got the lock first, a later one was).
    assert!(
        n("cut_short") + n("failed") >= 1,
        "an attempt was refused its lock: {run}"
    );
    assert!(n("attempts") >= 1, "{run}");
    assert_eq!(
        n("attempts"),
        n("committed") + n("failed") + n("business_failed") + n("cut_short") + n("retries"),
        "{run}"
    );
}
