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

/// Parses `"150ms"`, `"2s"`, `"1.5s"`, `"1m 30s"` in humantime's grammar (the one
/// txretry-mcp's files and the lab's flags read): one or more numbers, each with a unit
/// (`ns`, `us`/`µs`, `ms`, `s`, `m`/`min`, `h`, and humantime's longer names). The two
/// mistakes people make are said in our words; the rest in humantime's.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| match e {
        humantime::DurationError::UnknownUnit { unit, value, .. } if unit.is_empty() => {
            format!("{value} needs a unit (ns, us, ms, s, m, h)")
        }
        humantime::DurationError::UnknownUnit { unit, .. } => {
            format!("unknown unit {unit:?} (use ns, us, ms, s, m, h)")
        }
        other => other.to_string(),
    })
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
            // humantime wants a digit before the point.
            ".5s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
