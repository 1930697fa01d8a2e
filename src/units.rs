//! Durations and sizes as settings write them (`30s`, `250ms`, `4MiB`), for flags and the
//! file alike. A leaf: it imports nothing from the crate.

use std::time::Duration;

use serde::Deserialize;

/// A duration setting of the file (`"30s"`), for `#[serde(deserialize_with)]`.
pub fn duration_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// A size setting of the file (`"4MiB"` or a number of bytes).
pub fn size_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(usize),
        Text(String),
    }
    match Size::deserialize(d)? {
        Size::Bytes(n) => Ok(Some(n)),
        Size::Text(text) => parse_size(&text)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// `0` disables a deadline.
pub fn optional(duration: Duration) -> Option<Duration> {
    (!duration.is_zero()).then_some(duration)
}

/// Parses `250ms`, `30s`, `5m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 30s or 500ms"))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} (use ms, s, m or h)"
            ))
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// Parses a byte size: `1048576`, `512KiB`, `4MiB`, `1GiB` (also `KB`/`MB`/`GB`).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: usize = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 4MiB"))?;
    let factor = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other => return Err(format!("unknown size unit {other:?} (use KiB, MiB or GiB)")),
    };
    // `0` turns a limit off where its setting says so; the others refuse it at load.
    value
        .checked_mul(factor)
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
}
