//! `txretry-mcp check` and `serve` on configs with one mistake each: exit 2, the field and
//! its line named (`line L, column C: field.path: message`), nothing served. The valid
//! examples pass `check` on SQLite, Postgres and MariaDB.

mod common;

use common::{Db, Kind, Ran, check, run};

/// A valid config over orders.sql's tables; each case below changes one thing in it.
const BASE: &str = r#"sources:
  shop:
    url: ${CFG_DB_URL}
toolsets:
  viewer:
    tools: [get_order]
tools:
  get_order:
    source: shop
    description: Look an order up.
    read_only: true
    parameters:
      order_id: { type: integer, min: 1 }
    statements:
      - sql: SELECT id, account, status, cents FROM orders WHERE id = :order_id
    returns: row
  cancel_order:
    source: shop
    description: Cancel an open order and refund it.
    parameters:
      order_id: { type: integer, min: 1 }
    statements:
      - sql: UPDATE orders SET status = 'cancelled' WHERE id = :order_id AND status = 'open'
        expect: { rows: 1, error: "order {order_id} not open" }
      - sql: SELECT account, cents FROM orders WHERE id = :order_id
        capture: order
      - sql: UPDATE accounts SET cents = cents + :order.cents WHERE id = :order.account
    once: { key: [order_id] }
auth:
  tokens:
    - env: CFG_TOKEN
      roles: [support]
"#;

const TOKEN: &str = "cfg-token-0123456789abcdef";

/// One mistake: `from` replaced by `to` in [`BASE`]; the problem must be reported on the
/// first line containing `marker`, in `field`, with `message` in its text.
struct Case {
    name: &'static str,
    from: &'static str,
    to: &'static str,
    field: &'static str,
    marker: &'static str,
    message: &'static str,
}

