//! Values bound to columns of other types than the parameters', on every database: an
//! integer into INT, SMALLINT and DOUBLE PRECISION columns and compared with INT, a number into BIGINT and
//! NUMERIC ones and compared with NUMERIC, captured values (NULL in one call, text in the
//! next, on one connection) bound again. Each value must land as given: on Postgres, a value
//! sent in another type's binary form than the one the server expects was a wrong number,
//! committed. Then, on Postgres, a text into a TIMESTAMPTZ column: refused by `check`, with
//! the database's reason, until the SQL casts it. A BOOLEAN column reads back as a JSON
//! boolean on every database, SQLite (which stores 0 or 1) included.

mod common;

use common::{Db, check, outcome, stdio};
use serde_json::{Value, json};

const TABLE: &str = "CREATE TABLE items (
    id BIGINT PRIMARY KEY,
    code INT NOT NULL,
    price DOUBLE PRECISION NOT NULL,
    qty BIGINT NOT NULL,
    small SMALLINT NOT NULL,
    n NUMERIC(12, 2) NOT NULL,
    label VARCHAR(20),
    active BOOLEAN NOT NULL
)";

/// One connection, so that every call's statements meet the ones the calls before them
/// prepared on it.
const TOOLS: &str = r#"
sources:
  shop: { url: "${VALUES_DB_URL}", max_connections: 1 }
