//! `txretry-mcp check` and `serve` on configs with one mistake each: exit 2, the field and
//! its line named (`line L, column C: field.path: message`), nothing served. The valid
//! examples pass `check` on SQLite, Postgres and MariaDB.

mod common;

use common::{Db, Kind, Ran, check, run};

#[path = "config/cases.rs"]
mod cases;

use cases::{BASE, Case, DATABASE_CASES, STATIC_CASES, TOKEN};

fn env(db: &Db) -> Vec<(&'static str, String)> {
    vec![
        ("CFG_DB_URL", db.url.clone()),
        ("CFG_TOKEN", TOKEN.to_owned()),
        ("CFG_SHORT_TOKEN", "short-token".to_owned()),
    ]
}

fn env_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The config with the case's mistake, and the line it is on.
fn broken(case: &Case) -> (String, usize) {
    assert!(
        BASE.contains(case.from),
        "{}: {:?} not in BASE",
        case.name,
        case.from
    );
    let yaml = BASE.replacen(case.from, case.to, 1);
    let line = yaml
        .lines()
        .position(|l| l.contains(case.marker))
        .unwrap_or_else(|| panic!("{}: no line has {:?}", case.name, case.marker))
        + 1;
    (yaml, line)
}

/// The run exited 2 and named the field on its line; returns the problem's line.
fn assert_refused(ran: &Ran, case: &Case, line: usize, what: &str) -> String {
    assert_eq!(
        ran.code,
        Some(2),
        "{what} of {}: exit 2 expected: {ran:?}",
        case.name
    );
    let prefix = format!("line {line}, column ");
    let found = ran
        .stderr
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&prefix) && l.contains(&format!(": {}: ", case.field)));
    let found = found.unwrap_or_else(|| {
        panic!(
            "{what} of {}: no problem `line {line}, column C: {}: …` in:\n{}",
            case.name, case.field, ran.stderr
        )
    });
    assert!(
        found.contains(case.message),
        "{what} of {}: {found:?} lacks {:?}",
        case.name,
        case.message
    );
    assert!(ran.stdout.is_empty(), "{what} of {}: {ran:?}", case.name);
    found.to_owned()
}

