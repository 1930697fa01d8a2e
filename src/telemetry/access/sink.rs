//! Where access lines go, off the request path. A call's line is formatted straight from its
//! fields into one buffer shared by the serving threads (held for the formatting only; a
//! serving thread formats its lines when it goes idle, after the replies went out, so lines
//! keep the order their calls ended in per thread, and carry the time each ended,
//! `access::defer_lines`); a thread of its own, `access-log`, swaps the
//! buffer for an empty one every `FLUSH_EVERY` (or sooner, once it holds `WAKE_AT` bytes)
//! and hands it, in pieces of whole lines, to the log's writer (`tracing-appender`'s
//! non-blocking one, which the other events go through too, so the order holds). So a call
//! pays for none of it before its reply: no formatting, no system call, no allocation once
//! the buffers have grown, and a stuck stderr never stalls a call.
//!
//! The lines look exactly like the log's other events (`tracing-subscriber`'s full text
//! format, or its JSON), so one parser reads both. Bounded: the buffer holds at most
//! `MAX_PENDING` bytes and the writer's queue a fixed number of pieces; past either, lines
//! are dropped and counted (`dropped`). `flush` hands over what is buffered (at exit).

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, OnceLock};

use std::time::{Duration, SystemTime};
use tracing_appender::non_blocking::NonBlocking;

/// How often buffered lines are written.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// A buffer this full wakes the writer at once.
const WAKE_AT: usize = 64 << 10;
/// The most the buffer holds while stderr does not take it.
const MAX_PENDING: usize = 4 << 20;

/// The two shapes of the log (`--log-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFormat {
    /// The line `tracing`'s text formatter would write.
    Text,
    /// The object `tracing`'s JSON formatter would write.
    Json,
}

/// A field's name as each format writes it before the value (` name=`, `,"name":`), made
/// by `field_name!` at compile time, so a field's start is one copy.
#[derive(Clone, Copy)]
pub(crate) struct FieldName {
    pub(crate) text: &'static str,
    pub(crate) json: &'static str,
}

impl FieldName {
    fn start(self, format: LineFormat) -> &'static [u8] {
        match format {
            LineFormat::Text => self.text.as_bytes(),
            LineFormat::Json => self.json.as_bytes(),
        }
    }
}

/// The `FieldName` of `name` (a string literal).
macro_rules! field_name {
    ($name:literal) => {
        $crate::telemetry::access::sink::FieldName {
            text: concat!(" ", $name, "="),
            json: concat!(",\"", $name, "\":"),
        }
    };
}
pub(crate) use field_name;

struct Sink {
    format: LineFormat,
    /// Lines not yet written.
    buffer: Mutex<Vec<u8>>,
    /// Set (and notified) when a buffer passed `WAKE_AT`.
    wake: (Mutex<bool>, Condvar),
    /// The log's writer; one holder at a time, so pieces keep their order.
    writer: Mutex<NonBlocking>,
    dropped: AtomicU64,
}

static SINK: OnceLock<Sink> = OnceLock::new();

thread_local! {
    /// The second this thread last wrote a timestamp for, and its text up to the seconds.
    static SECOND: std::cell::Cell<(u64, [u8; 19])> = const { std::cell::Cell::new((u64::MAX, [0; 19])) };
}

/// Starts the writer thread: access lines go to `writer` in `format` from now on. Once per
/// process; a second call changes nothing.
pub fn install(format: LineFormat, writer: NonBlocking) -> std::io::Result<()> {
    if SINK.get().is_some() {
        return Ok(());
    }
    let _ = SINK.set(Sink {
        format,
        buffer: Mutex::new(Vec::with_capacity(WAKE_AT)),
        wake: (Mutex::new(false), Condvar::new()),
        writer: Mutex::new(writer),
        dropped: AtomicU64::new(0),
    });
    std::thread::Builder::new()
        .name("access-log".into())
        .spawn(write_forever)
        .map(drop)
}

/// Whether lines are taken (`install` ran).
pub(crate) fn installed() -> bool {
    SINK.get().is_some()
}

/// Writes every buffered line now.
pub fn flush() {
    if let Some(sink) = SINK.get() {
        sink.write_all(&mut Vec::new());
    }
}

/// Access lines dropped, and pieces of the log (an event, or a piece of access lines)
/// the writer dropped, because stderr did not take them.
pub(crate) fn dropped() -> u64 {
    SINK.get().map_or(0, |sink| {
        let writer = sink.writer.lock().unwrap_or_else(|e| e.into_inner());
        sink.dropped.load(Relaxed) + writer.error_counter().dropped_lines() as u64
    })
}

