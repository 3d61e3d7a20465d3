//! Opt-in code profiles for distributed engines that speak the Postgres or MySQL protocol.

use crate::{Code, TransientKind, Verdict};

/// Extra codes for engines our users grow into. Add one with
/// [`Classifier::with_profile`](crate::Classifier::with_profile); codes are as their
/// vendors document them.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Profile {
    /// CockroachDB: 40001 ("restart transaction") is a serialization failure; 40003
    /// (statement completion unknown) is ambiguous. Both agree with the default table;
    /// the profile states them for classifiers built from [`Classifier::empty`](crate::Classifier::empty).
    CockroachDb,
    /// YugabyteDB: 40001 serialization failure, 40P01 deadlock, 40003 ambiguous.
    YugabyteDb,
    /// TiDB: 8002 (SELECT FOR UPDATE write conflict), 8022 (commit failed, retryable),
    /// 8028 (information schema changed) and 9007 (write conflict) are serialization failures.
    TiDb,
    /// Galera / Percona XtraDB Cluster: certification failure reported as 1213 (also at
    /// COMMIT) and as 149 with an empty SQLSTATE; both are deadlocks.
    Galera,
    /// MariaDB with `innodb_snapshot_isolation=ON`: 1020 ("record has changed since last
    /// read") is a serialization failure.
    MariaDbSnapshotIsolation,
}

impl Profile {
    /// The verdict this profile gives `code`, if the profile covers it.
    pub fn verdict(self, code: Code) -> Option<Verdict> {
        use TransientKind::*;
        let transient = |kind| Some(Verdict::Transient(kind));
        match (self, code) {
            (Profile::CockroachDb | Profile::YugabyteDb, Code::SqlState(s)) => match s.as_str() {
                "40001" => transient(SerializationFailure),
                "40P01" if self == Profile::YugabyteDb => transient(Deadlock),
                "40003" => Some(Verdict::Ambiguous),
                _ => None,
            },
            (Profile::TiDb, Code::MySql(8002 | 8022 | 8028 | 9007)) => {
                transient(SerializationFailure)
            }
            (Profile::Galera, Code::MySql(1213 | 149)) => transient(Deadlock),
            (Profile::MariaDbSnapshotIsolation, Code::MySql(1020)) => {
                transient(SerializationFailure)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqlState;
    use TransientKind::*;

    fn pg(code: &str) -> Code {
        Code::SqlState(SqlState::new(code).unwrap())
    }

    #[test]
    fn cockroach_40001_restart_transaction_is_serialization_failure() {
        assert_eq!(
            Profile::CockroachDb.verdict(pg("40001")),
            Some(Verdict::Transient(SerializationFailure))
        );
    }
    #[test]
    fn cockroach_40003_is_ambiguous() {
        assert_eq!(
            Profile::CockroachDb.verdict(pg("40003")),
            Some(Verdict::Ambiguous)
        );
    }
    #[test]
    fn yugabyte_40001_is_serialization_failure() {
        assert_eq!(
            Profile::YugabyteDb.verdict(pg("40001")),
            Some(Verdict::Transient(SerializationFailure))
        );
    }
    #[test]
    fn yugabyte_40p01_is_deadlock() {
        assert_eq!(
            Profile::YugabyteDb.verdict(pg("40P01")),
            Some(Verdict::Transient(Deadlock))
        );
    }
    #[test]
    fn yugabyte_40003_is_ambiguous() {
        assert_eq!(
            Profile::YugabyteDb.verdict(pg("40003")),
            Some(Verdict::Ambiguous)
        );
    }
    #[test]
    fn tidb_8002_is_serialization_failure() {
        assert_eq!(
            Profile::TiDb.verdict(Code::MySql(8002)),
            Some(Verdict::Transient(SerializationFailure))
        );
    }
    #[test]
    fn tidb_8022_is_serialization_failure() {
        assert_eq!(
            Profile::TiDb.verdict(Code::MySql(8022)),
            Some(Verdict::Transient(SerializationFailure))
        );
    }
    #[test]
    fn tidb_8028_is_serialization_failure() {
        assert_eq!(
            Profile::TiDb.verdict(Code::MySql(8028)),
            Some(Verdict::Transient(SerializationFailure))
        );
    }
    #[test]
    fn tidb_9007_is_serialization_failure() {
        assert_eq!(
            Profile::TiDb.verdict(Code::MySql(9007)),
            Some(Verdict::Transient(SerializationFailure))
        );
    }
    #[test]
    fn galera_1213_is_deadlock() {
        assert_eq!(
            Profile::Galera.verdict(Code::MySql(1213)),
            Some(Verdict::Transient(Deadlock))
        );
    }
    #[test]
    fn galera_149_is_deadlock() {
        assert_eq!(
            Profile::Galera.verdict(Code::MySql(149)),
            Some(Verdict::Transient(Deadlock))
        );
    }
    #[test]
    fn mariadb_snapshot_isolation_1020_is_serialization_failure() {
        assert_eq!(
            Profile::MariaDbSnapshotIsolation.verdict(Code::MySql(1020)),
            Some(Verdict::Transient(SerializationFailure))
        );
    }
    #[test]
    fn profiles_do_not_cover_other_engines_codes() {
        assert_eq!(Profile::TiDb.verdict(pg("40001")), None);
        assert_eq!(Profile::CockroachDb.verdict(Code::MySql(9007)), None);
        assert_eq!(Profile::Galera.verdict(Code::MySql(1020)), None);
    }
}
