//! The default code table: which codes `RetryPolicy::default()` recognises, per engine.
//!
//! Kept as plain `match`es so the table reads like the one in the README and compiles to
//! a few comparisons.

use crate::{Code, TransientKind, Verdict};

use TransientKind::*;

/// The default verdict for a typed code, or `None` when the code is not in the table
/// (which makes the failure permanent).
pub fn default_verdict(code: Code) -> Option<Verdict> {
    match code {
        Code::SqlState(state) => sqlstate(state.as_str()),
        Code::MySql(errno) => mysql(errno),
        Code::Sqlite(code) => sqlite(code),
        Code::Driver(_) => Some(Verdict::Transient(Connection)),
        Code::Message(_) => None,
    }
}

fn sqlstate(state: &str) -> Option<Verdict> {
    Some(match state {
        "40001" => Verdict::Transient(SerializationFailure),
        "40P01" => Verdict::Transient(Deadlock),
        "55P03" => Verdict::Transient(LockTimeout),
        // transaction_integrity_constraint / statement_completion_unknown and
        // transaction_resolution_unknown: the commit may have happened.
        "40003" | "08007" => Verdict::Ambiguous,
        // admin_shutdown (fast shutdown, switchover, terminated backend), crash_shutdown,
        // cannot_connect_now (starting, stopping, in recovery); read_only_sql_transaction
        // (a write on a standby or a demoted primary). The runners make a 25006 in a
        // transaction that was asked to be read-only permanent.
        "57P01" | "57P02" | "57P03" | "25006" => Verdict::Transient(Failover),
        // idle_session_timeout; too_many_connections. (57P04 database_dropped is
        // permanent: the database is gone, on every node.)
        "57P05" | "53300" => Verdict::Transient(Connection),
        s if s.starts_with("08") => Verdict::Transient(Connection),
        _ => return None,
    })
}

fn mysql(errno: u16) -> Option<Verdict> {
    Some(match errno {
        1213 => Verdict::Transient(Deadlock),
        1205 => Verdict::Transient(LockTimeout),
        // CR_SERVER_GONE_ERROR, CR_SERVER_LOST, ER_CON_COUNT_ERROR.
        2006 | 2013 | 1040 => Verdict::Transient(Connection),
        _ => return None,
    })
}

