//! An incremental Server-Sent Events parser (WHATWG HTML "event stream interpretation"),
//! for the event streams of HTTP+JSON backends (spec 11.7).
//!
//! Feed it the body's chunks as they arrive and take complete events out. Chunk boundaries
//! may fall anywhere: inside a line, inside a UTF-8 character, between the CR and LF of a
//! CRLF, inside the leading BOM. Lines end with CRLF, LF or CR; `:` lines are comments;
//! `data:` lines of one event are joined with `\n`; `event:` sets the type (default
//! `message`); `id:` and `retry:` are accepted and ignored (the gateway never reconnects).
//! Lines are decoded as UTF-8 with replacement characters, as the standard says.
//!
//! One deliberate deviation: at the end of the body, an event that was not closed by a
//! blank line is still dispatched (the standard discards it). Servers that end with
//! `data: …\n` and close exist; a truly truncated event then fails to decode downstream
//! instead of vanishing silently. Events whose data is empty are not dispatched (the
//! standard dispatches `data:` with an empty value); no A2A event is empty.

use std::collections::VecDeque;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; `message` when the event named none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// A line or an event grew beyond the parser's limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("server-sent event larger than {limit} bytes")]
pub struct SseTooLarge {
    pub limit: usize,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The parser's state between chunks.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of the line being received (no terminator).
    line: Vec<u8>,
    /// The previous chunk ended with CR: a leading LF of the next one completes a CRLF.
    after_cr: bool,
    /// No line has been completed yet, so a BOM may still have to be stripped.
    first_line: bool,
    event: String,
    data: String,
    /// At least one `data` field was seen for the pending event.
    has_data: bool,
    ready: VecDeque<SseEvent>,
    limit: usize,
}

