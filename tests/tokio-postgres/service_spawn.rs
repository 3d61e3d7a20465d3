//! The shape most applications have: a service struct that owns a client and a policy, an
//! `async fn` method that calls the runner, and `tokio::spawn` of that method on an
//! `Arc` of the service. The closure is `async move` over copied values, so the spawned
//! future is `Send` and `'static`; this is a compile test first, and it runs real transfers.

use std::sync::Arc;

use tokio::sync::Mutex;
use tokio_postgres::Client;
use txretry::{RetryPolicy, TxError};

use crate::common::*;

#[derive(Debug, thiserror::Error)]
enum TransferError {
    #[error("account {0} has {1}, less than {2}")]
    InsufficientFunds(i32, i64, i64),
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}

struct Bank {
    client: Mutex<Client>,
    policy: RetryPolicy,
    accounts: Arc<str>,
}

impl Bank {
    /// Moves `amount` from `from` to `to`; returns the new balance of `from`.
    async fn transfer(
        &self,
        from: i32,
        to: i32,
        amount: i64,
    ) -> Result<i64, TxError<TransferError>> {
        let mut client = self.client.lock().await;
        let accounts = Arc::clone(&self.accounts);
        txretry::tokio_postgres::transaction(&mut client, &self.policy, async move |tx| {
            let balance: i64 = tx
                .query_one(
                    &format!("SELECT v FROM {accounts} WHERE id = $1 FOR UPDATE"),
                    &[&from],
                )
                .await?
                .get(0);
            if balance < amount {
                return Err(TransferError::InsufficientFunds(from, balance, amount));
            }
            let update = format!("UPDATE {accounts} SET v = v + $1 WHERE id = $2");
            tx.execute(&update, &[&-amount, &from]).await?;
            tx.execute(&update, &[&amount, &to]).await?;
            Ok(balance - amount)
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_service_method_compiles() {
    let Some(url) = url("tokio_postgres::service_spawn") else {
        return;
    };
    let observer = connect(&url).await;
    let t = table("tp_bank");
    create_rows(&observer, &t, 2).await;
    observer
        .batch_execute(&format!("UPDATE {t} SET v = 100 WHERE id = 1"))
        .await
        .unwrap();

    let bank = Arc::new(Bank {
        client: Mutex::new(connect(&url).await),
        policy: RetryPolicy::default(),
        accounts: Arc::from(t.as_str()),
    });
    let transfers: Vec<_> = (0..3)
        .map(|_| {
            let bank = Arc::clone(&bank);
            tokio::spawn(async move { bank.transfer(1, 2, 30).await })
        })
        .collect();
    let mut left = Vec::new();
    for transfer in transfers {
        left.push(transfer.await.unwrap().expect("the transfer commits"));
    }
    left.sort_unstable();
    assert_eq!(left, vec![10, 40, 70]);
    assert_eq!(value(&observer, &t, 1).await, 10);
    assert_eq!(value(&observer, &t, 2).await, 90);

    // The business error comes back through the spawned task, unchanged, and nothing moved.
    let err = tokio::spawn({
        let bank = Arc::clone(&bank);
        async move { bank.transfer(1, 2, 30).await }
    })
    .await
    .unwrap()
    .expect_err("only 10 left");
    assert!(
        matches!(err.error(), TransferError::InsufficientFunds(1, 10, 30)),
        "{err:?}"
    );
    assert_eq!(err.outcome().verdict(), txretry::Verdict::Permanent);
    assert_eq!(err.outcome().attempts(), 1);
    assert_eq!(value(&observer, &t, 1).await, 10);
    assert_eq!(value(&observer, &t, 2).await, 90);
    drop_tables(&observer, &[&t]).await;
}
