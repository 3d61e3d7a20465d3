//! The options reach the server: the isolation level and READ ONLY are those of the
//! transaction the closure runs in; a write in a transaction asked to be read-only (25006)
//! is the caller's own, permanent, and the connection stays usable.

use diesel::prelude::*;
use diesel::sql_types::Text;
use txretry::{Isolation, RetryPolicy, TxError, TxOptions};
use txretry_testkit::outcome::assert_permanent_once;

use crate::common::*;

#[derive(QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    s: String,
}

fn setting(conn: &mut PgConnection, name: &str) -> Result<String, diesel::result::Error> {
    diesel::sql_query("SELECT current_setting($1) AS s")
        .bind::<Text, _>(name)
        .get_result::<Setting>(conn)
        .map(|row| row.s)
}

#[test]
fn isolation_and_read_only_are_the_transactions() {
    let Some(url) = url("diesel_postgres::options") else {
        return;
    };
    let mut conn = connect(&url);
    let policy = RetryPolicy::default();
    let options = TxOptions::new()
        .isolation(Isolation::RepeatableRead)
        .read_only(true);
    let (isolation, read_only) =
        txretry::diesel::transaction_with(&mut conn, &policy, &options, |conn| {
            Ok::<_, diesel::result::Error>((
                setting(conn, "transaction_isolation")?,
                setting(conn, "transaction_read_only")?,
            ))
        })
        .expect("a read");
    assert_eq!(isolation, "repeatable read");
    assert_eq!(read_only, "on");
    // Nothing of it stays on the session.
    let after = txretry::diesel::transaction(&mut conn, &policy, |conn| {
        setting(conn, "transaction_read_only")
    })
    .expect("a read");
    assert_eq!(after, "off");
}

#[test]
fn a_write_in_a_read_only_transaction_is_permanent() {
    let Some(url) = url("diesel_postgres::read_only") else {
        return;
    };
    let mut conn = connect(&url);
    let t = table("dpg_read_only");
    create_rows(&mut conn, &t, 1);
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .retry_on(txretry::KindSet::ALL)
        .build()
        .unwrap();

    let mut attempts = 0;
    let result: Result<usize, TxError<diesel::result::Error>> = txretry::diesel::transaction_with(
        &mut conn,
        &policy,
        &TxOptions::new().read_only(true),
        |conn| {
            attempts += 1;
            diesel::sql_query(format!("UPDATE {t} SET v = 1 WHERE id = 1")).execute(conn)
        },
    );
    let err = result.expect_err("read-only");
    assert_eq!(diesel_sqlstate(err.error()).as_deref(), Some("25006"));
    // On a standby 25006 would be a failover; here it is the caller's own write.
    assert_permanent_once(err.outcome());
    assert_eq!(attempts, 1);
    txretry::diesel::transaction(&mut conn, &policy, |conn| {
        diesel::sql_query(format!("UPDATE {t} SET v = 2 WHERE id = 1")).execute(conn)
    })
    .expect("the connection is still usable");
    assert_eq!(value(&mut conn, &t, 1), 2);
    drop_tables(&mut conn, &[&t]);
}