tools:
  put:
    source: shop
    description: Add an item.
    parameters:
      id: { type: integer, description: Its id. }
      code: { type: integer, description: Its code. }
      price: { type: integer, description: Its price. }
      qty: { type: number, description: How many. }
      small: { type: integer, description: A small number. }
      n: { type: number, description: An exact number. }
      label: { type: string, description: Its label., required: false }
      active: { type: boolean, description: Whether it is on sale. }
    statements:
      - sql: INSERT INTO items (id, code, price, qty, small, n, label, active) VALUES (:id, :code, :price, :qty, :small, :n, :label, :active)
  get:
    source: shop
    description: An item.
    read_only: true
    parameters:
      id: { type: integer, description: Its id. }
    statements:
      - sql: SELECT id, price, qty, small, label, active FROM items WHERE id = :id
    returns: row
  by_code:
    source: shop
    description: The items with this code.
    read_only: true
    parameters:
      code: { type: integer, description: The code. }
    statements:
      - sql: SELECT id FROM items WHERE code = :code ORDER BY id
  by_n:
    source: shop
    description: The items with this exact number.
    read_only: true
    parameters:
      n: { type: number, description: The number. }
    statements:
      - sql: SELECT id FROM items WHERE n = :n ORDER BY id
  copy:
    source: shop
    description: A new item with another's price and label.
    parameters:
      from: { type: integer, description: The item copied. }
      to: { type: integer, description: The new item's id. }
    statements:
      - sql: SELECT price, label, active FROM items WHERE id = :from
        capture: src
      - sql: INSERT INTO items (id, code, price, qty, small, n, label, active) VALUES (:to, 0, :src.price, 0, 0, 0, :src.label, :src.active)
"#;

fn committed(outcome: &Value) -> &Value {
    assert_eq!(outcome["status"], "committed", "{outcome}");
    &outcome["result"]
}

async fn values_land_as_given_whatever_the_column_type(db: Db) {
    db.exec(TABLE).await;
    let config = db.write("values.yaml", TOOLS);
    let client = stdio(&config, &[], &[("VALUES_DB_URL", db.url.as_str())]).await;
    let puts = [
        json!({"id": 1, "code": 41, "price": 100, "qty": 3, "small": 7, "n": 12.5, "label": "a", "active": true}),
        json!({"id": 2, "code": 42, "price": 250, "qty": 4, "small": -3, "n": 7, "active": false}),
    ];
    for put in puts {
        committed(&outcome(&client, "put", put).await);
    }
    let one = outcome(&client, "get", json!({"id": 1})).await;
    let one = committed(&one);
    assert_eq!(one["price"].as_f64(), Some(100.0), "{one}");
    assert_eq!(one["qty"], 3, "{one}");
    assert_eq!(one["small"], 7, "{one}");
    assert_eq!(one["label"], "a", "{one}");
    // A BOOLEAN column reads back as a JSON boolean, SQLite's (stored as 0 or 1) too.
    assert_eq!(one["active"], true, "{one}");
    let code = outcome(&client, "by_code", json!({"code": 42})).await;
    assert_eq!(committed(&code), &json!([{"id": 2}]));
    let sevens = outcome(&client, "by_n", json!({"n": 7})).await;
    assert_eq!(committed(&sevens), &json!([{"id": 2}]));
    // A captured NULL label, then a captured text one, through the same statement.
    for (from, to) in [(2, 3), (1, 4)] {
        committed(&outcome(&client, "copy", json!({"from": from, "to": to})).await);
    }
    let three = outcome(&client, "get", json!({"id": 3})).await;
    let three = committed(&three);
    assert_eq!(
        (three["price"].as_f64(), &three["label"], &three["active"]),
        (Some(250.0), &Value::Null, &json!(false))
    );
    let four = outcome(&client, "get", json!({"id": 4})).await;
    let four = committed(&four);
    assert_eq!(
        (four["price"].as_f64(), &four["label"], &four["active"]),
        (Some(100.0), &json!("a"), &json!(true))
    );
    client.cancel().await.unwrap();
    // Read back by the test's own connection: what the server holds.
    assert_eq!(
        db.ints("SELECT id FROM items WHERE price = 100 ORDER BY id")
            .await,
        [1, 4]
    );
    assert_eq!(
        db.ints("SELECT qty FROM items ORDER BY id").await,
        [3, 4, 0, 0]
    );
    assert_eq!(db.ints("SELECT id FROM items WHERE small = -3").await, [2]);
    assert_eq!(db.ints("SELECT id FROM items WHERE n = 12.5").await, [1]);
}

/// Postgres converts no text into a timestamp by itself: `check` says so, with the
/// database's words, and the cast the SQL then writes works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_text_into_a_timestamp_needs_a_cast_in_the_sql() {
    let Some(db) = Db::postgres("values::timestamp").await else {
        return;
    };
    db.exec("CREATE TABLE stamps (id BIGINT PRIMARY KEY, at TIMESTAMPTZ)")
        .await;
    let tool = |sql: &str| {
        format!(
            r#"
sources:
  shop: {{ url: "${{VALUES_DB_URL}}" }}
tools:
  stamp:
    source: shop
    description: A stamp.
    parameters:
      id: {{ type: integer, description: Its id. }}
      at: {{ type: string, description: When. }}
    statements:
      - sql: {sql}
"#
        )
    };
    let env = [("VALUES_DB_URL", db.url.as_str())];
    let plain = db.write(
        "plain.yaml",
        &tool("INSERT INTO stamps (id, at) VALUES (:id, :at)"),
    );
    let ran = check(&plain, &env).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("the database refused it")
            && ran.stderr.contains("timestamp with time zone")
            && ran.stderr.contains("text"),
        "{ran:?}"
    );
    let cast = db.write(
        "cast.yaml",
        &tool("INSERT INTO stamps (id, at) VALUES (:id, :at::timestamptz)"),
    );
    assert_eq!(check(&cast, &env).await.code, Some(0));
    let client = stdio(&cast, &[], &env).await;
    let at = json!({"id": 1, "at": "2024-01-02T03:04:05Z"});
    committed(&outcome(&client, "stamp", at).await);
    client.cancel().await.unwrap();
    let year = "SELECT CAST(EXTRACT(YEAR FROM at) AS BIGINT) FROM stamps";
    assert_eq!(db.ints(year).await, [2024]);
}