/// Problems `check` finds without a database.
const STATIC_CASES: &[Case] = &[
    Case {
        name: "unknown key",
        from: "    read_only: true\n",
        to: "    read_only: true\n    readonly: true\n",
        field: "tools.get_order",
        marker: "    readonly: true",
        message: "readonly",
    },
    Case {
        name: "undeclared placeholder",
        from: "FROM orders WHERE id = :order_id\n",
        to: "FROM orders WHERE id = :order_id AND status = :state\n",
        field: "tools.get_order.statements[0].sql",
        marker: "AND status = :state",
        message: ":state is not a declared parameter",
    },
    Case {
        name: "declared but unused parameter",
        from: "      order_id: { type: integer, min: 1 }\n    statements:\n      - sql: SELECT",
        to: "      order_id: { type: integer, min: 1 }\n      note: { type: string }\n    statements:\n      - sql: SELECT",
        field: "tools.get_order.parameters.note",
        marker: "note: { type: string }",
        message: "never used",
    },
    Case {
        name: "capture used before it is made",
        from: "WHERE id = :order_id AND status = 'open'",
        to: "WHERE id = :order_id AND cents = :order.cents AND status = 'open'",
        field: "tools.cancel_order.statements[0].sql",
        marker: "AND cents = :order.cents",
        message: "no earlier statement captures \"order\"",
    },
    Case {
        name: "missing env var in a URL",
        from: "url: ${CFG_DB_URL}",
        to: "url: ${CFG_NO_SUCH_VAR}",
        field: "sources.shop.url",
        marker: "CFG_NO_SUCH_VAR",
        message: "the environment variable CFG_NO_SUCH_VAR is not set",
    },
    Case {
        name: "unknown source",
        from: "    source: shop\n    description: Cancel",
        to: "    source: shopp\n    description: Cancel",
        field: "tools.cancel_order.source",
        marker: "source: shopp",
        message: "no source is named \"shopp\"",
    },
    Case {
        name: "unknown toolset tool",
        from: "tools: [get_order]",
        to: "tools: [get_order, get_orders]",
        field: "toolsets.viewer.tools[1]",
        marker: "get_orders",
        message: "no tool is named \"get_orders\"",
    },
    Case {
        name: "bad retry policy",
        from: "    once: { key: [order_id] }\n",
        to: "    once: { key: [order_id] }\n    retry: { max_attempts: 0 }\n",
        field: "tools.cancel_order.retry.max_attempts",
        marker: "max_attempts: 0",
        message: "must be at least 1",
    },
    Case {
        name: "bad token env",
        from: "    - env: CFG_TOKEN\n",
        to: "    - env: CFG_SHORT_TOKEN\n",
        field: "auth.tokens[0].env",
        marker: "CFG_SHORT_TOKEN",
        message: "the token in CFG_SHORT_TOKEN is shorter than 16 characters",
    },
    Case {
        name: "unset token env",
        from: "    - env: CFG_TOKEN\n",
        to: "    - env: CFG_UNSET_TOKEN\n",
        field: "auth.tokens[0].env",
        marker: "CFG_UNSET_TOKEN",
        message: "the environment variable CFG_UNSET_TOKEN is not set",
    },
    Case {
        name: "once key naming no parameter",
        from: "once: { key: [order_id] }",
        to: "once: { key: [order] }",
        field: "tools.cancel_order.once.key[0]",
        marker: "once: { key: [order] }",
        message: "no parameter is named \"order\"",
    },
    Case {
        name: "read_only and once",
        from: "    once: { key: [order_id] }\n",
        to: "    read_only: true\n    once: { key: [order_id] }\n",
        field: "tools.cancel_order.once",
        marker: "once: { key: [order_id] }",
        message: "a read-only tool has nothing to record",
    },
    Case {
        name: "pool size that is not a number",
        from: "    url: ${CFG_DB_URL}\n",
        to: "    url: ${CFG_DB_URL}\n    max_connections: lots\n",
        field: "sources.shop.max_connections",
        marker: "max_connections: lots",
        message: "expected a whole number from 1 to 4294967295",
    },
    Case {
        name: "roles not a list",
        from: "    read_only: true\n",
        to: "    read_only: true\n    roles: support\n",
        field: "tools.get_order.roles",
        marker: "roles: support",
        message: "expected a list, e.g. [support]",
    },
    Case {
        name: "parameter type not one of the types",
        from: "      order_id: { type: integer, min: 1 }\n    statements:\n      - sql: SELECT",
        to: "      order_id: { type: int, min: 1 }\n    statements:\n      - sql: SELECT",
        field: "tools.get_order.parameters.order_id.type",
        marker: "type: int,",
        message: "unknown value `int`: expected one of string, integer, number, boolean",
    },
    Case {
        name: "enum value outside the limits",
        from: "      order_id: { type: integer, min: 1 }\n    statements:\n      - sql: SELECT",
        to: "      order_id: { type: integer, min: 1, enum: [0, 5] }\n    statements:\n      - sql: SELECT",
        field: "tools.get_order.parameters.order_id",
        marker: "enum: [0, 5]",
        message: "enum value 0: must be at least 1",
    },
    Case {
        name: "template brace never closed, after non-ASCII text",
        from: "error: \"order {order_id} not open\"",
        to: "error: \"ordér {order_id not open\"",
        field: "tools.cancel_order.statements[0].expect.error",
        marker: "ordér {order_id",
        message: "never closed at character 7 (counting from 1;",
    },
    Case {
        name: "toolset listing a tool twice",
        from: "tools: [get_order]",
        to: "tools: [get_order, get_order]\n    retry: { max_attempts: 3 }",
        field: "toolsets.viewer.tools",
        marker: "tools: [get_order, get_order]",
        message: "lists \"get_order\" twice",
    },
    Case {
        name: "YAML 1.1 boolean",
        from: "    read_only: true\n",
        to: "    read_only: yes\n",
        field: "tools.get_order.read_only",
        marker: "    read_only: yes",
        message: "true or false expected",
    },
    Case {
        name: "several statements in one sql",
        from: "FROM orders WHERE id = :order_id\n",
        to: "FROM orders WHERE id = :order_id; DELETE FROM orders\n",
        field: "tools.get_order.statements[0].sql",
        marker: "DELETE FROM orders",
        message: "ends the statement and another follows",
    },
];

/// Problems only the database finds.
const DATABASE_CASES: &[Case] = &[
    Case {
        name: "capture column the capturing statement does not return",
        from: "WHERE id = :order.account",
        to: "WHERE id = :order.acount",
        field: "tools.cancel_order.statements[2].sql",
        marker: "WHERE id = :order.acount",
        message: "returns no column \"acount\"",
    },
    Case {
        name: "SQL typo",
        from: "- sql: SELECT id, account, status, cents FROM orders",
        to: "- sql: SELEC id, account, status, cents FROM orders",
        field: "tools.get_order.statements[0].sql",
        marker: "SELEC id",
        message: "the database refused it",
    },
    Case {
        name: "unknown table",
        from: "UPDATE accounts SET",
        to: "UPDATE acounts SET",
        field: "tools.cancel_order.statements[2].sql",
        marker: "UPDATE acounts SET",
        message: "the database refused it",
    },
    Case {
        name: "returns a row, but no statement returns rows",
        from: "- sql: SELECT id, account, status, cents FROM orders WHERE id = :order_id",
        to: "- sql: UPDATE orders SET cents = cents WHERE id = :order_id",
        field: "tools.get_order.returns",
        marker: "returns: row",
        message: "no statement returns rows",
    },
];

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

crate::on_each_database!(
    database_mistakes,
    unreachable_source,
    examples_pass_check,
    examples_fail_check_without_their_tables,
);
