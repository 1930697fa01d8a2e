//! Strings a peer chose (request paths, JSON-RPC ids, request ids, tenants, task and
//! message ids, error messages an agent wrote) on their way into log lines, span
//! attributes and the error messages the gateway writes itself. Each is bounded and
//! escaped here, so one request cannot grow a log line without bound, forge a field
//! (`id=1 code=0` in a text log) or carry terminal control sequences into it.
//!
//! - `clip`: at most `FIELD_BYTES` bytes, then `…(+N bytes)`; every character outside
//!   printable ASCII, the space and `\` included, is written `\u{…}`.
//! - `clip_message`: the same for a message, in quotes (where the space stays and the
//!   quote is escaped), bounded at `MESSAGE_BYTES`.
//! - `echoed`: how much of an id the gateway's own error messages repeat.
//!
//! A configured URL is not a peer's, but it may carry credentials: `without_credentials`
//! is how errors and logs show one (`scheme://***@host`).
//!
//! A value with nothing to escape or clip (the usual case) is written as it is, in one
//! piece, and `clipped` borrows it without a copy.

use std::borrow::Cow;
use std::fmt::{self, Display, Write as _};

/// The bytes of a client string kept in a log field or span attribute.
pub(crate) const FIELD_BYTES: usize = 128;
/// The bytes of a peer's error message kept in a log line or span status.
pub(crate) const MESSAGE_BYTES: usize = 512;
/// The characters of an id that an error message repeats.
pub(crate) const ECHO_CHARS: usize = 64;

/// `text` bounded at `FIELD_BYTES` and escaped, for a log field.
pub(crate) fn clip(text: &str) -> Clip<'_> {
    Clip {
        text,
        max: FIELD_BYTES,
        quoted: false,
    }
}

/// A peer's message bounded at `MESSAGE_BYTES`, escaped and in quotes.
pub(crate) fn clip_message(text: &str) -> Clip<'_> {
    Clip {
        text,
        max: MESSAGE_BYTES,
        quoted: true,
    }
}

/// `clip(text)` as a string: borrowed when nothing needed clipping or escaping.
pub(crate) fn clipped(text: &str) -> Cow<'_, str> {
    match is_plain(text, FIELD_BYTES, false) {
        true => Cow::Borrowed(text),
        false => Cow::Owned(clip(text).to_string()),
    }
}

/// `clip(text)` kept inline, for a record that outlives the request (the access line):
/// no allocation, whatever the text.
#[derive(Clone, Copy)]
pub(crate) struct ClippedField {
    len: u8,
    bytes: [u8; CLIPPED_FIELD_BYTES],
}

/// Room for `FIELD_BYTES` and the longest `…(+N bytes)` after them.
const CLIPPED_FIELD_BYTES: usize = FIELD_BYTES + 48;

impl ClippedField {
    pub(crate) fn of(text: &str) -> ClippedField {
        let mut field = ClippedField {
            len: 0,
            bytes: [0; CLIPPED_FIELD_BYTES],
        };
        field.set(text);
        field
    }

    /// Makes this field `clip(text)`, in place (a reused record's field).
    pub(crate) fn set(&mut self, text: &str) {
        // The usual text needs no escaping: a copy, without the formatting machinery.
        if is_plain(text, FIELD_BYTES, false) {
            self.bytes[..text.len()].copy_from_slice(text.as_bytes());
            self.len = text.len() as u8;
            return;
        }
        let mut cursor = std::io::Cursor::new(&mut self.bytes[..]);
        // `clip` writes at most `FIELD_BYTES` and its suffix, which fit.
        let _ = std::io::Write::write_fmt(&mut cursor, format_args!("{}", clip(text)));
        self.len = cursor.position() as u8;
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

/// At most `ECHO_CHARS` characters of `id`, for an error message that names it (the
/// message goes back to the client and, through the access log's code, nowhere else).
pub(crate) fn echoed(id: &str) -> Cow<'_, str> {
    match id.char_indices().nth(ECHO_CHARS) {
        None => Cow::Borrowed(id),
        Some((end, _)) => Cow::Owned(format!("{}…(+{} bytes)", &id[..end], id.len() - end)),
    }
}

/// `url` as an error or a log line may show it: a user name and password, if any, become
/// `***` (`dns:///user@name` too, where the authority follows the third slash).
pub fn without_credentials(url: &str) -> Cow<'_, str> {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return Cow::Borrowed(url);
    };
    let rest = &url[scheme_end..];
    let skip = usize::from(rest.starts_with('/'));
    let authority = &rest[skip..];
    let end = authority.find(['/', '?', '#']).unwrap_or(authority.len());
    match authority[..end].rfind('@') {
        None => Cow::Borrowed(url),
        Some(at) => {
            let start = scheme_end + skip;
            Cow::Owned(format!("{}***{}", &url[..start], &url[start + at..]))
        }
    }
}

/// Whether `url` carries a user name or password (`without_credentials` would hide one).
pub(crate) fn has_credentials(url: &str) -> bool {
    matches!(without_credentials(url), Cow::Owned(_))
}

