//! Bad input: exit code 2, a clear message on stderr, nothing on stdout, no password.

use crate::{lab, texts};

fn assert_usage_error(args: &[&str], expected: &str) {
    let output = lab(args);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: stderr:\n{stderr}");
    assert!(
        stdout.is_empty(),
        "{args:?}: stdout must stay empty:\n{stdout}"
    );
    assert!(
        stderr.contains(expected),
        "{args:?}: {expected:?} missing in:\n{stderr}"
    );
}

#[test]
fn negative_workers() {
    assert_usage_error(&["--workers", "-3"], "invalid value '-3' for '--workers");
}

#[test]
fn zero_workers() {
    assert_usage_error(&["--workers", "0"], "from 1 to");
}

#[test]
fn duration_without_a_known_unit() {
    assert_usage_error(&["--duration", "5x"], "--duration");
    assert_usage_error(&["--duration", "5x"], "unit");
}

#[test]
fn negative_duration() {
    assert_usage_error(&["--duration", "-1s"], "must be positive");
}

#[test]
fn unknown_policy_lists_the_presets() {
    assert_usage_error(&["--policy", "bogus"], "exp-jitter");
}

#[test]
fn processes_are_the_bench_s() {
    // --processes moved to txretry-bench run: the lab refuses it as an unknown flag.
    assert_usage_error(&["--processes", "2"], "--processes");
}

#[test]
fn faults_are_the_bench_s() {
    // --fault moved to txretry-bench run: the lab refuses it as an unknown flag.
    assert_usage_error(&["--fault", "switchover"], "--fault");
}

#[test]
fn transfer_needs_two_accounts() {
    assert_usage_error(&["--rows", "1"], "--rows 2 or more");
}

#[test]
fn unknown_database() {
    assert_usage_error(
        &["--db", "oracle://scott:tiger@h/db"],
        "unsupported database",
    );
    let (_, stderr) = texts(&lab(&["--db", "oracle://scott:tiger@h/db"]));
    assert!(!stderr.contains("tiger"), "{stderr}");
    // The message's own URL shapes pass the password scrub as written, not percent-encoded.
    assert!(stderr.contains("postgres://… or mysql://…"), "{stderr}");
}

#[test]
fn a_url_in_the_wrong_flag_is_echoed_without_its_password() {
    let output = lab(&["--workers", "postgres://alice:Hunter2-lab@h/db"]);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(!stderr.contains("Hunter2-lab"), "{stderr}");
    assert!(stderr.contains("alice:***@"), "{stderr}");
}

#[test]
fn unreachable_server_exits_2_without_the_password() {
    // Port 1: nothing listens there, so this needs no server.
    let secret = "S3cret-lab%40pw";
    let url = format!("postgres://alice:{secret}@127.0.0.1:1/test");
    for extra in [&[][..], &["--json"]] {
        let mut args = vec!["--db", url.as_str(), "--duration", "1s"];
        args.extend_from_slice(extra);
        let output = lab(&args);
        let (stdout, stderr) = texts(&output);
        assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(stderr.contains("could not connect"), "{stderr}");
        for shown in [&stdout, &stderr] {
            assert!(
                !shown.contains("S3cret") && !shown.contains("lab@pw"),
                "password leaked:\n{shown}"
            );
        }
        assert!(stderr.contains("alice:***@127.0.0.1:1"), "{stderr}");
    }
}

/// Several servers are for several processes (`txretry-bench run --processes`): the lab
/// refuses them (exit 2) before anything runs.
#[test]
fn several_servers_need_several_processes() {
    let output = lab(&[
        "--db",
        "mysql://root:s3cret@127.0.0.1:1/test,mysql://root:s3cret@127.0.0.1:2/test",
        "--duration",
        "1s",
    ]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("txretry-bench run --processes"), "{stderr}");
    assert!(
        !stdout.contains("s3cret") && !stderr.contains("s3cret"),
        "{stderr}"
    );
}

/// A multi-host Postgres URL none of whose hosts takes a connection fails as one host
/// does: at once, with each host's reason, not after searching for a primary for the
/// acquire timeout and then blaming the configuration.
#[test]
fn a_cluster_with_no_host_up_is_named_host_by_host() {
    let url = "postgres://alice:S3cret-hosts@127.0.0.1:1,127.0.0.1:2/test";
    let output = lab(&["--db", url, "--duration", "1s"]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("no host took a connection"), "{stderr}");
    for host in ["127.0.0.1:1 ", "127.0.0.1:2 "] {
        assert!(stderr.contains(host), "{host} missing in:\n{stderr}");
    }
    assert!(!stderr.contains("configuration"), "{stderr}");
    assert!(!stderr.contains("S3cret"), "{stderr}");
}
