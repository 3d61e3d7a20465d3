//! `src/server.rs`.

use txretry_lab::server::*;

fn facts(max: u64, in_use: u64) -> Facts {
    Facts {
        max_connections: Some(max),
        connections_in_use: Some(in_use),
        ..Facts::default()
    }
}

#[test]
fn isolation_names_match_the_flag() {
    assert_eq!(isolation_name("read committed"), "read-committed");
    assert_eq!(isolation_name("REPEATABLE-READ"), "repeatable-read");
    assert_eq!(isolation_name("SERIALIZABLE"), "serializable");
}

#[test]
fn more_workers_than_the_server_takes() {
    let why = too_many(&facts(20, 3), 65, "--workers 64").expect("refused");
    assert!(why.contains("--workers 64 needs 65 connections"), "{why}");
    assert!(why.contains("max_connections"), "{why}");
    assert_eq!(too_many(&facts(20, 3), 20, "--workers 20"), None);
    assert_eq!(too_many(&Facts::default(), 1000, "--workers 1000"), None);
}

#[test]
fn crowded_when_others_hold_connections() {
    // 20 allowed, 6 in use of which 1 is ours: 5 others, so 16 do not fit.
    assert!(crowded(&facts(20, 6), 16, 1).is_some());
    assert_eq!(crowded(&facts(20, 6), 15, 1), None);
    assert_eq!(crowded(&Facts::default(), 500, 1), None);
}
