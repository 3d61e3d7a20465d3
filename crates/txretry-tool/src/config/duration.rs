//! Durations as a config file writes them: `"150ms"`, `"2s"`, `"1m 30s"`.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};

/// `Option<Duration>` from a string such as `"150ms"`.
pub(super) fn optional<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = Duration;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(r#"a duration such as "150ms" or "2s""#)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            parse_duration(v)
                .map_err(|why| E::custom(format_args!("invalid duration {v:?}: {why}")))
        }
    }
    deserializer.deserialize_str(V).map(Some)
}

/// Parses `"150ms"`, `"2s"`, `"1.5s"`, `"1m 30s"`: one or more numbers, each with a unit
/// (`ns`, `us`/`µs`, `ms`, `s`, `m`/`min`, `h`). Exact (integer nanoseconds); never panics.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err("empty".to_owned());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        if number.is_empty() {
            return Err("expected a number".to_owned());
        }
        rest = rest[number_end..].trim_start();
        let unit_end = rest
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = rest[unit_end..].trim_start();
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" | "sec" | "secs" => 1_000_000_000,
            "m" | "min" | "mins" => 60_000_000_000,
            "h" | "hr" | "hrs" => 3_600_000_000_000,
            "" => return Err(format!("{number} needs a unit (ns, us, ms, s, m, h)")),
            other => return Err(format!("unknown unit {other:?} (use ns, us, ms, s, m, h)")),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(format!("{number:?} is not a number"));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| "number too large".to_owned())?
        };
        let mut nanos = whole
            .checked_mul(unit_nanos)
            .ok_or_else(|| "too long".to_owned())?;
        // Only the digits that can matter at nanosecond precision.
        let mut scale = unit_nanos;
        for digit in fraction.bytes() {
            scale /= 10;
            nanos += u128::from(digit - b'0') * scale;
        }
        total = total
            .checked_add(nanos)
            .ok_or_else(|| "too long".to_owned())?;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| "too long".to_owned())?;
    let subsec = u32::try_from(total % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, subsec))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_exactly() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("150ms"), Ok(ms(150)));
        assert_eq!(parse_duration("2s"), Ok(ms(2000)));
        assert_eq!(parse_duration(" 1.5s "), Ok(ms(1500)));
        assert_eq!(parse_duration("0.15s"), Ok(ms(150)));
        assert_eq!(parse_duration("1m 30s"), Ok(ms(90_000)));
        assert_eq!(parse_duration("1m30s"), Ok(ms(90_000)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration(".5s"), Ok(ms(500)));
    }

    #[test]
    fn bad_durations_are_refused_without_panicking() {
        for bad in [
            "",
            "150",
            "ms",
            "1.2.3s",
            "5 parsecs",
            "-1s",
            "1e3ms",
            ".s",
            "99999999999999999999999h",
            "1s 2",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
