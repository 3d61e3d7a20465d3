//! `src/duration.rs`.

use std::time::Duration;
use txretry_lab::duration::*;

#[test]
fn units() {
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_duration(" 3s "), Ok(Duration::from_secs(3)));
    assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
    assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("24h"), Ok(MAX_DURATION));
}

#[test]
fn refusals() {
    for bad in [
        "", "5x", "-1", "-1s", "5 x", "s", "-3s", "0s", "0.0001ms", ".5s", "5.s", "1..2s", "25h",
        "5 s s", "1e9h", "NaNs",
    ] {
        assert!(parse_duration(bad).is_err(), "{bad:?} must be refused");
    }
}

#[test]
fn format_round_trips() {
    for text in ["500ms", "5s", "2m", "1h", "1.5s", "90s", "1m 30s", "24h"] {
        let d = parse_duration(text).expect("valid");
        assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{text}");
    }
    assert_eq!(format_duration(Duration::from_secs(5)), "5s");
    assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1s 500ms");
}