impl SseParser {
    /// A parser that refuses lines and events larger than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            event: String::new(),
            data: String::new(),
            has_data: false,
            ready: VecDeque::new(),
            limit,
        }
    }

    /// Consumes one chunk of the body; complete events become available to `next_event`.
    pub fn feed(&mut self, mut chunk: &[u8]) -> Result<(), SseTooLarge> {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\r' || b == b'\n') {
            self.line.extend_from_slice(&chunk[..end]);
            self.check_size()?;
            self.end_line();
            let crlf = chunk[end] == b'\r' && chunk.get(end + 1) == Some(&b'\n');
            if chunk[end] == b'\r' && end + 1 == chunk.len() {
                self.after_cr = true;
            }
            chunk = &chunk[end + if crlf { 2 } else { 1 }..];
        }
        self.line.extend_from_slice(chunk);
        self.check_size()
    }

    /// Ends the body: an unterminated last line is taken as a line, and a pending event is
    /// dispatched even without its closing blank line.
    pub fn finish(&mut self) {
        if !self.line.is_empty() {
            self.end_line();
        }
        self.dispatch();
    }

    /// The next complete event, in stream order.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        self.ready.pop_front()
    }

    fn check_size(&self) -> Result<(), SseTooLarge> {
        if self.line.len() + self.data.len() > self.limit {
            Err(SseTooLarge { limit: self.limit })
        } else {
            Ok(())
        }
    }

    fn end_line(&mut self) {
        let mut line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.first_line) && line.starts_with(BOM) {
            line.drain(..BOM.len());
        }
        if line.is_empty() {
            self.dispatch();
        } else {
            self.field(&String::from_utf8_lossy(&line));
        }
        line.clear();
        self.line = line; // keep the allocation
    }

    fn field(&mut self, line: &str) {
        if line.starts_with(':') {
            return; // comment
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => value.clone_into(&mut self.event),
            _ => {} // id, retry and unknown fields
        }
    }

    fn dispatch(&mut self) {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        // The standard dispatches nothing when the data buffer is empty.
        if std::mem::take(&mut self.has_data) && !data.is_empty() {
            let event = if event.is_empty() {
                "message".to_owned()
            } else {
                event
            };
            self.ready.push_back(SseEvent { event, data });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    /// Parses `input` fed in the given chunks, then finishes.
    fn parse_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new(1 << 20);
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk).unwrap();
            while let Some(e) = parser.next_event() {
                out.push(e);
            }
        }
        parser.finish();
        while let Some(e) = parser.next_event() {
            out.push(e);
        }
        out
    }

    /// Parses `input` split at every possible pair of positions: the result must not depend
    /// on where chunk boundaries fall.
    fn parse_every_split(input: &[u8]) -> Vec<SseEvent> {
        let whole = parse_chunks(&[input]);
        for i in 0..=input.len() {
            for j in i..=input.len() {
                let got = parse_chunks(&[&input[..i], &input[i..j], &input[j..]]);
                assert_eq!(got, whole, "split at {i} and {j} of {input:?}");
            }
        }
        // And byte by byte.
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(parse_chunks(&bytes), whole, "byte by byte");
        whole
    }

    #[test]
    fn lf_crlf_and_cr_line_endings() {
        let expected = vec![ev("message", "a"), ev("message", "b")];
        assert_eq!(parse_every_split(b"data: a\n\ndata: b\n\n"), expected);
        assert_eq!(
            parse_every_split(b"data: a\r\n\r\ndata: b\r\n\r\n"),
            expected
        );
        assert_eq!(parse_every_split(b"data: a\r\rdata: b\r\r"), expected);
        assert_eq!(parse_every_split(b"data: a\r\n\ndata: b\r\r\n"), expected);
    }

    #[test]
    fn cr_then_lf_in_the_next_chunk_is_one_line_end() {
        let got = parse_chunks(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(got, vec![ev("message", "a\nb")]);
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let input = b": keepalive\n\n:another\nid: 7\nretry: 1000\nfoo: bar\ndata: x\n\n";
        assert_eq!(parse_every_split(input), vec![ev("message", "x")]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let input = b"data: {\"a\":\ndata:1}\ndata\n\n";
        assert_eq!(
            parse_every_split(input),
            vec![ev("message", "{\"a\":\n1}\n")]
        );
    }

    #[test]
    fn only_one_leading_space_is_stripped() {
        assert_eq!(
            parse_every_split(b"data:  two\n\n"),
            vec![ev("message", " two")]
        );
        assert_eq!(
            parse_every_split(b"data:none\n\n"),
            vec![ev("message", "none")]
        );
    }

    #[test]
    fn event_field_names_the_type_for_one_event() {
        let input = b"event: error\ndata: {\"error\":{}}\n\ndata: next\n\n";
        assert_eq!(
            parse_every_split(input),
            vec![ev("error", "{\"error\":{}}"), ev("message", "next")]
        );
    }

    #[test]
    fn events_without_data_are_not_dispatched() {
        assert_eq!(parse_every_split(b"event: ping\n\n\n\ndata:\n\n"), vec![]);
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let input = "data: tâche ✓ 🎉\n\n".as_bytes();
        assert_eq!(parse_every_split(input), vec![ev("message", "tâche ✓ 🎉")]);
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(
            parse_chunks(&[b"data: a\xFFb\n\n"]),
            vec![ev("message", "a\u{FFFD}b")]
        );
    }

    #[test]
    fn bom_at_start_is_stripped_even_when_split() {
        let input = b"\xEF\xBB\xBFdata: x\n\n";
        assert_eq!(parse_every_split(input), vec![ev("message", "x")]);
        // Only at the start of the stream.
        let later = b"data: x\n\n\xEF\xBB\xBFdata: y\n\n";
        assert_eq!(parse_chunks(&[later]), vec![ev("message", "x")]);
    }

    #[test]
    fn last_event_without_blank_line_is_dispatched_at_the_end() {
        assert_eq!(parse_every_split(b"data: x\n"), vec![ev("message", "x")]);
        assert_eq!(parse_every_split(b"data: x"), vec![ev("message", "x")]);
    }

    #[test]
    fn events_are_available_as_soon_as_complete() {
        let mut parser = SseParser::new(1024);
        parser.feed(b"data: 1\n\ndata: 2\n").unwrap();
        assert_eq!(parser.next_event(), Some(ev("message", "1")));
        assert_eq!(parser.next_event(), None);
        parser.feed(b"\n").unwrap();
        assert_eq!(parser.next_event(), Some(ev("message", "2")));
    }

    #[test]
    fn oversized_lines_and_events_are_refused() {
        let mut parser = SseParser::new(8);
        assert!(parser.feed(b"data: 1234").is_err());
        let mut parser = SseParser::new(8);
        parser.feed(b"data: 1234\n").unwrap_err();
        let mut parser = SseParser::new(12);
        parser.feed(b"data: 12345\n").unwrap();
        assert_eq!(
            parser.feed(b"data: 12345\n"),
            Err(SseTooLarge { limit: 12 })
        );
    }
}