fn sqlite(code: i32) -> Option<Verdict> {
    // The primary result code is the low byte of the extended one:
    // 261 BUSY_RECOVERY, 517 BUSY_SNAPSHOT, 773 BUSY_TIMEOUT all have primary 5.
    match code & 0xff {
        5 => Some(Verdict::Transient(Busy)),
        6 => Some(Verdict::Transient(Locked)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqlState;

    fn pg(code: &str) -> Option<Verdict> {
        default_verdict(Code::SqlState(SqlState::new(code).unwrap()))
    }
    fn my(errno: u16) -> Option<Verdict> {
        default_verdict(Code::MySql(errno))
    }
    fn lite(code: i32) -> Option<Verdict> {
        default_verdict(Code::Sqlite(code))
    }
    fn transient(kind: TransientKind) -> Option<Verdict> {
        Some(Verdict::Transient(kind))
    }

    #[test]
    fn postgres_40001_is_serialization_failure() {
        assert_eq!(pg("40001"), transient(SerializationFailure));
    }
    #[test]
    fn postgres_40p01_is_deadlock() {
        assert_eq!(pg("40P01"), transient(Deadlock));
        assert_eq!(pg("40p01"), transient(Deadlock));
    }
    #[test]
    fn postgres_55p03_is_lock_timeout() {
        assert_eq!(pg("55P03"), transient(LockTimeout));
    }
    #[test]
    fn postgres_40003_is_ambiguous() {
        assert_eq!(pg("40003"), Some(Verdict::Ambiguous));
    }
    #[test]
    fn postgres_08007_is_ambiguous_not_connection() {
        assert_eq!(pg("08007"), Some(Verdict::Ambiguous));
    }
    #[test]
    fn postgres_08000_class_is_connection() {
        for code in ["08000", "08001", "08003", "08004", "08006", "08P01"] {
            assert_eq!(pg(code), transient(Connection), "{code}");
        }
    }
    #[test]
    fn postgres_57p01_admin_shutdown_is_failover() {
        assert_eq!(pg("57P01"), transient(Failover));
    }
    #[test]
    fn postgres_57p02_crash_shutdown_is_failover() {
        assert_eq!(pg("57P02"), transient(Failover));
    }
    #[test]
    fn postgres_57p03_cannot_connect_now_is_failover() {
        assert_eq!(pg("57P03"), transient(Failover));
    }
    #[test]
    fn postgres_25006_read_only_transaction_is_failover() {
        assert_eq!(pg("25006"), transient(Failover));
    }
    #[test]
    fn postgres_57p04_database_dropped_is_not_in_the_table() {
        assert_eq!(pg("57P04"), None);
    }
    #[test]
    fn postgres_57p05_idle_session_timeout_is_connection() {
        assert_eq!(pg("57P05"), transient(Connection));
    }
    #[test]
    fn postgres_53300_too_many_connections_is_connection() {
        assert_eq!(pg("53300"), transient(Connection));
    }
    #[test]
    fn postgres_other_codes_are_not_in_the_table() {
        // unique_violation, raise_exception, query_canceled, lock not in class 40.
        for code in ["23505", "P0001", "57014", "40002", "55000"] {
            assert_eq!(pg(code), None, "{code}");
        }
    }
    #[test]
    fn mysql_1213_is_deadlock() {
        assert_eq!(my(1213), transient(Deadlock));
    }
    #[test]
    fn mysql_1205_is_lock_timeout() {
        assert_eq!(my(1205), transient(LockTimeout));
    }
    #[test]
    fn mysql_2006_server_gone_is_connection() {
        assert_eq!(my(2006), transient(Connection));
    }
    #[test]
    fn mysql_2013_lost_connection_is_connection() {
        assert_eq!(my(2013), transient(Connection));
    }
    #[test]
    fn mysql_1040_too_many_connections_is_connection() {
        assert_eq!(my(1040), transient(Connection));
    }
    #[test]
    fn mysql_other_codes_are_not_in_the_table() {
        // duplicate entry, unknown column, and the profile-only codes.
        for errno in [1062, 1054, 1020, 149, 8002, 9007] {
            assert_eq!(my(errno), None, "{errno}");
        }
    }
    #[test]
    fn sqlite_5_busy_is_busy() {
        assert_eq!(lite(5), transient(Busy));
    }
    #[test]
    fn sqlite_261_busy_recovery_is_busy() {
        assert_eq!(lite(261), transient(Busy));
    }
    #[test]
    fn sqlite_517_busy_snapshot_is_busy() {
        assert_eq!(lite(517), transient(Busy));
    }
    #[test]
    fn sqlite_773_busy_timeout_is_busy() {
        assert_eq!(lite(773), transient(Busy));
    }
    #[test]
    fn sqlite_6_locked_is_locked() {
        assert_eq!(lite(6), transient(Locked));
    }
    #[test]
    fn sqlite_262_locked_sharedcache_is_locked() {
        assert_eq!(lite(262), transient(Locked));
    }
    #[test]
    fn sqlite_518_locked_vtab_is_locked() {
        assert_eq!(lite(518), transient(Locked));
    }
    #[test]
    fn sqlite_other_codes_are_not_in_the_table() {
        // SQLITE_CONSTRAINT_UNIQUE (2067), SQLITE_ERROR, SQLITE_READONLY.
        for code in [2067, 1, 8, 19] {
            assert_eq!(lite(code), None, "{code}");
        }
    }
    #[test]
    fn driver_detected_failure_is_connection() {
        assert_eq!(default_verdict(Code::Driver("io")), transient(Connection));
    }
}
