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
