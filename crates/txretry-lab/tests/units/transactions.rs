//! `src/workload/transactions.rs`.

use txretry_lab::cli::Workload;
use txretry_lab::workload::*;

#[test]
fn jobs_stay_in_their_rows_and_ids_are_unique() {
    let mut rng = fastrand::Rng::with_seed(7);
    let transfers = Schema::new::<sqlx::Sqlite>(Workload::Transfer, 2);
    let mut ids = std::collections::HashSet::new();
    for seq in 0..200 {
        let Job::Transfer(t) = transfers.next_job(&mut rng, 3, seq) else {
            panic!("a transfer workload makes transfers");
        };
        assert!(t.from != t.to && (1..=2).contains(&t.from) && (1..=2).contains(&t.to));
        assert!((1..=MAX_AMOUNT).contains(&t.amount));
        assert_eq!(Job::Transfer(t).contends_on(), vec![t.from, t.to]);
        assert!(
            ids.insert(Job::Transfer(t).key()),
            "transfer ids are unique"
        );
    }
    let hot = Schema::new::<sqlx::Sqlite>(Workload::HotRows, 4);
    let job = hot.next_job(&mut rng, 0, 0);
    assert!(matches!(job, Job::Bump(1..=4)) && job.contends_on() == vec![job.key()]);
    let history = Schema::new::<sqlx::Sqlite>(Workload::History, 1);
    let (a, b) = (
        history.next_job(&mut rng, 1, 5),
        history.next_job(&mut rng, 2, 5),
    );
    assert!(a.key() != b.key() && a.contends_on().is_empty());
}
