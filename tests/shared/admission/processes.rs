//! Two processes that must take turns on a key, and a key that turns contended: the
//! scenarios on [`Driver::record`] and [`Driver::held_per_attempt`].

use txretry::{Admission, TxOptions};
use txretry_testkit::contended;
use txretry_testkit::intervals::{
    self, KEYS, Meeting, ROUNDS, WORKERS, assert_no_overlap, assert_overlap, policy, shared,
};

use super::{Driver, Interval, OnRow, key, url};
use crate::admission_db::Db;

/// Two processes (`WORKERS` tasks × `ROUNDS` transactions on `KEYS` keys each) against a
/// new interval table named from `prefix`, dropped after; each transaction records when it
/// ran, inside the transaction (after its locks). With `barrier`, the first transaction of
/// worker 0 in each process waits for the other's inside the transaction, so the two
/// certainly overlap unless something keeps them apart. Returns how many pairs of
/// intervals on one key overlap.
async fn two_processes(
    url: &str,
    prefix: &str,
    admission: fn() -> Admission,
    barrier: bool,
) -> i64 {
    let table = &txretry_testkit::unique_name(&format!("{}_{prefix}", Db::BINARY.prefix));
    Db::exec(url, Db::BINARY.server.interval_table(table)).await;
    let meeting = Meeting::new(barrier);
    let mut tasks = tokio::task::JoinSet::new();
    let mut processes = Vec::new();
    for process_id in 0..intervals::PROCESSES {
        let process =
            Db::process(url, &format!("{table}_p{process_id}"), WORKERS as u32, None).await;
        // Each process its own policy, with its own Admission.
        let policy = policy(admission(), 100);
        for worker in 0..WORKERS {
            let mut on = Db::worker(&process).await;
            let (policy, table, meeting) = (policy.clone(), table.to_string(), meeting.clone());
            tasks.spawn(async move {
                for round in 0..ROUNDS {
                    let n = intervals::key_of(worker, round);
                    let options = TxOptions::new().contends_on(key(&table, n));
                    let meet = meeting.for_round(worker, round);
                    let (table, k, process) = (table.clone(), n, process_id);
                    let interval = Interval {
                        table,
                        k,
                        process,
                        meet,
                    };
                    Db::record(&mut on, &policy, &options, interval).await;
                }
            });
        }
        processes.push(process);
    }
    intervals::join_all(tasks).await;
    // Back in the pools, the sessions hold no lock; nor once the pools are closed.
    for n in 0..KEYS {
        assert_eq!(Db::key_holders(url, &key(table, n)).await, 0, "key {n}");
    }
    for process in processes {
        Db::close(process).await;
    }
    for n in 0..KEYS {
        assert_eq!(Db::key_holders(url, &key(table, n)).await, 0, "key {n}");
    }
    let rows = Db::query_i64(url, format!("SELECT count(*) FROM {table}")).await;
    intervals::assert_all_committed(rows);
    let overlaps = Db::query_i64(url, intervals::overlaps_sql(table)).await;
    Db::exec(url, format!("DROP TABLE IF EXISTS {table}")).await;
    overlaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_never_run_one_key_at_once() {
    let Some(url) = url("never_overlap") else {
        return;
    };
    let overlaps = two_processes(&url, "shared", shared, false).await;
    assert_no_overlap(overlaps);
}

/// The check above can fail: with admission per process only, the two processes run the
/// same key at once (forced here, so it does not depend on timing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_database_two_processes_overlap() {
    let Some(url) = url("overlap") else { return };
    let overlaps = two_processes(&url, "local", Admission::per_key, true).await;
    assert_overlap(overlaps);
}

/// `only_for_contended_keys`: a key's first transaction takes no lock on the database; a
/// real collision on it (see each driver's `held_per_attempt`) turns the locks on for the
/// retry and for the key's later transactions in this process, not for other keys, and not
/// in another process that saw no collision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_keys_are_locked_after_their_first_collision() {
    let Some(url) = url("contended keys") else {
        return;
    };
    let url = &url;
    let table = &txretry_testkit::unique_name(&format!("{}_cont", Db::BINARY.prefix));
    let options = Db::BINARY.server.table_options();
    Db::exec(
        url,
        format!("CREATE TABLE {table} (id int PRIMARY KEY, v bigint NOT NULL){options}"),
    )
    .await;
    Db::exec(url, format!("INSERT INTO {table} VALUES (1, 0), (2, 0)")).await;
    // Processes of this test's own: a first attempt's session setting stays in its session.
    let mut processes = Vec::new();
    for name in ["a", "b"] {
        let process = Db::process(url, &format!("{table}_{name}"), 2, None).await;
        let worker = Db::worker(&process).await;
        processes.push((process, worker, policy(contended::adaptive(), 5)));
    }
    for step in contended::STEPS {
        let (_, worker, policy) = &mut processes[step.process];
        let (id, collide) = (step.row, step.collide);
        let row = OnRow {
            url,
            table,
            id,
            collide,
        };
        let held = Db::held_per_attempt(worker, policy, row).await;
        assert_eq!(held, step.held, "{}", step.what);
    }
    for (id, after) in [(1, contended::ROW_1_AFTER), (2, contended::ROW_2_AFTER)] {
        let row = OnRow {
            url,
            table,
            id,
            collide: false,
        };
        let v = Db::query_i64(url, row.select()).await;
        assert_eq!(v, after, "row {id}");
    }
    for (process, _, _) in processes {
        Db::close(process).await;
    }
    Db::exec(url, format!("DROP TABLE IF EXISTS {table}")).await;
}
