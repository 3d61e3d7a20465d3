//! `--duration` values in humantime's grammar: a number and a unit, such as `500ms`, `5s`,
//! `1.5s`, `2m`, `1h` or `1m 30s`; a bare number is seconds (`5` is `5s`), as `timeout`
//! and `sleep` take it.

use std::time::Duration;

/// The longest run one preset may take.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// Parses a positive duration with a unit (`ms`, `s`, `m`, `h`, … as humantime reads them;
/// none: seconds), from 1ms to 24 hours.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(format!(
            "must be positive, e.g. 500ms, 5s, 2m; got {text:?}"
        ));
    }
    let usage =
        || format!("expected a number and a unit (ms, s, m, h), e.g. 500ms, 5s, 2m; got {text:?}");
    let duration = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        // A bare number: seconds.
        humantime::parse_duration(&format!("{text}s"))
    } else {
        humantime::parse_duration(text)
    };
    let duration = match duration {
        Ok(d) => d,
        Err(humantime::DurationError::NumberOverflow) => {
            return Err("must be at most 24h".to_owned());
        }
        Err(_) => return Err(usage()),
    };
    if duration > MAX_DURATION {
        return Err("must be at most 24h".to_owned());
    }
    if duration < Duration::from_millis(1) {
        return Err("must be at least 1ms".to_owned());
    }
    Ok(duration)
}

/// Formats a duration the way `--duration` takes it (humantime's form), e.g. `5s`,
/// `500ms`, `1s 500ms`.
pub fn format_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "", "5x", "-1", "-1s", "5 x", "s", "-3s", "0s", "0.0001ms", ".5s", "5.s", "1..2s",
            "25h", "5 s s", "1e9h", "NaNs",
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
}
