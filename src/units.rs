//! Durations and sizes as settings write them (`1m30s`, `500ms`, `2h`, `16MiB`), for flags
//! and the file alike, parsed by maintained crates (`humantime`, `bytesize`) so that what
//! people write elsewhere (Kubernetes, Go's `time.ParseDuration`) reads the same here. A
//! leaf: it imports nothing from the crate.

use std::time::Duration;

use serde::Deserialize;

/// A duration setting of the file (`"30s"`), for `#[serde(deserialize_with)]`.
pub(crate) fn duration_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// `0` disables a deadline.
pub(crate) fn optional(duration: Duration) -> Option<Duration> {
    (!duration.is_zero()).then_some(duration)
}

/// Parses a duration: `humantime`'s spans, one or several (`500ms`, `30s`, `1m30s`, `2h`,
/// `1h 30m`, `1.5s`), or a bare number of seconds (`0` turns off the deadlines that say so).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    // The bare numbers settings took before units were required; humantime wants a unit.
    let duration = if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let seconds: f64 = text
            .parse()
            .map_err(|_| format!("{text:?} is not a number of seconds"))?;
        Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))?
    } else {
        humantime::parse_duration(text)
            .map_err(|e| format!("{text:?} is not a duration such as 500ms, 30s or 1m30s: {e}"))?
    };
    if duration > MAX_DURATION {
        return Err(format!(
            "{text:?} is longer than any setting takes (366 days at most)"
        ));
    }
    if !duration.is_zero() && duration < MIN_DURATION {
        return Err(format!(
            "{text:?} is shorter than any setting takes (1ms at least, or 0 where the setting \
             turns off with it)"
        ));
    }
    Ok(duration)
}

/// The shortest duration other than 0 a setting takes: the runtime's timers tick in
/// milliseconds, so a `1ns` deadline is a typo that would fail every call at once.
const MIN_DURATION: Duration = Duration::from_millis(1);

/// The longest duration a setting takes: deadlines and timers are instants this far ahead,
/// and a typo such as `18446744073709551615s` must be refused at load, not overflow an
/// instant on every call.
const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Parses a byte size by `bytesize`: a number of bytes (`1048576`), binary units (`512KiB`,
/// `16MiB`, `1GiB`, or as Kubernetes writes them, `16Mi`), decimal ones (`4KB`, `4MB`).
pub(crate) fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let size: bytesize::ByteSize = text
        .parse()
        .map_err(|e| format!("{text:?} is not a size such as 4096, 512KiB or 16MiB: {e}"))?;
    // bytesize saturates at the largest value, so that value means the text was past it.
    // `0` turns a limit off where its setting says so; the others refuse it at load.
    match size.as_u64() {
        u64::MAX => None,
        bytes => usize::try_from(bytes).ok(),
    }
    .ok_or_else(|| format!("{text:?} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("1000"), Ok(1000));
        // `0` parses: it turns a load limit off; settings that cannot be 0 refuse it at load.
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("4XB").is_err());
        assert!(parse_size("99999999999GiB").is_err());
    }

    /// What people write: compound and long units, and the edges: zero, a bare number,
    /// fractions, the largest value, one past it, negative and empty text.
    #[test]
    fn durations_past_a_year_and_a_day_are_refused() {
        assert_eq!(parse_duration("366d"), Ok(MAX_DURATION));
        assert_eq!(parse_duration("1y"), Ok(Duration::from_secs(31_557_600)));
        for text in [
            "367d",
            "2y",
            "31622401",
            "18446744073709551615s",
            "300000000000y",
        ] {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains("366 days at most"), "{text}: {err}");
        }
    }

    #[test]
    fn durations_as_people_write_them() {
        let ok = |text: &str, ms: u64| {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_millis(ms)),
                "{text}"
            )
        };
        ok("1m30s", 90_000);
        ok("500ms", 500);
        ok("2h", 7_200_000);
        ok("1h 30m", 5_400_000);
        ok("1h30m15s", 5_415_000);
        ok("1.5s", 1_500);
        ok(" 30s ", 30_000);
        ok("0", 0);
        ok("0s", 0);
        ok("0.25", 250);
        ok("1d", 86_400_000);
        // The shortest, and just below it.
        ok("1ms", 1);
        ok("0.001", 1);
        for short in ["1ns", "999us", "999999ns", "0.0009"] {
            let err = parse_duration(short).unwrap_err();
            assert!(err.contains("1ms at least"), "{short}: {err}");
        }
        for bad in [
            "",
            "s",
            "10x",
            "-1s",
            "1.2.3",
            "30 seconds ago",
            "99999999999999999999s",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains(&format!("{:?}", bad.trim())), "{bad}: {err}");
        }
    }

    #[test]
    fn sizes_as_people_write_them() {
        let ok = |text: &str, bytes: usize| assert_eq!(parse_size(text), Ok(bytes), "{text}");
        ok("16MiB", 16 << 20);
        ok("16 MiB", 16 << 20);
        ok("16mib", 16 << 20);
        ok("16Mi", 16 << 20);
        ok("512KiB", 512 << 10);
        ok("1GiB", 1 << 30);
        ok("1.5MiB", 3 << 19);
        ok("4KB", 4_000);
        ok("4MB", 4_000_000);
        ok("1", 1);
        ok("0", 0);
        ok("0B", 0);
        // The largest representable size, and one past it.
        ok("18446744073709551614", usize::MAX - 1);
        for bad in [
            "",
            "MiB",
            "-1",
            "4XB",
            "18446744073709551615",
            "16EiB",
            "1e3",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}: {:?}", parse_size(bad));
        }
    }
}
