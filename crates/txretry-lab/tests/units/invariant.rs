//! `src/workload/invariant.rs`.

use std::collections::HashMap;
use txretry_lab::workload::*;

fn balances(values: &[i64]) -> HashMap<i64, i64> {
    values
        .iter()
        .enumerate()
        .map(|(i, &b)| (i as i64 + 1, b))
        .collect()
}

#[test]
fn a_consistent_bank_passes() {
    let ledger = [Transfer {
        id: 7,
        from: 1,
        to: 2,
        amount: 100,
    }];
    let inv = check_transfer(2, &balances(&[900, 1100]), &ledger, &[7], &[]);
    assert!(inv.ok, "{}", inv.detail);
}

#[test]
fn every_kind_of_damage_is_caught() {
    let t = Transfer {
        id: 7,
        from: 1,
        to: 2,
        amount: 100,
    };
    // Money created.
    assert!(!check_transfer(2, &balances(&[900, 1200]), &[t], &[7], &[]).ok);
    // A committed transfer without its ledger row.
    assert!(!check_transfer(2, &balances(&[900, 1100]), &[], &[7], &[]).ok);
    // A ledger row nobody committed or may have committed.
    assert!(!check_transfer(2, &balances(&[900, 1100]), &[t], &[], &[]).ok);
    // A transfer applied twice.
    assert!(!check_transfer(2, &balances(&[800, 1200]), &[t, t], &[7], &[]).ok);
    // Balances moved without the ledger agreeing, though the sum holds.
    assert!(!check_transfer(2, &balances(&[1000, 1000]), &[t], &[7], &[]).ok);
    // Overdrawn.
    let big = Transfer { amount: 1100, ..t };
    assert!(!check_transfer(2, &balances(&[-100, 2100]), &[big], &[7], &[]).ok);
}

#[test]
fn an_ambiguous_commit_may_land_once_or_not_at_all() {
    let t = Transfer {
        id: 7,
        from: 1,
        to: 2,
        amount: 100,
    };
    // Landed: its row is in the ledger once.
    let landed = check_transfer(2, &balances(&[900, 1100]), &[t], &[], &[7]);
    assert!(landed.ok, "{}", landed.detail);
    assert!(
        landed.detail.contains("of 1 ambiguous COMMIT(s), 1 landed"),
        "{}",
        landed.detail
    );
    // Did not land.
    let lost = check_transfer(2, &balances(&[1000, 1000]), &[], &[], &[7]);
    assert!(lost.ok, "{}", lost.detail);
    assert!(lost.detail.contains("0 landed"), "{}", lost.detail);
    // Landed twice: still caught.
    assert!(!check_transfer(2, &balances(&[800, 1200]), &[t, t], &[], &[7]).ok);
    // An ambiguous id does not excuse another id's row.
    assert!(!check_transfer(2, &balances(&[900, 1100]), &[t], &[], &[8]).ok);

    let counters: HashMap<i64, i64> = [(1, 2), (2, 1)].into();
    // Row 1: one sure commit and one that may have landed (it did).
    assert!(check_hot_rows(2, &counters, &[1, 2], &[1]).ok);
    // Row 1: one that may have landed did not.
    let counters_lost: HashMap<i64, i64> = [(1, 1), (2, 1)].into();
    assert!(check_hot_rows(2, &counters_lost, &[1, 2], &[1]).ok);
    // The maybe is on another row: row 1 is one above its commits.
    assert!(!check_hot_rows(2, &counters, &[1, 2], &[2]).ok);
    // One ambiguous COMMIT cannot account for two increments.
    let twice: HashMap<i64, i64> = [(1, 3), (2, 1)].into();
    assert!(!check_hot_rows(2, &twice, &[1, 2], &[1]).ok);
}

#[test]
fn history_counts_lost_doubled_and_ambiguous_calls() {
    let fine = check_history(&[1, 2, 3], &[1, 2], &[3, 4], 5452);
    assert!(fine.ok, "{}", fine.detail);
    let c = fine.counts.expect("counts");
    assert_eq!((c.acknowledged, c.lost, c.doubled), (2, 0, 0));
    assert_eq!((c.ambiguous, c.ambiguous_landed, c.unknown), (2, 1, 0));
    assert!(fine.detail.contains("port 5452"), "{}", fine.detail);
    // Lost: acknowledged, not there; doubled: there twice; unknown: nobody's.
    let bad = check_history(&[2, 2, 9], &[1, 2], &[], 0);
    assert!(!bad.ok);
    let c = bad.counts.expect("counts");
    assert_eq!((c.lost, c.doubled, c.unknown), (1, 1, 1));
    assert!(
        bad.detail.contains("1 acknowledged commit(s) lost"),
        "{}",
        bad.detail
    );
    // An ambiguous call that landed twice is doubled.
    assert!(!check_history(&[3, 3], &[], &[3], 0).ok);
}

#[test]
fn hot_rows_counts_per_row() {
    let counters: HashMap<i64, i64> = [(1, 2), (2, 1)].into();
    assert!(check_hot_rows(2, &counters, &[1, 2, 1], &[]).ok);
    assert!(!check_hot_rows(2, &counters, &[1, 2], &[]).ok);
    // Right sum, wrong rows.
    assert!(!check_hot_rows(2, &counters, &[2, 2, 1], &[]).ok);
}