/// Appends `lines` lines, written by `fill` in the installed format, to the buffer (one
/// lock for them all; past `MAX_PENDING` all of them are dropped and counted).
pub(crate) fn append(lines: usize, fill: impl FnOnce(&mut Vec<u8>, LineFormat)) {
    let Some(sink) = SINK.get() else {
        return;
    };
    let mut bytes = sink.buffer.lock().unwrap_or_else(|e| e.into_inner());
    if bytes.len() >= MAX_PENDING {
        sink.dropped.fetch_add(lines as u64, Relaxed);
        return;
    }
    let before = bytes.len();
    fill(&mut bytes, sink.format);
    if before < WAKE_AT && bytes.len() >= WAKE_AT {
        drop(bytes);
        let (woken, condvar) = &sink.wake;
        *woken.lock().unwrap_or_else(|e| e.into_inner()) = true;
        condvar.notify_one();
    }
}

/// The event's opening in `format`: the time it happened (`at`) and, in text, the level
/// and target.
pub(crate) fn open_line(out: &mut Vec<u8>, format: LineFormat, target: &str, at: SystemTime) {
    match format {
        LineFormat::Text => {
            timestamp(out, at);
            out.extend_from_slice(b"  INFO ");
            out.extend_from_slice(target.as_bytes());
            out.extend_from_slice(b": access");
        }
        LineFormat::Json => {
            out.extend_from_slice(b"{\"timestamp\":\"");
            timestamp(out, at);
            out.extend_from_slice(b"\",\"level\":\"INFO\",\"fields\":{\"message\":\"access\"");
        }
    }
}

/// A field whose value is text: quoted as `tracing` quotes a `&str` (its `Debug`).
#[inline]
pub(crate) fn text_field(out: &mut Vec<u8>, format: LineFormat, name: FieldName, value: &str) {
    match format {
        LineFormat::Text => {
            out.extend_from_slice(name.start(format));
            out.push(b'"');
            escape_quotes(out, value);
            out.push(b'"');
        }
        LineFormat::Json => json_field(out, name, value),
    }
}

/// A field whose value is text already bounded and free of spaces and control characters
/// (a clipped field, a number, `-`): bare in text, as `Display` (`%value`) writes it; a
/// JSON string in JSON. Written straight, without the formatting machinery.
#[inline]
pub(crate) fn bare_field(out: &mut Vec<u8>, format: LineFormat, name: FieldName, value: &str) {
    match format {
        LineFormat::Text => {
            out.extend_from_slice(name.start(format));
            out.extend_from_slice(value.as_bytes());
        }
        LineFormat::Json => json_field(out, name, value),
    }
}

/// A field whose value is written with `Display` (`%value` in `tracing`): bare in text, a
/// JSON string in JSON.
pub(crate) fn shown_field(
    out: &mut Vec<u8>,
    format: LineFormat,
    name: FieldName,
    value: &dyn std::fmt::Display,
) {
    out.extend_from_slice(name.start(format));
    match format {
        LineFormat::Text => {
            let _ = write!(out, "{value}");
        }
        LineFormat::Json => {
            out.push(b'"');
            let _ = std::fmt::Write::write_fmt(&mut JsonEscaped(out), format_args!("{value}"));
            out.push(b'"');
        }
    }
}

/// A number field.
#[inline]
pub(crate) fn number_field(out: &mut Vec<u8>, format: LineFormat, name: FieldName, value: i64) {
    out.extend_from_slice(name.start(format));
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// The event's end.
pub(crate) fn close_line(out: &mut Vec<u8>, format: LineFormat, target: &str) {
    if format == LineFormat::Json {
        out.extend_from_slice(b"},\"target\":\"");
        out.extend_from_slice(target.as_bytes());
        out.extend_from_slice(b"\"}");
    }
    out.push(b'\n');
}

fn json_field(out: &mut Vec<u8>, name: FieldName, value: &str) {
    out.extend_from_slice(name.json.as_bytes());
    out.push(b'"');
    // Printable ASCII but the quote and backslash, the usual value, goes as it is.
    if value
        .bytes()
        .all(|b| b.is_ascii() && !b.is_ascii_control() && b != b'"' && b != b'\\')
    {
        out.extend_from_slice(value.as_bytes());
    } else {
        let _ = std::fmt::Write::write_str(&mut JsonEscaped(out), value);
    }
    out.push(b'"');
}

/// Writes text into a JSON string's body: quotes, backslashes and control characters
/// escaped (RFC 8259 section 7), straight into the buffer.
struct JsonEscaped<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for JsonEscaped<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        for piece in text.split_inclusive(|c: char| c == '"' || c == '\\' || c.is_control()) {
            let (head, last) =
                piece.split_at(piece.len() - piece.chars().next_back().map_or(0, char::len_utf8));
            match last.chars().next() {
                Some(c @ ('"' | '\\')) => {
                    self.0.extend_from_slice(head.as_bytes());
                    self.0.extend_from_slice(&[b'\\', c as u8]);
                }
                Some(c) if c.is_control() => {
                    self.0.extend_from_slice(head.as_bytes());
                    let _ = write!(self.0, "\\u{:04x}", u32::from(c));
                }
                _ => self.0.extend_from_slice(piece.as_bytes()),
            }
        }
        Ok(())
    }
}

