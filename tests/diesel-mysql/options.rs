//! The options reach the server: `START TRANSACTION READ ONLY` refuses a write (1792,
//! SQLSTATE 25006), which is the caller's own and permanent; the next transaction on the
//! connection is read-write again.

use diesel::prelude::*;
use txretry::{Isolation, RetryPolicy, TxError, TxOptions};
use txretry_testkit::outcome::assert_permanent_once;

use crate::common::*;

#[test]
fn a_write_in_a_read_only_transaction_is_permanent() {
    let Some(url) = url("diesel_mysql::read_only") else {
        return;
    };
    let mut conn = connect(&url);
    let t = table("dmy_read_only");
    create_rows(&mut conn, &t, 1);
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .retry_on(txretry::KindSet::ALL)
        .build()
        .unwrap();
    let options = TxOptions::new()
        .read_only(true)
        .isolation(Isolation::Serializable);

    let mut attempts = 0;
    let result: Result<usize, TxError<diesel::result::Error>> =
        txretry::diesel::transaction_with(&mut conn, &policy, &options, |conn| {
            attempts += 1;
            diesel::sql_query(format!("UPDATE {t} SET v = 1 WHERE id = 1")).execute(conn)
        });
    let err = result.expect_err("read-only");
    let (state, message) = kept(err.error()).expect("a database error");
    assert_eq!(state, "25006", "{message}");
    assert_permanent_once(err.outcome());
    assert_eq!(attempts, 1);
    txretry::diesel::transaction(&mut conn, &policy, |conn| {
        diesel::sql_query(format!("UPDATE {t} SET v = 2 WHERE id = 1")).execute(conn)
    })
    .expect("read-write again");
    assert_eq!(value(&mut conn, &t, 1), 2);
    drop_tables(&mut conn, &[&t]);
}