async fn refused_by_check_and_serve(db: &Db, cases: &[Case]) {
    let env = env(db);
    let env = env_refs(&env);
    // The base config is valid: each case's failure is its own mistake's.
    let base = db.write("base.yaml", BASE);
    let ok = check(&base, &env).await;
    assert_eq!(ok.code, Some(0), "{ok:?}");
    for (i, case) in cases.iter().enumerate() {
        let (yaml, line) = broken(case);
        let path = db.write(&format!("case{i}.yaml"), &yaml);
        let checked = check(&path, &env).await;
        let problem = assert_refused(&checked, case, line, "check");
        eprintln!("{}: {problem}", case.name);
        // serve refuses it alike, before serving anything (a served stdio server would
        // see its stdin closed and exit 0).
        let config = path.to_str().unwrap();
        let served = run(&["serve", "--config", config], &env).await;
        assert_refused(&served, case, line, "serve");
        let http = run(
            &["serve", "--config", config, "--http", "127.0.0.1:0"],
            &env,
        )
        .await;
        assert_refused(&http, case, line, "serve --http");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_mistakes_are_refused_with_field_and_line() {
    let db = Db::sqlite().await;
    db.load("orders.sql").await;
    refused_by_check_and_serve(&db, STATIC_CASES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_mistakes_are_all_reported_in_line_order() {
    let db = Db::sqlite().await;
    let env = env(&db);
    let env = env_refs(&env);
    let mut yaml = BASE.to_owned();
    for case in [&STATIC_CASES[6], &STATIC_CASES[1], &STATIC_CASES[10]] {
        yaml = yaml.replacen(case.from, case.to, 1);
    }
    let path = db.write("many.yaml", &yaml);
    let ran = check(&path, &env).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    let lines: Vec<u64> = ran
        .stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("line "))
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{}", ran.stderr);
    assert!(lines.is_sorted(), "{}", ran.stderr);
    assert!(ran.stderr.contains("3 problems"), "{}", ran.stderr);
}

/// `serve` of the valid base config, on SQLite, with `flags` after `--config`.
async fn serve_base(flags: &[&str]) -> Ran {
    let db = Db::sqlite().await;
    db.load("orders.sql").await;
    let env = env(&db);
    let path = db.write("base.yaml", BASE);
    let mut args = vec!["serve", "--config", path.to_str().unwrap()];
    args.extend_from_slice(flags);
    run(&args, &env_refs(&env)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_an_unknown_toolset_flag() {
    let ran = serve_base(&["--toolset", "nope"]).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("no toolset \"nope\""), "{ran:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_stdio_caller_flags_with_http() {
    for flag in [["--role", "admin"], ["--toolset", "viewer"]] {
        let ran = serve_base(&["--http", "127.0.0.1:0", flag[0], flag[1]]).await;
        assert_eq!(ran.code, Some(2), "{flag:?}: {ran:?}");
        assert!(
            ran.stderr.contains(
                "--role and --toolset set the stdio caller; over --http each request's caller is its bearer token"
            ),
            "{flag:?}: {ran:?}"
        );
        assert!(ran.stdout.is_empty(), "{flag:?}: {ran:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_names_the_address_it_cannot_listen_on() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let ran = serve_base(&["--http", &addr]).await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let says = format!("could not listen on {addr} (--http): address in use");
    assert!(ran.stderr.contains(&says), "{ran:?}");
}

async fn database_mistakes(db: Db) {
    db.load("orders.sql").await;
    refused_by_check_and_serve(&db, DATABASE_CASES).await;
}

/// A source that does not answer: refused as the source's URL, before serving.
async fn unreachable_source(db: Db) {
    let url = match db.kind {
        Kind::Sqlite => format!("sqlite://{}/missing/none.db", db.dir.path().display()),
        Kind::Postgres => "postgres://postgres@127.0.0.1:1/test".to_owned(),
        Kind::MariaDb => "mysql://root@127.0.0.1:1/test".to_owned(),
    };
    let env = [("CFG_DB_URL", url.as_str()), ("CFG_TOKEN", TOKEN)];
    let path = db.write("base.yaml", BASE);
    let ran = check(&path, &env).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("line 3, column ")
            && ran.stderr.contains("sources.shop.url: cannot connect"),
        "{ran:?}"
    );
    if db.kind != Kind::Sqlite {
        // Nothing listens on port 1: the driver's reason at once, not a wait for an answer.
        assert!(
            ran.stderr.contains("Connection refused") && !ran.stderr.contains("no answer"),
            "{ran:?}"
        );
    }
}

async fn examples_pass_check(db: Db) {
    db.load("orders.sql").await;
    db.load("inventory.sql").await;
    for (yaml, var, tools) in [
        ("orders.yaml", "ORDERS_DATABASE_URL", 3),
        ("inventory.yaml", "INVENTORY_DATABASE_URL", 3),
    ] {
        let ran = check(&common::examples().join(yaml), &[(var, db.url.as_str())]).await;
        assert_eq!(ran.code, Some(0), "{yaml}: {ran:?}");
        // Counted in words: "1 source", not "1 sources".
        let says = format!("OK: {tools} tools, ");
        assert!(ran.stdout.contains(&says), "{yaml}: {ran:?}");
        assert!(
            ran.stdout.trim_end().ends_with(" prepared on 1 source"),
            "{yaml}: {ran:?}"
        );
    }
}

/// The examples on a database without their tables: every statement refused by the
/// database, each named.
async fn examples_fail_check_without_their_tables(db: Db) {
    let ran = check(
        &common::examples().join("inventory.yaml"),
        &[("INVENTORY_DATABASE_URL", db.url.as_str())],
    )
    .await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    for field in [
        "tools.stock_level.statements[0].sql",
        "tools.reserve_stock.statements[0].sql",
        "tools.release_reservation.statements[2].sql",
    ] {
        let says = format!("{field}: the database refused it");
        assert!(ran.stderr.contains(&says), "{field}: {}", ran.stderr);
    }
}

/// A source URL that names no engine txretry-mcp runs on, or one written without the
/// `//`, is refused without being quoted: it may hold a password that the redaction of a
/// well-formed URL would miss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_source_urls_are_refused_without_quoting_them() {
    let db = Db::sqlite().await;
    let path = db.write("base.yaml", BASE);
    for (url, message) in [
        ("postgres:u:s3cretpw@h/x", "a postgres URL starts with `"),
        ("mysql:u:s3cretpw@h/x", "a mysql URL starts with `mysql://`"),
        ("pg:u:s3cretpw@127.0.0.1/x", "unsupported database `pg:`"),
        ("u:s3cretpw@127.0.0.1/x", "unsupported database `u:`"),
        ("//u:s3cretpw@h/x", "not a database URL"),
    ] {
        let ran = check(&path, &[("CFG_DB_URL", url), ("CFG_TOKEN", TOKEN)]).await;
        assert_eq!(ran.code, Some(2), "{url}: {ran:?}");
        assert!(
            ran.stderr.contains("line 3, column ")
                && ran.stderr.contains(&format!("sources.shop.url: {message}")),
            "{url}: {ran:?}"
        );
        assert!(!ran.stderr.contains("s3cretpw"), "{url}: {ran:?}");
    }
}

/// On MariaDB, a records table with the records' columns but no primary key on (tool,
/// call_key) is refused: MySQL takes every claim in it (`ON DUPLICATE KEY` finds no key),
/// each call of one key inserting a record of its own and running again. The same columns
/// with the key pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mysql_records_table_without_its_key_is_refused() {
    let Some(db) = Db::mariadb("config::records_key").await else {
        return;
    };
    db.load("orders.sql").await;
    let columns = "tool VARBINARY(64) NOT NULL, call_key VARBINARY(255) NOT NULL, \
                   status VARCHAR(7) NOT NULL, output LONGTEXT, error_kind TEXT, \
                   error_message MEDIUMTEXT, created_at DATETIME(6) NOT NULL";
    db.exec(&format!(
        "CREATE TABLE calls_nokey ({columns}) ENGINE=InnoDB"
    ))
    .await;
    db.exec(&format!(
        "CREATE TABLE calls_keyed ({columns}, PRIMARY KEY (tool, call_key)) ENGINE=InnoDB"
    ))
    .await;
    let env = env(&db);
    let env = env_refs(&env);
    for (table, refused) in [("calls_nokey", true), ("calls_keyed", false)] {
        let yaml = BASE.replacen(
            "once: { key: [order_id] }",
            &format!("once: {{ key: [order_id], table: {table} }}"),
            1,
        );
        let path = db.write(&format!("{table}.yaml"), &yaml);
        let ran = check(&path, &env).await;
        if refused {
            assert_eq!(ran.code, Some(2), "{ran:?}");
            assert!(
                ran.stderr.contains("tools.cancel_order.once.table")
                    && ran
                        .stderr
                        .contains("has no primary key on (tool, call_key)"),
                "{ran:?}"
            );
        } else {
            assert_eq!(ran.code, Some(0), "{ran:?}");
        }
    }
}

crate::on_each_database!(
    database_mistakes,
    unreachable_source,
    examples_pass_check,
    examples_fail_check_without_their_tables,
);

/// Top-level keys that begin with `x-` are the author's own, as in a Compose file: anchors
/// set there apply where they are aliased (a bad one is refused at its alias) and are
/// otherwise ignored. Any other unknown top-level key is refused, at its line, with the
/// keys that exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_keys_hold_anchors_and_other_top_level_keys_are_refused() {
    let db = Db::sqlite().await;
    db.load("orders.sql").await;
    let env = env(&db);
    let env = env_refs(&env);
    let anchors = "x-retry: &patient { max_attempts: 7 }\nx-broken: &broken { max_attempts: 0 }\nx-notes: [anything, { at: all }]\n";
    let aliased = BASE.replacen(
        "    returns: row\n",
        "    returns: row\n    retry: *patient\n",
        1,
    );
    let ok = db.write("anchors.yaml", &format!("{anchors}{aliased}"));
    let ran = check(&ok, &env).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");

    let bad = BASE.replacen(
        "    returns: row\n",
        "    returns: row\n    retry: *broken\n",
        1,
    );
    let yaml = format!("{anchors}{bad}");
    let line = yaml
        .lines()
        .position(|l| l == "    retry: *broken")
        .unwrap()
        + 1;
    let ran = check(&db.write("broken.yaml", &yaml), &env).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains(&format!("line {line}, column "))
            && ran.stderr.contains("tools.get_order.retry"),
        "{ran:?}"
    );

    let typo = BASE.replacen("auth:\n", "extras: { note: 1 }\nauth:\n", 1);
    let line = typo.lines().position(|l| l.starts_with("extras:")).unwrap() + 1;
    let ran = check(&db.write("typo.yaml", &typo), &env).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains(&format!("line {line}, column 1"))
            && ran.stderr.contains("extras")
            && ran
                .stderr
                .contains("sources, defaults, toolsets, tools, auth"),
        "{ran:?}"
    );
}
