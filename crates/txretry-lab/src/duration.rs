//! `--duration` values: a number and a unit, such as `500ms`, `5s`, `1.5s`, `2m` or `1h`;
//! a bare number is seconds (`5` is `5s`), as `timeout` and `sleep` take it.

use std::time::Duration;

/// The longest run one preset may take.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// Parses a positive duration with a unit (`ms`, `s`, `m`, `h`; none: seconds), at most
/// 24 hours.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(format!(
            "must be positive, e.g. 500ms, 5s, 2m; got {text:?}"
        ));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let usage =
        || format!("expected a number and a unit (ms, s, m, h), e.g. 500ms, 5s, 2m; got {text:?}");
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(usage());
    }
    let value: f64 = number.parse().map_err(|_| usage())?;
    let seconds_per_unit = match unit.trim() {
        "ms" => 0.001,
        "s" | "" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(usage()),
    };
    let seconds = value * seconds_per_unit;
    if !seconds.is_finite() || seconds > MAX_DURATION.as_secs_f64() {
        return Err("must be at most 24h".to_owned());
    }
    let duration = Duration::try_from_secs_f64(seconds).map_err(|_| usage())?;
    if duration < Duration::from_millis(1) {
        return Err("must be at least 1ms".to_owned());
    }
    Ok(duration)
}

/// Formats a duration the way `--duration` takes it, e.g. `5s`, `500ms`, `1.5s`.
pub fn format_duration(d: Duration) -> String {
    if d.as_secs() > 0 && d.subsec_nanos() == 0 {
        if d.as_secs().is_multiple_of(3600) {
            format!("{}h", d.as_secs() / 3600)
        } else if d.as_secs().is_multiple_of(60) {
            format!("{}m", d.as_secs() / 60)
        } else {
            format!("{}s", d.as_secs())
        }
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs_f64())
    }
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
        for text in ["500ms", "5s", "2m", "1h", "1.5s", "90s"] {
            let d = parse_duration(text).expect("valid");
            assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{text}");
        }
        assert_eq!(format_duration(Duration::from_secs(5)), "5s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }
}
