//! The commit boundary through txretry-testkit's `CommitFaultProxy`: the runner's COMMIT
//! reaches the server and lands, but the proxy answers it as PgBouncer does when its server
//! link breaks (FATAL 08P01) and closes the connection. Nobody can tell from that answer
//! whether the transaction committed, so the verdict is ambiguous and the runner does not
//! run the closure again — a retry would insert the row twice.

use tokio_postgres::error::SqlState;
use txretry::{KindSet, Phase, RetryPolicy, StopReason, TransientKind, TxOptions, Verdict};
use txretry_testkit::CommitFaultProxy;

use crate::common::*;

/// `CREATE TABLE {name} (note text NOT NULL)`: no key, so a second run would show as a
/// second row rather than as a unique violation.
async fn create_notes(client: &tokio_postgres::Client, name: &str) {
    client
        .batch_execute(&format!("CREATE TABLE {name} (note text NOT NULL)"))
        .await
        .expect("create table");
}

/// Rows in `name` with `note`, read on a direct connection.
async fn notes(client: &tokio_postgres::Client, name: &str, note: &str) -> i64 {
    client
        .query_one(
            &format!("SELECT count(*) FROM {name} WHERE note = $1"),
            &[&note],
        )
        .await
        .expect("count rows")
        .get(0)
}

/// A policy of five attempts that retries every kind (connection failures included),
/// recording retries and give-ups.
fn retry_everything() -> (RetryPolicy, Seen) {
    let (builder, seen) = recording(5);
    let policy = seen
        .give_ups(builder.retry_on(KindSet::ALL))
        .build()
        .unwrap();
    (policy, seen)
}

/// A test's sessions: `direct` to the server, `client` through a `proxy` armed for one
/// COMMIT fault; `t` is a new notes table.
struct Faulted {
    direct: tokio_postgres::Client,
    t: String,
    proxy: CommitFaultProxy,
    client: tokio_postgres::Client,
}

/// `None` when the test must skip.
async fn start(test: &str, prefix: &str) -> Option<Faulted> {
    let url = url(test)?;
    let direct = connect(&url).await;
    let t = table(prefix);
    create_notes(&direct, &t).await;
    let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
    let client = connect(proxy.url()).await;
    proxy.arm_commit_faults(1);
    Some(Faulted {
        direct,
        t,
        proxy,
        client,
    })
}

/// Inserts `note` into `t` unless it is there: the same effect however often it runs.
fn insert_if_absent(t: &str, note: &str) -> String {
    format!(
        "INSERT INTO {t} SELECT '{note}' WHERE NOT EXISTS \
         (SELECT 1 FROM {t} WHERE note = '{note}')"
    )
}

/// What the proxy's fault looks like to the runner's caller: the pooler's own error,
/// unchanged, judged ambiguous at COMMIT on the first attempt.
fn assert_ambiguous_commit(err: &txretry::TxError<tokio_postgres::Error>) {
    assert_eq!(
        err.error().code(),
        Some(&SqlState::PROTOCOL_VIOLATION),
        "{err:?}"
    );
    let db = err
        .error()
        .as_db_error()
        .expect("the proxy's ErrorResponse");
    assert_eq!(db.severity(), "FATAL");
    assert_eq!(db.message(), "server conn crashed?");
    // On its own, 08P01 is a connection failure…
    assert_eq!(
        txretry::classify(err.error()).verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    // …but at COMMIT it means "may have committed".
    let outcome = err.outcome();
    assert!(outcome.may_have_committed(), "{outcome:?}");
    assert_eq!(outcome.verdict(), Verdict::Ambiguous);
    assert_eq!(outcome.code(), Some(sqlstate("08P01")));
    assert_eq!(outcome.phase(), Phase::Commit);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.history().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_answered_with_08p01_is_ambiguous_and_not_rerun() {
    let Some(Faulted {
        direct,
        t,
        proxy,
        mut client,
    }) = start("tokio_postgres::commit_fault", "tp_commit_fault").await
    else {
        return;
    };
    let (policy, seen) = retry_everything();
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        tx.execute(&format!("INSERT INTO {t} VALUES ('order 17')"), &[])
            .await
    })
    .await
    .expect_err("the proxy answers the COMMIT with 08P01");

    assert_ambiguous_commit(&err);
    assert_eq!(attempts, 1, "an ambiguous COMMIT is not run again");
    assert!(seen.retried().is_empty());
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 1, "one COMMIT went through the proxy");
    // The one client is closed: the runner could not have retried on it anyway.
    assert_eq!(
        err.outcome().stop_reason(),
        StopReason::ConnectionUnusable,
        "{err:?}"
    );
    assert_eq!(
        seen.gave_up(),
        vec![err.outcome().clone()],
        "the give-up hook saw the ambiguous outcome once"
    );
    assert_eq!(
        notes(&direct, &t, "order 17").await,
        1,
        "the COMMIT landed, exactly once"
    );
    drop_tables(&direct, &[&t]).await;
}

/// An idempotent call may retry an ambiguous COMMIT, but the tokio-postgres runner has one
/// borrowed client and no way to open another: the fault closed it, so the loop ends with
/// `ConnectionUnusable` after one attempt. (Retrying an ambiguous commit on a fresh
/// connection needs a pooled runner, such as `txretry::sqlx`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_call_retries_an_ambiguous_commit() {
    let Some(Faulted {
        direct,
        t,
        proxy,
        mut client,
    }) = start(
        "tokio_postgres::commit_fault_idempotent",
        "tp_commit_fault_idem",
    )
    .await
    else {
        return;
    };
    let (policy, seen) = retry_everything();
    let options = TxOptions::new().idempotent(true);
    let insert = insert_if_absent(&t, "order 18");
    let mut attempts = 0;
    let err =
        txretry::tokio_postgres::transaction_with(&mut client, &policy, &options, async |tx| {
            attempts += 1;
            tx.execute(&insert, &[]).await
        })
        .await
        .expect_err("the client is closed: no second attempt is possible");

    assert_ambiguous_commit(&err);
    assert_eq!(attempts, 1);
    assert_eq!(
        err.outcome().stop_reason(),
        StopReason::ConnectionUnusable,
        "idempotent, but the runner's one client is gone: {err:?}"
    );
    assert!(seen.retried().is_empty(), "no retry was even scheduled");
    assert_eq!(seen.gave_up().len(), 1);
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 1);
    wait_until_closed(&client).await;
    assert_eq!(
        notes(&direct, &t, "order 18").await,
        1,
        "the COMMIT landed, exactly once"
    );

    // What the caller does next: a fresh client, the same idempotent call. It commits, and
    // the note is still there once.
    let mut fresh = connect(proxy.url()).await;
    let inserted =
        txretry::tokio_postgres::transaction_with(&mut fresh, &policy, &options, async |tx| {
            tx.execute(&insert, &[]).await
        })
        .await
        .expect("the proxy is disarmed");
    assert_eq!(inserted, 0, "the first COMMIT had landed");
    assert_eq!(notes(&direct, &t, "order 18").await, 1);
    drop_tables(&direct, &[&t]).await;
}