/// On Postgres, `check` prepares a statement with its captured values typed as calls bind
/// them, and refuses a column no call could turn into JSON: it said OK to both, and then
/// every call failed (a text captured from `created::text` compared with a TIMESTAMPTZ; a
/// NUMERIC sum). Each is refused at its statement's line, and the fixed config passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_check_types_captures_and_refuses_columns_it_cannot_answer() {
    let Some(db) = Db::postgres("values::check_types").await else {
        return;
    };
    db.exec("CREATE TABLE notes (id BIGINT PRIMARY KEY, cents INT NOT NULL, created TIMESTAMPTZ NOT NULL DEFAULT now())")
        .await;
    let config = |compare: &str, total: &str| {
        format!(
            r#"
sources:
  shop: {{ url: "${{VALUES_DB_URL}}" }}
tools:
  newer_notes:
    source: shop
    description: The notes newer than one.
    read_only: true
    parameters:
      id: {{ type: integer, description: The note. }}
    statements:
      - sql: SELECT created::text AS ts FROM notes WHERE id = :id
        capture: ref
      - sql: SELECT id FROM notes WHERE {compare}
  total:
    source: shop
    description: All the cents.
    read_only: true
    statements:
      - sql: SELECT {total} AS total FROM notes
    returns: row
"#
        )
    };
    let env = [("VALUES_DB_URL", db.url.as_str())];
    let broken = db.write(
        "broken.yaml",
        &config("created >= :ref.ts", "sum(cents)::numeric"),
    );
    let ran = check(&broken, &env).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("line 14,") && ran.stderr.contains("timestamp with time zone >= text"),
        "the typed capture, at its statement: {ran:?}"
    );
    assert!(
        ran.stderr.contains("line 20,")
            && ran.stderr.contains("column \"total\" has type NUMERIC")
            && ran.stderr.contains("total::text"),
        "the NUMERIC column, at its statement: {ran:?}"
    );
    let fixed = db.write(
        "fixed.yaml",
        &config("created >= :ref.ts::timestamptz", "sum(cents)::int8"),
    );
    let ran = check(&fixed, &env).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    db.exec("INSERT INTO notes (id, cents, created) VALUES (1, 5, now() - interval '1 day'), (2, 7, now())")
        .await;
    let client = stdio(&fixed, &[], &env).await;
    let newer = outcome(&client, "newer_notes", json!({"id": 1})).await;
    assert_eq!(committed(&newer), &json!([{"id": 1}, {"id": 2}]));
    let total = outcome(&client, "total", json!({})).await;
    assert_eq!(committed(&total), &json!({"total": 12}));
    client.cancel().await.unwrap();
}

/// A Postgres error told to the agent is the server's message, without the ` at line N`
/// sqlx appends (a line of the server's C source: "violates check constraint … at line
/// 2090" read as a line of the tool's SQL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_errors_reach_the_agent_without_a_source_line() {
    let Some(db) = Db::postgres("values::source_line").await else {
        return;
    };
    db.exec("CREATE TABLE positive (n INT NOT NULL CHECK (n > 0))")
        .await;
    let config = db.write(
        "positive.yaml",
        r#"
sources:
  shop: { url: "${VALUES_DB_URL}" }
tools:
  put:
    source: shop
    description: Store a positive number.
    parameters:
      n: { type: integer, description: The number. }
    statements:
      - sql: INSERT INTO positive (n) VALUES (:n)
"#,
    );
    let client = stdio(&config, &[], &[("VALUES_DB_URL", db.url.as_str())]).await;
    let refused = outcome(&client, "put", json!({"n": -1})).await;
    assert_eq!(refused["status"], "business_error", "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(error.contains("violates check constraint"), "{refused}");
    assert!(!error.contains(" at line "), "{refused}");
    client.cancel().await.unwrap();
}

