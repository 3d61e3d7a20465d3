//! Contention: 16 threads × 50 transfers between 4 hot accounts, each thread on its own
//! connection, every transfer through the runner. Every transfer commits exactly once and
//! no money appears or disappears, with DEFERRED and with IMMEDIATE transactions.
//!
//! busy_timeout is 0 on every connection: each conflict surfaces as SQLITE_BUSY (5) or
//! SQLITE_BUSY_SNAPSHOT (517) and goes through the runner's rollback-and-retry, which is
//! what this test is about. (In production IMMEDIATE with a busy_timeout of a few seconds
//! lets writers queue inside SQLite; the runner is then the backstop. A DEFERRED
//! read-then-write transaction gains nothing from a busy timeout: once another writer
//! commits, its snapshot is stale and only a restart helps.) The budget is generous and the
//! backoff small, exponential, capped and fully jittered so the threads spread out.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use txretry::{Backoff, Jitter, RetryPolicy, SqliteBegin, TxOptions};

use crate::common::Db;

const THREADS: i64 = 16;
const TRANSFERS: i64 = 50;
const ACCOUNTS: i64 = 4;
const OPENING_BALANCE: i64 = 1_000;

struct Stats {
    retries: AtomicU64,
    worst_attempt: AtomicU32,
}

fn policy(stats: &Arc<Stats>) -> RetryPolicy {
    let stats = Arc::clone(stats);
    RetryPolicy::builder()
        .max_attempts(200)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(1),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(20))
        .jitter(Jitter::Full)
        .on_retry(move |event| {
            stats.retries.fetch_add(1, Ordering::Relaxed);
            stats
                .worst_attempt
                .fetch_max(event.attempt + 1, Ordering::Relaxed);
        })
        .build()
        .expect("valid policy")
}

/// The same budget for the reader, without counting its retries in the writers' stats.
fn reader_policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(200)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(1),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(20))
        .jitter(Jitter::Full)
        .build()
        .expect("valid policy")
}

fn setup(db: &Db) {
    let conn = db.open();
    conn.execute_batch(
        "CREATE TABLE account (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
         CREATE TABLE ledger (seq INTEGER PRIMARY KEY AUTOINCREMENT,
             transfer TEXT NOT NULL, from_id INTEGER NOT NULL, to_id INTEGER NOT NULL,
             amount INTEGER NOT NULL);",
    )
    .unwrap();
    for id in 0..ACCOUNTS {
        conn.execute("INSERT INTO account VALUES (?1, ?2)", [id, OPENING_BALANCE])
            .unwrap();
    }
}

fn total(conn: &rusqlite::Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT sum(balance) FROM account", [], |r| r.get(0))
}

/// One transfer: read both balances, write back the values computed from what was read
/// (a lost update would show in the total), and record it in the ledger.
fn transfer(
    tx: &mut rusqlite::Transaction<'_>,
    id: &str,
    from: i64,
    to: i64,
    amount: i64,
) -> rusqlite::Result<()> {
    let balance = |account: i64| -> rusqlite::Result<i64> {
        tx.query_row(
            "SELECT balance FROM account WHERE id = ?1",
            [account],
            |r| r.get(0),
        )
    };
    let (from_balance, to_balance) = (balance(from)?, balance(to)?);
    tx.execute(
        "UPDATE account SET balance = ?1 WHERE id = ?2",
        [from_balance - amount, from],
    )?;
    tx.execute(
        "UPDATE account SET balance = ?1 WHERE id = ?2",
        [to_balance + amount, to],
    )?;
    tx.execute(
        "INSERT INTO ledger (transfer, from_id, to_id, amount) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![id, from, to, amount],
    )?;
    Ok(())
}

fn run(begin: SqliteBegin) {
    let db = Db::wal();
    setup(&db);
    let stats = Arc::new(Stats {
        retries: AtomicU64::new(0),
        worst_attempt: AtomicU32::new(1),
    });
    let policy = policy(&stats);
    let options = TxOptions::new().sqlite_begin(begin);
    let start = Arc::new(Barrier::new(THREADS as usize + 1));
    let writers_done = Arc::new(AtomicBool::new(false));

    // Every connection is opened here, before any thread starts: a thread that failed
    // before the barrier would leave the others waiting on it forever.
    let mut reader_conn = db.open();
    let writer_conns: Vec<_> = (0..THREADS).map(|_| db.open()).collect();

    // Meanwhile a reader checks, in read-only transactions, that the total never changes.
    let reader = {
        let (policy, start, done) = (
            reader_policy(),
            Arc::clone(&start),
            Arc::clone(&writers_done),
        );
        thread::spawn(move || {
            let read_only = TxOptions::new().read_only(true);
            start.wait();
            let mut checks = 0u32;
            while !done.load(Ordering::Acquire) && checks < 10_000 {
                let sum = txretry::rusqlite::transaction_with(
                    &mut reader_conn,
                    &policy,
                    &read_only,
                    |tx| total(tx),
                )
                .expect("read-only total");
                assert_eq!(sum, ACCOUNTS * OPENING_BALANCE, "total changed mid-run");
                checks += 1;
                thread::sleep(Duration::from_millis(1));
            }
            checks
        })
    };

    let writers: Vec<_> = (0..THREADS)
        .zip(writer_conns)
        .map(|(t, mut conn)| {
            let (policy, options, start) = (policy.clone(), options.clone(), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                for i in 0..TRANSFERS {
                    let from = (t + i) % ACCOUNTS;
                    let to = (from + 1 + i % (ACCOUNTS - 1)) % ACCOUNTS;
                    let amount = 1 + (t * 7 + i * 3) % 25;
                    let id = format!("{t}-{i}");
                    txretry::rusqlite::transaction_with(&mut conn, &policy, &options, |tx| {
                        transfer(tx, &id, from, to, amount)
                    })
                    .unwrap_or_else(|e| panic!("transfer {id} did not commit: {e}"));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer thread");
    }
    writers_done.store(true, Ordering::Release);
    let checks = reader.join().expect("reader thread");

    let conn = db.open();
    assert_eq!(
        total(&conn).unwrap(),
        ACCOUNTS * OPENING_BALANCE,
        "sum of balances"
    );
    let (rows, distinct): (i64, i64) = conn
        .query_row(
            "SELECT count(*), count(DISTINCT transfer) FROM ledger",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(rows, THREADS * TRANSFERS, "one ledger row per transfer");
    assert_eq!(distinct, THREADS * TRANSFERS, "no transfer recorded twice");
    // The ledger replays to the final balances.
    let replay_mismatch: i64 = conn
        .query_row(
            "SELECT count(*) FROM account a WHERE a.balance != ?1
               - coalesce((SELECT sum(amount) FROM ledger WHERE from_id = a.id), 0)
               + coalesce((SELECT sum(amount) FROM ledger WHERE to_id = a.id), 0)",
            [OPENING_BALANCE],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(replay_mismatch, 0, "balances match the ledger");

    eprintln!(
        "{begin:?}: {} transfers, {} retries, worst transfer took {} attempts; {checks} checks of the total",
        THREADS * TRANSFERS,
        stats.retries.load(Ordering::Relaxed),
        stats.worst_attempt.load(Ordering::Relaxed),
    );
}

#[test]
fn contended_transfers_all_commit_once_with_deferred() {
    run(SqliteBegin::Deferred);
}

#[test]
fn contended_transfers_all_commit_once_with_immediate() {
    run(SqliteBegin::Immediate);
}