fn escape_quotes(out: &mut Vec<u8>, value: &str) {
    // The usual value (a request path) has neither: one check of every byte, no early exit.
    let special = |b: u8| (b == b'"') | (b == b'\\');
    if !value.bytes().fold(false, |any, b| any | special(b)) {
        out.extend_from_slice(value.as_bytes());
        return;
    }
    let mut rest = value.as_bytes();
    while let Some(at) = rest.iter().position(|b| special(*b)) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(&[b'\\', rest[at]]);
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
}

/// `at` as `tracing-subscriber` writes the time: `2026-12-03T08:39:45.587309Z`. The date
/// and time up to the seconds are worked out once per second per thread.
fn timestamp(out: &mut Vec<u8>, at: SystemTime) {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = since.as_secs();
    let (cached, mut text) = SECOND.get();
    if cached != seconds {
        let date = time::OffsetDateTime::from_unix_timestamp(seconds as i64)
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        let mut cursor = std::io::Cursor::new(&mut text[..]);
        let _ = write!(
            cursor,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            date.year(),
            u8::from(date.month()),
            date.day(),
            date.hour(),
            date.minute(),
            date.second()
        );
        SECOND.set((seconds, text));
    }
    out.extend_from_slice(&text);
    // Six digits of microseconds, zero-padded.
    let mut digits = itoa::Buffer::new();
    let micros = digits.format(since.subsec_micros() + 1_000_000);
    out.push(b'.');
    out.extend_from_slice(&micros.as_bytes()[1..]);
    out.push(b'Z');
}

/// The writer thread: every `FLUSH_EVERY`, or when woken, the buffer to stderr.
fn write_forever() {
    let Some(sink) = SINK.get() else {
        return;
    };
    let mut spare = Vec::with_capacity(WAKE_AT);
    loop {
        {
            let (woken, condvar) = &sink.wake;
            let guard = woken.lock().unwrap_or_else(|e| e.into_inner());
            let (mut guard, _) = condvar
                .wait_timeout_while(guard, FLUSH_EVERY, |woken| !*woken)
                .unwrap_or_else(|e| e.into_inner());
            *guard = false;
        }
        sink.write_all(&mut spare);
    }
}

impl Sink {
    /// Swaps the buffer for `spare` (emptied) and hands what it held to the writer, in
    /// pieces of whole lines of at most `WAKE_AT` bytes (one queue slot each).
    fn write_all(&self, spare: &mut Vec<u8>) {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        spare.clear();
        std::mem::swap(
            &mut *self.buffer.lock().unwrap_or_else(|e| e.into_inner()),
            spare,
        );
        let mut rest = &spare[..];
        while !rest.is_empty() {
            let window = &rest[..rest.len().min(WAKE_AT)];
            let end = match window.iter().rposition(|b| *b == b'\n') {
                Some(newline) if window.len() < rest.len() => newline + 1,
                _ => window.len(),
            };
            // A lossy writer takes every piece; one it drops is counted there.
            let _ = writer.write_all(&rest[..end]);
            rest = &rest[end..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(format: LineFormat) -> String {
        let mut out = Vec::new();
        open_line(&mut out, format, "a2a_gateway::access", SystemTime::now());
        text_field(&mut out, format, field_name!("route"), "/a\"b\\c\u{1}");
        shown_field(&mut out, format, field_name!("id"), &"\"x\"");
        number_field(&mut out, format, field_name!("code"), -32001);
        close_line(&mut out, format, "a2a_gateway::access");
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn text_lines_are_tracings_full_format() {
        let text = line(LineFormat::Text);
        let (time, rest) = text.split_once("  ").unwrap();
        assert_eq!(time.len(), "2026-12-03T08:39:45.587309Z".len(), "{text}");
        assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{text}");
        assert_eq!(
            rest,
            "INFO a2a_gateway::access: access route=\"/a\\\"b\\\\c\u{1}\" id=\"x\" code=-32001\n"
        );
    }

    #[test]
    fn json_lines_are_tracings_json_format() {
        let text = line(LineFormat::Json);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["level"], "INFO");
        assert_eq!(value["target"], "a2a_gateway::access");
        assert_eq!(value["fields"]["message"], "access");
        assert_eq!(value["fields"]["route"], "/a\"b\\c\u{1}");
        assert_eq!(value["fields"]["id"], "\"x\"");
        assert_eq!(value["fields"]["code"], -32001);
        let time = value["timestamp"].as_str().unwrap();
        let parsed =
            time::OffsetDateTime::parse(time, &time::format_description::well_known::Rfc3339);
        assert!(parsed.is_ok(), "{time}");
    }
}
