//! `src/target.rs`.

use txretry_lab::target::*;

#[test]
fn engines() {
    assert_eq!(Target::parse("sqlite"), Ok(Target::EmbeddedSqlite));
    assert_eq!(
        Target::parse("sqlite://lab.db").map(|t| t.engine()),
        Ok("sqlite")
    );
    assert_eq!(
        Target::parse("postgres://u@h/db").map(|t| t.engine()),
        Ok("postgres")
    );
    assert_eq!(
        Target::parse("postgresql://u@h/db").map(|t| t.engine()),
        Ok("postgres")
    );
    assert_eq!(
        Target::parse("mysql://root@h/test").map(|t| t.engine()),
        Ok("mysql")
    );
    assert_eq!(
        Target::parse("mariadb://root@h/test").map(|t| t.engine()),
        Ok("mysql")
    );
    // Servers of one engine only.
    assert_eq!(
        Target::parse("postgres://u:pw@a/db,mysql://u:pw@b/db"),
        Err(TargetError::MixedEngines("postgres", "mysql"))
    );
    assert!(Target::parse("mysql://a/test,mysql://b/test").is_ok());
    // sqlx reads a SQLite scheme in another case as a file name.
    assert_eq!(
        Target::parse("SQLITE:///tmp/lab.db"),
        Ok(Target::Sqlite("sqlite:///tmp/lab.db".into()))
    );
}

#[test]
fn refusals_do_not_echo_the_value() {
    for bad in ["oracle://scott:tiger@h/db", "tiger", "", "sqlite://"] {
        let err = Target::parse(bad).expect_err(bad).to_string();
        assert!(!err.contains("tiger"), "{err}");
    }
    assert!(
        Target::parse("oracle://scott:tiger@h/db")
            .unwrap_err()
            .to_string()
            .contains("oracle://")
    );
}

#[test]
fn a_multi_host_url_is_one_postgres_target() {
    for url in [
        "postgres://u:s3cret@127.0.0.1:5441,127.0.0.1:5442,127.0.0.1:5443/test?target_session_attrs=read-write",
        "postgresql://h1,h2/test",
        "postgres:///test?host=h1,h2",
    ] {
        let target = Target::parse(url).expect(url);
        assert_eq!(target.engine(), "postgres");
        assert!(!target.to_string().contains("s3cret"), "{target}");
    }
}

#[test]
fn a_cluster_is_several_urls() {
    assert_eq!(
        servers("mysql://a/test,mysql://b:3307/test"),
        ["mysql://a/test", "mysql://b:3307/test"]
    );
    assert_eq!(servers("mysql://a/test?x=1,2"), ["mysql://a/test?x=1,2"]);
    let t = Target::parse("mysql://u:pw1@a/test,mysql://u:pw2@b/test").expect("valid");
    assert_eq!(t.to_string(), "mysql://u:***@a/test,mysql://u:***@b/test");
    assert!(!t.scrub("pw1 and pw2").contains("pw"));
}

#[test]
fn display_and_debug_hide_the_password() {
    let t = Target::parse("postgres://alice:s3cret@db/app").expect("valid");
    assert_eq!(t.to_string(), "postgres://alice:***@db/app");
    assert!(!format!("{t:?}").contains("s3cret"));
    assert_eq!(Target::EmbeddedSqlite.to_string(), "sqlite (temp file)");
    assert!(
        !t.scrub("connect to postgres://alice:s3cret@db failed: s3cret")
            .contains("s3cret")
    );
}