/// Whether `text` is written as it is: short enough and nothing to escape. Every byte is
/// checked, without an early exit, so the compiler checks many at a time (the usual text,
/// the access log's path and ids on every call, is plain).
fn is_plain(text: &str, max: usize, quoted: bool) -> bool {
    text.len() <= max
        && text
            .bytes()
            .fold(true, |plain, b| plain & is_plain_byte(b, quoted))
}

/// Printable ASCII but the backslash; inside quotes also the space, but not the quote.
/// Without branches, for `is_plain`'s sake.
fn is_plain_byte(b: u8, quoted: bool) -> bool {
    let graphic = b.is_ascii_graphic();
    (graphic | (quoted & (b == b' '))) & (b != b'\\') & !(quoted & (b == b'"'))
}

/// A bounded, escaped view of a string (`clip`, `clip_message`).
pub(crate) struct Clip<'a> {
    text: &'a str,
    max: usize,
    quoted: bool,
}

impl Display for Clip<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.quoted {
            f.write_char('"')?;
        }
        if is_plain(self.text, self.max, self.quoted) {
            f.write_str(self.text)?;
        } else {
            let mut written = 0;
            for (at, c) in self.text.char_indices() {
                let plain = c.is_ascii() && is_plain_byte(c as u8, self.quoted);
                // An escape counts what it writes (`\u{…}`), so the bound holds for the output.
                let width = match plain {
                    true => 1,
                    false => 4 + (u32::from(c).max(1).ilog2() / 4 + 1) as usize,
                };
                if written + width > self.max {
                    write!(f, "…(+{} bytes)", self.text.len() - at)?;
                    break;
                }
                written += width;
                match plain {
                    true => f.write_char(c)?,
                    false => write!(f, "\\u{{{:x}}}", u32::from(c))?,
                }
            }
        }
        if self.quoted {
            f.write_char('"')?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_are_written_as_they_are() {
        for text in ["", "/a2a/jsonrpc", "\"req-1\"", "0f8e-44:ab/cd+ef=@x"] {
            assert_eq!(clip(text).to_string(), text);
            assert!(matches!(clipped(text), Cow::Borrowed(_)), "{text}");
        }
        let at_limit = "a".repeat(FIELD_BYTES);
        assert_eq!(clip(&at_limit).to_string(), at_limit);
    }

    #[test]
    fn long_values_are_cut_and_say_how_much_was_left_out() {
        let long = "a".repeat(FIELD_BYTES + 1);
        assert_eq!(
            clip(&long).to_string(),
            format!("{}…(+1 bytes)", "a".repeat(FIELD_BYTES))
        );
        let huge = "x".repeat(40_000);
        let shown = clip(&huge).to_string();
        assert!(shown.len() < FIELD_BYTES + 20, "{}", shown.len());
        assert!(shown.ends_with(&format!("…(+{} bytes)", 40_000 - FIELD_BYTES)));
    }

    #[test]
    fn separators_controls_and_non_ascii_are_escaped() {
        assert_eq!(
            clip("1 code=0 backend_status=200").to_string(),
            "1\\u{20}code=0\\u{20}backend_status=200"
        );
        assert_eq!(clip("a\nb\x1b[31m").to_string(), "a\\u{a}b\\u{1b}[31m");
        assert_eq!(clip("é\\").to_string(), "\\u{e9}\\u{5c}");
        // Escapes count against the bound too.
        let spaces = " ".repeat(1000);
        assert!(clip(&spaces).to_string().len() < FIELD_BYTES + 20);
    }

    #[test]
    fn messages_are_quoted_and_bounded() {
        assert_eq!(
            clip_message("task \"x\"\nnot found").to_string(),
            "\"task \\u{22}x\\u{22}\\u{a}not found\""
        );
        let huge = "y".repeat(10_000);
        let shown = clip_message(&huge).to_string();
        assert!(shown.len() < MESSAGE_BYTES + 22, "{}", shown.len());
    }

    #[test]
    fn inline_fields_hold_what_clip_writes() {
        for text in [
            "/a2a/jsonrpc",
            "",
            &"x".repeat(10_000_000),
            &"é".repeat(1000),
        ] {
            assert_eq!(ClippedField::of(text).as_str(), clip(text).to_string());
        }
    }

    #[test]
    fn credentials_in_urls_are_hidden() {
        for (url, shown) in [
            ("https://user:pw@agent:443/a", "https://***@agent:443/a"),
            ("http://token@agent", "http://***@agent"),
            (
                "dns:///user:pw@agents.ns:50051",
                "dns:///***@agents.ns:50051",
            ),
            ("http://a:b@c@agent/x@y", "http://***@agent/x@y"),
            ("https://agent/path@x?q=a@b", "https://agent/path@x?q=a@b"),
            ("dns:///agents.ns:50051", "dns:///agents.ns:50051"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(without_credentials(url), shown, "{url}");
            assert_eq!(has_credentials(url), url != shown, "{url}");
        }
    }

    #[test]
    fn echoes_repeat_a_bounded_prefix() {
        assert_eq!(echoed("task-1"), "task-1");
        let long = "é".repeat(1000);
        let echo = echoed(&long);
        assert!(echo.starts_with(&"é".repeat(ECHO_CHARS)));
        assert!(echo.ends_with(&format!("…(+{} bytes)", 2 * (1000 - ECHO_CHARS))));
    }
}
