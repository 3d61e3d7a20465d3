//! A write in a transaction asked to be read-only (`BEGIN … READ ONLY` on Postgres, `START
//! TRANSACTION READ ONLY` on MySQL/MariaDB, both answering SQLSTATE 25006) is the caller's
//! own: permanent, even though a 25006 on its own means a standby; the connection stays
//! usable and the next transaction is read-write. Written once for both servers and both
//! Diesels (a `#[path]` module, like `business.rs`).

use txretry::{Code, Isolation, RetryPolicy, SqlState, TxError, TxOptions};
use txretry_testkit::outcome::assert_permanent_once;

use crate::calls::*;
use crate::common::*;

#[test]
fn a_write_in_a_read_only_transaction_is_permanent() {
    let Some(url) = url(&format!("{BINARY}::read_only")) else {
        return;
    };
    let mut conn = connect(&url);
    let t = table(&format!("{BINARY}_read_only"));
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
        transaction_with!(&mut conn, &policy, &options, |conn| {
            attempts += 1;
            execute!(
                diesel::sql_query(format!("UPDATE {t} SET v = 1 WHERE id = 1")),
                conn
            )
        });
    let err = result.expect_err("read-only");
    assert_permanent_once(err.outcome());
    assert_eq!(
        err.outcome().code(),
        Some(Code::SqlState(SqlState::new("25006").unwrap())),
        "{err:?}"
    );
    assert_eq!(attempts, 1);
    transaction_with!(&mut conn, &policy, &TxOptions::default(), |conn| {
        execute!(
            diesel::sql_query(format!("UPDATE {t} SET v = 2 WHERE id = 1")),
            conn
        )
    })
    .expect("the connection is usable, and read-write again");
    assert_eq!(value(&mut conn, &t, 1), 2);
    drop_tables(&mut conn, &[&t]);
}
