//! 40001: write skew under SERIALIZABLE. Two doctors are on call; a transaction may take
//! one off call only while both are. The runner's transaction reads the count, another
//! session takes doctor 2 off call and commits, then the runner takes doctor 1 off call:
//! Postgres refuses one of them (at the UPDATE or at COMMIT), the runner retries, sees one
//! doctor left and changes nothing. The invariant holds. Written once for Postgres
//! through Diesel and diesel-async (a `#[path]` module, like `business.rs`).

use txretry::{Isolation, TransientKind, TxOptions, Verdict};

use crate::calls::*;
use crate::common::*;

#[test]
fn write_skew_under_serializable_is_retried_and_the_invariant_holds() {
    let Some(url) = url(&format!("{BINARY}::serialization")) else {
        return;
    };
    let mut observer = connect(&url);
    let t = table(&format!("{BINARY}_on_call"));
    exec(
        &mut observer,
        &format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, on_call boolean NOT NULL);
             INSERT INTO {t} VALUES (1, true), (2, true);"
        ),
    );
    let mut a = connect(&url);
    let mut b = connect(&url);
    let b_sql = format!(
        "BEGIN ISOLATION LEVEL SERIALIZABLE;
         SELECT count(*) FROM {t} WHERE on_call;
         UPDATE {t} SET on_call = false WHERE id = 2;
         COMMIT;"
    );

    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let serializable = TxOptions::new().isolation(Isolation::Serializable);
    let mut attempts = 0;
    let on_call = transaction_with!(&mut a, &policy, &serializable, |conn| {
        attempts += 1;
        let on_call = count(conn, &t, "on_call");
        if attempts == 1 {
            // The other doctor's transaction, start to finish, in between.
            exec(&mut b, &b_sql);
        }
        if on_call >= 2 {
            execute!(
                diesel::sql_query(format!("UPDATE {t} SET on_call = false WHERE id = 1")),
                conn
            )?;
        }
        Ok::<_, diesel::result::Error>(on_call)
    })
    .expect("the retry commits");

    assert_eq!(attempts, 2);
    assert_eq!(on_call, 1, "the retry saw doctor 2 off call");
    let retried = seen.retried();
    assert_eq!(retried.len(), 1, "{retried:?}");
    assert_eq!(
        retried[0].verdict,
        Verdict::Transient(TransientKind::SerializationFailure)
    );
    assert_eq!(retried[0].code, Some(sqlstate("40001")));
    assert_eq!(
        count(&mut observer, &t, "on_call"),
        1,
        "one doctor still on call"
    );
    drop_tables(&mut observer, &[&t]);
}
