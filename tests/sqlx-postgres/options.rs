//! `TxOptions` on Postgres: the isolation level and read-only mode are really applied, as
//! the server reports them from inside the closure.

use txretry::{Isolation, RetryPolicy, TxOptions, Verdict};

use crate::common::{assert_permanent_once, drop_table, exec, setup, sql, sqlstate, table};

async fn show(options: Option<&TxOptions>, pool: &sqlx::PgPool) -> (String, String) {
    let policy = RetryPolicy::disabled();
    let body = async |tx: &mut sqlx::Transaction<'_, sqlx::Postgres>| {
        let isolation: String = sqlx::query_scalar("SHOW transaction_isolation")
            .fetch_one(&mut **tx)
            .await?;
        let read_only: String = sqlx::query_scalar("SHOW transaction_read_only")
            .fetch_one(&mut **tx)
            .await?;
        Ok::<_, sqlx::Error>((isolation, read_only))
    };
    match options {
        None => txretry::sqlx::transaction(pool, &policy, body)
            .await
            .unwrap(),
        Some(options) => txretry::sqlx::transaction_with(pool, &policy, options, body)
            .await
            .unwrap(),
    }
}

#[tokio::test]
async fn isolation_and_read_only_are_applied() {
    let Some((_, pool)) = setup("sqlx-postgres options", 1).await else {
        return;
    };

    assert_eq!(
        show(None, &pool).await,
        ("read committed".into(), "off".into())
    );
    for (level, shown) in [
        (Isolation::ReadUncommitted, "read uncommitted"),
        (Isolation::ReadCommitted, "read committed"),
        (Isolation::RepeatableRead, "repeatable read"),
        (Isolation::Serializable, "serializable"),
    ] {
        let options = TxOptions::new().isolation(level);
        assert_eq!(
            show(Some(&options), &pool).await,
            (shown.into(), "off".into()),
            "{level:?}"
        );
    }
    let options = TxOptions::new()
        .isolation(Isolation::Serializable)
        .read_only(true);
    assert_eq!(
        show(Some(&options), &pool).await,
        ("serializable".into(), "on".into())
    );
    let options = TxOptions::new().read_only(true);
    assert_eq!(
        show(Some(&options), &pool).await,
        ("read committed".into(), "on".into())
    );
    // Options last for their transaction only (one pooled connection throughout).
    assert_eq!(
        show(None, &pool).await,
        ("read committed".into(), "off".into())
    );
}

#[tokio::test]
async fn write_in_read_only_transaction_is_permanent() {
    let Some((_, pool)) = setup("sqlx-postgres read_only", 1).await else {
        return;
    };
    let t = table("readonly");
    exec(&pool, format!("CREATE TABLE {t} (id int PRIMARY KEY)")).await;

    let mut calls = 0;
    let options = TxOptions::new().read_only(true);
    let err =
        // Even under a policy that rides out failovers: the caller asked for read-only.
        txretry::sqlx::transaction_with(&pool, &RetryPolicy::high_availability(), &options, async |tx| {
            calls += 1;
            sqlx::query(sql(format!("INSERT INTO {t} VALUES (1)")))
                .execute(&mut **tx)
                .await
                .map(drop)
        })
        .await
        .unwrap_err();
    assert_eq!(calls, 1);
    // Out of context, 25006 is a write that reached a standby (a failover); the runner knows
    // this transaction was asked to be read-only, so its outcome is permanent.
    let c = txretry::classify(err.error());
    assert_eq!(
        c.verdict,
        Verdict::Transient(txretry::TransientKind::Failover)
    );
    assert_eq!(
        c.code,
        sqlstate("25006"),
        "read_only_sql_transaction: {err}"
    );
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), sqlstate("25006"));
    drop_table(&pool, &t).await;
}