/// `max_rows` bounds what one statement may return: 1000 unless `defaults` or the tool says
/// otherwise. One row more is a business error naming the statement and the limit, and
/// the rows past it are never read.
async fn statements_return_at_most_max_rows(db: Db) {
    let tools = |defaults: &str| {
        format!(
            r#"
sources:
  shop: {{ url: "${{VALUES_DB_URL}}" }}
{defaults}
tools:
  numbers:
    source: shop
    description: The numbers from 1 to n.
    read_only: true
    parameters:
      n: {{ type: integer, min: 1, max: 5000 }}
    statements:
      - sql: WITH RECURSIVE seq (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < :n) SELECT i FROM seq
  few:
    source: shop
    description: The numbers from 1 to n, a few.
    read_only: true
    max_rows: 3
    parameters:
      n: {{ type: integer, min: 1, max: 5000 }}
    statements:
      - sql: WITH RECURSIVE seq (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < :n) SELECT i FROM seq
"#
        )
    };
    let env = [("VALUES_DB_URL", db.url.as_str())];
    let plain = db.write("rows.yaml", &tools(""));
    let client = stdio(&plain, &[], &env).await;
    let thousand = outcome(&client, "numbers", json!({"n": 1000})).await;
    assert_eq!(committed(&thousand).as_array().map(Vec::len), Some(1000));
    let over = outcome(&client, "numbers", json!({"n": 1001})).await;
    assert_eq!(over["status"], "business_error", "{over}");
    let said = over["error"].as_str().unwrap();
    assert!(
        said.contains("statement 1 returned more than 1000 rows (the tool's max_rows)"),
        "{over}"
    );
    let three = outcome(&client, "few", json!({"n": 3})).await;
    assert_eq!(committed(&three), &json!([{"i": 1}, {"i": 2}, {"i": 3}]));
    let four = outcome(&client, "few", json!({"n": 4})).await;
    assert_eq!(four["status"], "business_error", "{four}");
    assert!(
        four["error"].as_str().unwrap().contains("more than 3 rows"),
        "{four}"
    );
    client.cancel().await.unwrap();

    // `defaults.max_rows` for the tools that set none; a tool's own still wins.
    let bounded = db.write(
        "bounded.yaml",
        &tools(
            "defaults:
  max_rows: 2
",
        ),
    );
    let client = stdio(&bounded, &[], &env).await;
    let over = outcome(&client, "numbers", json!({"n": 3})).await;
    assert!(
        over["error"].as_str().unwrap().contains("more than 2 rows"),
        "{over}"
    );
    let three = outcome(&client, "few", json!({"n": 3})).await;
    assert_eq!(committed(&three).as_array().map(Vec::len), Some(3));
    client.cancel().await.unwrap();
}

crate::on_each_database!(
    values_land_as_given_whatever_the_column_type,
    statements_return_at_most_max_rows,
);

/// A `once` key holds a number as a number: `5` from one host and `5.0` from another
/// resending the same call are one call, answered from its record (they were two keys,
/// and the payment ran twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_in_a_once_key_is_one_key_however_it_is_spelled() {
    let db = Db::sqlite().await;
    db.exec("CREATE TABLE paid (acct INTEGER NOT NULL, amount DOUBLE PRECISION NOT NULL)")
        .await;
    let config = db.write(
        "once-number.yaml",
        r#"
sources:
  shop: { url: "${VALUES_DB_URL}" }
tools:
  pay:
    source: shop
    description: Pay an amount into an account, once.
    parameters:
      acct: { type: integer, description: The account. }
      amount: { type: number, description: How much. }
    once: { key: [acct, amount] }
    statements:
      - sql: INSERT INTO paid (acct, amount) VALUES (:acct, :amount)
"#,
    );
    let client = stdio(&config, &[], &[("VALUES_DB_URL", db.url.as_str())]).await;
    let first = outcome(&client, "pay", json!({"acct": 1, "amount": 5})).await;
    committed(&first);
    let again = outcome(&client, "pay", json!({"acct": 1, "amount": 5.0})).await;
    committed(&again);
    client.cancel().await.unwrap();
    assert_eq!(db.ints("SELECT count(*) FROM paid").await, [1], "paid once");
}

/// A `once` key longer than the records hold (255 bytes) is kept as its digest: the call
/// runs, once, and its resend is answered from the record. It was refused as a temporary
/// failure, which no retry could ever get past.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_once_key_longer_than_the_records_hold_still_runs_once() {
    let db = Db::sqlite().await;
    db.exec("CREATE TABLE seen (rid TEXT NOT NULL)").await;
    let config = db.write(
        "once-long.yaml",
        r#"
sources:
  shop: { url: "${VALUES_DB_URL}" }
tools:
  note:
    source: shop
    description: Note a request, once.
    parameters:
      rid: { type: string, description: The request's id., max: 1000 }
    once: { key: [rid] }
    statements:
      - sql: INSERT INTO seen (rid) VALUES (:rid)
"#,
    );
    let client = stdio(&config, &[], &[("VALUES_DB_URL", db.url.as_str())]).await;
    let rid = "r".repeat(400);
    for _ in 0..2 {
        let answer = outcome(&client, "note", json!({ "rid": rid })).await;
        committed(&answer);
    }
    client.cancel().await.unwrap();
    assert_eq!(
        db.ints("SELECT count(*) FROM seen").await,
        [1],
        "noted once"
    );
}
